//! The decoder's key/value cache: grown by concatenation (differentiable, for the RL
//! scorer's shared contexts) or written in place into preallocated buffers (sampling).

use super::fused::{RopeTables, SharedRows};
use candle_core::{Result, Tensor};

/// Additive key mask on left padding (finite: see `Decoder::forward_hidden_masked`).
const PAD_MASK: f32 = -1e9;

/// The additive key mask (`Decoder::forward_hidden_masked`) of one row left-padded to
/// `len` positions: `pads` masked positions, then the row's own.
pub fn left_pad_mask(pads: usize, len: usize) -> Vec<f32> {
    let mut m = vec![PAD_MASK; pads];
    m.resize(len, 0.0);
    m
}

/// One layer's cached keys and values, `(batch, kv_heads, positions, head_dim)`.
#[derive(Debug, Clone)]
pub(super) enum LayerKv {
    /// Grown by concatenation: differentiable (gradients flow through cached keys
    /// and values, as the RL scorer's shared-prompt pass needs), but every new
    /// token copies the whole cache.
    Concat(Tensor, Tensor),
    /// Preallocated buffers written in place (`slice_set`), capacity doubled when
    /// full: a new token copies only itself. Not differentiable — for sampling.
    Buffer { k: Tensor, v: Tensor, len: usize },
}

impl LayerKv {
    fn len(&self) -> usize {
        match self {
            LayerKv::Concat(k, _) => k.dim(2).unwrap_or(0),
            LayerKv::Buffer { len, .. } => *len,
        }
    }

    fn map(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<LayerKv> {
        Ok(match self {
            LayerKv::Concat(k, v) => LayerKv::Concat(f(k)?, f(v)?),
            LayerKv::Buffer { k, v, len } => LayerKv::Buffer {
                k: f(k)?,
                v: f(v)?,
                len: *len,
            },
        })
    }

    /// Appends `(k, v)` (`(b, kv, l, d)`) and returns the keys and values of every
    /// cached position.
    pub(super) fn append(
        slot: &mut Option<LayerKv>,
        k: Tensor,
        v: Tensor,
        headroom: Option<usize>,
    ) -> Result<(Tensor, Tensor)> {
        let l = k.dim(2)?;
        let next = match (slot.take(), headroom) {
            (None, Some(headroom)) => {
                let (b, kv, _, d) = k.dims4()?;
                // Exactly what was asked for: callers that know how far decoding goes
                // (RL: the prompt and `max_new_tokens`) never copy or grow the buffer,
                // and copies of it (`select_batch`) move no unused capacity.
                let cap = l + headroom;
                let kb = Tensor::zeros((b, kv, cap, d), k.dtype(), k.device())?;
                let vb = Tensor::zeros((b, kv, cap, d), v.dtype(), v.device())?;
                kb.slice_set(&k.contiguous()?, 2, 0)?;
                vb.slice_set(&v.contiguous()?, 2, 0)?;
                LayerKv::Buffer {
                    k: kb,
                    v: vb,
                    len: l,
                }
            }
            (None, None) => LayerKv::Concat(k, v),
            (Some(LayerKv::Concat(pk, pv)), _) => {
                LayerKv::Concat(Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?)
            }
            (Some(LayerKv::Buffer { k: kb, v: vb, len }), _) => {
                let (b, kv, cap, d) = kb.dims4()?;
                let (kb, vb) = if len + l > cap {
                    let cap2 = (len + l).next_power_of_two().max(cap * 2);
                    let nk = Tensor::zeros((b, kv, cap2, d), kb.dtype(), kb.device())?;
                    let nv = Tensor::zeros((b, kv, cap2, d), vb.dtype(), vb.device())?;
                    nk.slice_set(&kb.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                    nv.slice_set(&vb.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                    (nk, nv)
                } else {
                    (kb, vb)
                };
                kb.slice_set(&k.contiguous()?, 2, len)?;
                vb.slice_set(&v.contiguous()?, 2, len)?;
                LayerKv::Buffer {
                    k: kb,
                    v: vb,
                    len: len + l,
                }
            }
        };
        let out = match &next {
            LayerKv::Concat(k, v) => (k.clone(), v.clone()),
            LayerKv::Buffer { k, v, len } => (k.narrow(2, 0, *len)?, v.narrow(2, 0, *len)?),
        };
        *slot = Some(next);
        Ok(out)
    }
}

/// Positions a fresh decoding buffer holds beyond its prompt before it grows.
const DECODE_HEADROOM: usize = 256;

/// Per-layer cached keys and values. [`KvCache::new`] grows by concatenation and
/// keeps gradients; [`KvCache::for_decoding`] writes into preallocated buffers, so
/// sampling a token costs no copy of the cache.
#[derive(Debug, Clone, Default)]
pub struct KvCache {
    pub(super) layers: Vec<Option<LayerKv>>,
    /// Buffered (decoding) caches: positions a fresh buffer holds beyond its first
    /// input before it grows.
    pub(super) headroom: Option<usize>,
    /// Rows that are copies of another over their first positions (a prompt's
    /// samples), for the decode kernel to read those keys once per group.
    pub(super) shared: Option<SharedRows>,
}

impl KvCache {
    /// An empty, differentiable cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache for sampling (in-place writes; no gradients through it).
    pub fn for_decoding() -> Self {
        Self::for_decoding_with_headroom(DECODE_HEADROOM)
    }

    /// [`Self::for_decoding`] whose first buffers hold `headroom` positions beyond
    /// the prompt before doubling.
    pub fn for_decoding_with_headroom(headroom: usize) -> Self {
        KvCache {
            layers: Vec::new(),
            headroom: Some(headroom),
            shared: None,
        }
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.layers
            .first()
            .and_then(|l| l.as_ref())
            .map_or(0, LayerKv::len)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn map(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<KvCache> {
        let layers = self
            .layers
            .iter()
            .map(|l| l.as_ref().map(|l| l.map(&f)).transpose())
            .collect::<Result<_>>()?;
        Ok(KvCache {
            layers,
            headroom: self.headroom,
            shared: None,
        })
    }

    /// The cache rows `idx` (a u32 tensor of batch indices), e.g. each prompt of a
    /// batch repeated for its samples. Rows selected from one row are recorded as
    /// copies over the positions cached now ([`Self::shared_rows`]).
    pub fn select_batch(&self, idx: &Tensor) -> Result<KvCache> {
        let mut out = self.map(|t| t.index_select(idx, 0))?;
        if !self.is_empty() {
            out.shared = SharedRows::of(&idx.to_vec1::<u32>()?, self.len());
        }
        Ok(out)
    }

    /// Which rows are copies of which over their first positions, when known.
    pub fn shared_rows(&self) -> Option<&SharedRows> {
        self.shared.as_ref()
    }

    /// Keeps the batch rows `keep` (ascending, distinct), in that order. A decoding
    /// cache moves them to the front of its own buffers and allocates nothing (only
    /// the cached positions of each moved row are copied), where [`Self::select_batch`]
    /// allocates and fills new buffers: as rows finish sampling, a 64-row cache of
    /// live MiniWoB prompts is tens of megabytes per layer, each new one paid in page
    /// faults. The buffers must not be shared with a clone of this cache (it would
    /// see the rows move); a fresh `select_batch` result never is.
    pub fn retain_rows(&mut self, keep: &[usize]) -> Result<()> {
        let rows = self
            .layers
            .iter()
            .flatten()
            .next()
            .map(|l| match l {
                LayerKv::Concat(k, _) | LayerKv::Buffer { k, .. } => k.dim(0),
            })
            .transpose()?
            .unwrap_or(0);
        if keep.windows(2).any(|w| w[0] >= w[1]) || keep.last().is_some_and(|&b| b >= rows) {
            candle_core::bail!("retain_rows: {keep:?} is not ascending within {rows} rows");
        }
        for layer in self.layers.iter_mut().flatten() {
            match layer {
                LayerKv::Concat(k, v) => {
                    let idx: Vec<u32> = keep.iter().map(|&b| b as u32).collect();
                    let idx = Tensor::from_vec(idx, keep.len(), k.device())?;
                    *k = k.index_select(&idx, 0)?;
                    *v = v.index_select(&idx, 0)?;
                }
                LayerKv::Buffer { k, v, len } => {
                    for (j, &b) in keep.iter().enumerate().filter(|(j, b)| j != *b) {
                        for t in [&*k, &*v] {
                            // Row `b`'s cached positions, copied out first: `slice_set`
                            // refuses a source that shares the target's storage.
                            let row = t.narrow(0, b, 1)?.narrow(2, 0, *len)?.force_contiguous()?;
                            t.narrow(0, j, 1)?.slice_set(&row, 2, 0)?;
                        }
                    }
                    *k = k.narrow(0, 0, keep.len())?;
                    *v = v.narrow(0, 0, keep.len())?;
                }
            }
        }
        self.shared = self.shared.take().and_then(|s| s.retain(keep));
        Ok(())
    }

    /// The cache of a batch-1 prefix repeated for a batch of `n` continuations (the
    /// prompt is encoded once, then `n` samples decode from it).
    pub fn repeat_batch(&self, n: usize) -> Result<KvCache> {
        self.map(|t| Tensor::cat(&vec![t; n], 0))
    }

    /// Every layer's cached keys and values (its cached positions only) passed
    /// through `f`; each layer keeps its kind (a buffer's capacity is not kept).
    fn each_layer(
        &self,
        f: impl Fn(&Tensor, &Tensor) -> Result<(Tensor, Tensor)>,
    ) -> Result<KvCache> {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                l.as_ref()
                    .map(|l| -> Result<LayerKv> {
                        Ok(match l {
                            LayerKv::Concat(k, v) => {
                                let (k, v) = f(k, v)?;
                                LayerKv::Concat(k, v)
                            }
                            LayerKv::Buffer { k, v, len } => {
                                let (k, v) = f(&k.narrow(2, 0, *len)?, &v.narrow(2, 0, *len)?)?;
                                let len = k.dim(2)?;
                                LayerKv::Buffer { k, v, len }
                            }
                        })
                    })
                    .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(KvCache {
            layers,
            headroom: self.headroom,
            shared: None,
        })
    }

    /// Every layer's cached keys passed through `f` (e.g. rotated further), values
    /// as they are.
    pub fn map_keys(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<KvCache> {
        self.each_layer(|k, v| Ok((f(k)?, v.clone())))
    }

    /// The cache with every key turned by the rotary table of one position `rope`
    /// (moving them all that many positions later, or earlier for a negative turn;
    /// values are unchanged).
    pub fn turned(&self, rope: &RopeTables) -> Result<KvCache> {
        self.map_keys(|k| {
            // (b, kv, l, d) as l·kv rows at one position: the same turn for each.
            let (b, h, l, d) = k.dims4()?;
            super::fused::rope(&k.contiguous()?.reshape((b, h * l, 1, d))?, rope)?
                .reshape((b, h, l, d))
        })
    }

    /// The cache without its first `n` positions, in fresh buffers holding `headroom`
    /// more (the next input continues where this cache's did).
    pub fn skip_front(&self, n: usize, headroom: usize) -> Result<KvCache> {
        let len = self.len();
        if n > len {
            candle_core::bail!("skip_front: {n} of {len} positions");
        }
        let view =
            self.each_layer(|k, v| Ok((k.narrow(2, n, len - n)?, v.narrow(2, n, len - n)?)))?;
        KvCache::stack_left_padded(&[view], headroom)
    }

    /// Caches of one row each, of any lengths, as one decoding cache of their rows
    /// in order: each left-padded with zeros to the longest (callers mask the pads
    /// out of attention), with buffers that hold `headroom` more positions.
    pub fn stack_left_padded(parts: &[KvCache], headroom: usize) -> Result<KvCache> {
        let longest = parts.iter().map(KvCache::len).max().unwrap_or(0);
        let n_layers = parts.first().map_or(0, |p| p.layers.len());
        if parts
            .iter()
            .any(|p| p.layers.len() != n_layers || p.is_empty())
        {
            candle_core::bail!("stacked caches must be non-empty and of one model");
        }
        let mut layers = Vec::with_capacity(n_layers);
        for li in 0..n_layers {
            let mut ks = Vec::with_capacity(parts.len());
            let mut vs = Vec::with_capacity(parts.len());
            for p in parts {
                let (k, v) = match p.layers[li].as_ref() {
                    Some(LayerKv::Concat(k, v)) => (k.clone(), v.clone()),
                    Some(LayerKv::Buffer { k, v, len }) => {
                        (k.narrow(2, 0, *len)?, v.narrow(2, 0, *len)?)
                    }
                    None => candle_core::bail!("layer {li} of a stacked cache is empty"),
                };
                let pad = longest - k.dim(2)?;
                ks.push(k.pad_with_zeros(2, pad, headroom)?);
                vs.push(v.pad_with_zeros(2, pad, headroom)?);
            }
            layers.push(Some(LayerKv::Buffer {
                k: Tensor::cat(&ks, 0)?.contiguous()?,
                v: Tensor::cat(&vs, 0)?.contiguous()?,
                len: longest,
            }));
        }
        Ok(KvCache {
            layers,
            headroom: Some(headroom),
            shared: None,
        })
    }

    /// Forgets every position from `len` on (nothing when it holds `len` or fewer):
    /// the next input continues at position `len`. A decoding cache keeps its buffers
    /// and overwrites the forgotten positions in place.
    pub fn truncate(&mut self, len: usize) -> Result<()> {
        for slot in self.layers.iter_mut() {
            match slot {
                Some(LayerKv::Buffer { len: l, .. }) => *l = (*l).min(len),
                Some(LayerKv::Concat(k, v)) if k.dim(2)? > len => {
                    *k = k.narrow(2, 0, len)?;
                    *v = v.narrow(2, 0, len)?;
                }
                _ => {}
            }
        }
        if let Some(s) = self.shared.as_mut() {
            s.len = s.len.min(len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// A one-layer cache of `rows` rows and `len` positions (distinct values), buffered
    /// with `headroom` positions to spare or, without, concatenated.
    fn cache(rows: usize, len: usize, headroom: Option<usize>) -> KvCache {
        let n = rows * 2 * len * 3;
        let k = Tensor::arange(0f32, n as f32, &Device::Cpu)
            .unwrap()
            .reshape((rows, 2, len, 3))
            .unwrap();
        let v = (&k * -1.0).unwrap();
        let mut slot = None;
        LayerKv::append(&mut slot, k, v, headroom).unwrap();
        KvCache {
            layers: vec![slot],
            headroom,
            shared: None,
        }
    }

    /// The cached keys and values as nested vectors (positions `..len` only).
    fn contents(c: &KvCache) -> (Vec<f32>, Vec<f32>) {
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        match c.layers[0].as_ref().unwrap() {
            LayerKv::Concat(k, v) => (flat(k), flat(v)),
            LayerKv::Buffer { k, v, len } => (
                flat(&k.narrow(2, 0, *len).unwrap()),
                flat(&v.narrow(2, 0, *len).unwrap()),
            ),
        }
    }

    /// One more position for every row of `c`.
    fn push(c: &mut KvCache, rows: usize) {
        let k = Tensor::full(7f32, (rows, 2, 1, 3), &Device::Cpu).unwrap();
        let v = Tensor::full(-7f32, (rows, 2, 1, 3), &Device::Cpu).unwrap();
        LayerKv::append(&mut c.layers[0], k, v, c.headroom).unwrap();
    }

    #[test]
    fn retaining_rows_in_place_equals_selecting_them_and_decoding_goes_on() {
        for headroom in [Some(2), Some(0), None] {
            let mut a = cache(5, 4, headroom);
            let idx = Tensor::new(&[1u32, 3, 4], &Device::Cpu).unwrap();
            let mut b = a.select_batch(&idx).unwrap();
            a.retain_rows(&[1, 3, 4]).unwrap();
            assert_eq!(contents(&a), contents(&b), "{headroom:?}");
            // The next positions land in the kept rows (growing the buffer when full).
            push(&mut a, 3);
            push(&mut b, 3);
            assert_eq!(a.len(), 5);
            assert_eq!(contents(&a), contents(&b), "{headroom:?}");
            a.retain_rows(&[0, 2]).unwrap();
            b = b
                .select_batch(&Tensor::new(&[0u32, 2], &Device::Cpu).unwrap())
                .unwrap();
            assert_eq!(contents(&a), contents(&b), "{headroom:?}");
        }
    }

    #[test]
    fn retaining_rows_refuses_unordered_or_missing_rows() {
        let mut c = cache(3, 2, Some(1));
        let before = contents(&c);
        for keep in [&[2usize, 1][..], &[0, 0], &[1, 3]] {
            let e = c.retain_rows(keep).unwrap_err().to_string();
            assert!(e.contains("not ascending within 3 rows"), "{e}");
        }
        assert_eq!(contents(&c), before);
    }

    #[test]
    fn rows_selected_from_one_row_are_recorded_as_sharing_what_was_cached() {
        let c = cache(2, 4, Some(3));
        let idx = Tensor::new(&[0u32, 0, 1, 1, 1], &Device::Cpu).unwrap();
        let mut s = c.select_batch(&idx).unwrap();
        let shared = s.shared_rows().unwrap();
        assert_eq!((*shared.leader).clone(), vec![0, 0, 2, 2, 2]);
        assert_eq!(shared.len, 4);
        // New positions differ per row; the record stays at the copied ones.
        push(&mut s, 5);
        assert_eq!(s.shared_rows().unwrap().len, 4);
        s.retain_rows(&[1, 3, 4]).unwrap();
        assert_eq!(*s.shared_rows().unwrap().leader, vec![0, 1, 1]);
        s.truncate(2).unwrap();
        assert_eq!(s.shared_rows().unwrap().len, 2);
        // Distinct rows share nothing.
        let idx = Tensor::new(&[1u32, 0], &Device::Cpu).unwrap();
        assert!(c.select_batch(&idx).unwrap().shared_rows().is_none());
    }
}
