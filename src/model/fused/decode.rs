//! Attention of a few new tokens over a long decoding cache, read in place.
//!
//! While sampling, each step attends one token per row to every cached key. As a
//! matrix product that repacks the whole cache for one or two query rows per head;
//! here each (row, head, query) reads its kv head's keys and values once, straight
//! from the cache buffers (strided views, no copy). Not differentiable: it serves the
//! decoding cache ([`crate::model::KvCache::for_decoding`]) only.

use super::{AttentionMask, fusable, softmax_in_place};
use candle_core::{Layout, Result, Storage, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// Most new tokens per row that take this kernel (sampling steps; prompts do not).
const MAX_NEW_TOKENS: usize = 4;

/// `softmax(scale · q kᵀ + mask) v` for `q` `(b, heads, l, d)` (already rotated) and
/// cached `k`, `v` `(b, kv_heads, total, d)` views; `(b, heads, l, d)`. `None` when
/// the kernel does not apply (not f32 on the CPU, or more than
/// `MAX_NEW_TOKENS` (4) queries).
// Kept whole: one kernel; its shape checks, the raw slices it reads and the loop
// over them are checked against each other (the unit tests compare it to candle's).
pub fn decode_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &AttentionMask,
    scale: f64,
) -> Result<Option<Tensor>> {
    if !(fusable(q) && fusable(k) && fusable(v)) {
        return Ok(None);
    }
    let (b, nh, l, d) = q.dims4()?;
    let (_, nkv, total, _) = k.dims4()?;
    if l > MAX_NEW_TOKENS
        || d == 0
        || k.dims() != v.dims()
        || nkv == 0
        || nh % nkv != 0
        || total < l
    {
        return Ok(None);
    }
    if mask
        .key_bias
        .as_ref()
        .is_some_and(|kb| kb.len() != b * total)
    {
        candle_core::bail!("decode attention: key mask does not cover {b}×{total} keys");
    }
    let shared = mask.shared.as_ref().filter(|s| s.leader.len() == b);
    let shared_len = shared.map_or(0, |s| s.len.min(total));
    let q = q.contiguous()?;
    let (qs, ql) = q.storage_and_layout();
    let (ks, kl) = k.storage_and_layout();
    let (vs, vl) = v.storage_and_layout();
    let (Storage::Cpu(qs), Storage::Cpu(ks), Storage::Cpu(vs)) = (&*qs, &*ks, &*vs) else {
        return Ok(None);
    };
    let qd = &qs.as_slice::<f32>()?[ql.start_offset()..];
    let (kd, vd) = (ks.as_slice::<f32>()?, vs.as_slice::<f32>()?);
    let (kv_row, vv_row) = (RowView::new(kl)?, RowView::new(vl)?);
    let (g, scale) = (nh / nkv, scale as f32);
    // One task per (group of rows sharing their first keys, kv head): it reads each
    // shared key and value once for all its rows' queries of that kv head's heads.
    let groups: Vec<Vec<usize>> = match shared {
        Some(s) => {
            let mut by_leader: Vec<Vec<usize>> = vec![Vec::new(); b];
            for (r, &l) in s.leader.iter().enumerate() {
                by_leader[l.min(b - 1)].push(r);
            }
            by_leader.into_iter().filter(|m| !m.is_empty()).collect()
        }
        None => (0..b).map(|r| vec![r]).collect(),
    };
    let tasks: Vec<(usize, usize)> = (0..groups.len())
        .flat_map(|gi| (0..nkv).map(move |kvh| (gi, kvh)))
        .collect();
    let results: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&(gi, kvh)| {
            let members = &groups[gi];
            let leader = members[0];
            // The task's queries: (row, head, query index).
            let queries: Vec<(usize, usize, usize)> = members
                .iter()
                .flat_map(|&bi| {
                    (kvh * g..(kvh + 1) * g).flat_map(move |h| (0..l).map(move |qi| (bi, h, qi)))
                })
                .collect();
            let qv: Vec<&[f32]> = queries
                .iter()
                .map(|&(bi, h, qi)| {
                    let r = (bi * nh + h) * l + qi;
                    &qd[r * d..(r + 1) * d]
                })
                .collect();
            let biases: Vec<Option<&[f32]>> = queries
                .iter()
                .map(|q| mask.key_bias_row(q.0, total))
                .collect();
            let limits: Vec<usize> = queries
                .iter()
                .map(|q| mask.visible_keys(q.2, total))
                .collect();
            let mut scores: Vec<Vec<f32>> = limits.iter().map(|&n| Vec::with_capacity(n)).collect();
            // Keys every member holds alike: read from the group's first row.
            let common = shared_len.min(limits.iter().copied().max().unwrap_or(0));
            for j in 0..common {
                let kr = &kd[kv_row.at(leader, kvh, j)..][..d];
                for (qn, p) in scores.iter_mut().enumerate() {
                    if j < limits[qn] {
                        let bias = biases[qn].map_or(0.0, |b| b[j]);
                        p.push(scale * super::simd::dot(qv[qn], kr) + bias);
                    }
                }
            }
            for (qn, q) in queries.iter().enumerate() {
                for j in common..limits[qn] {
                    let kr = &kd[kv_row.at(q.0, kvh, j)..][..d];
                    let bias = biases[qn].map_or(0.0, |b| b[j]);
                    scores[qn].push(scale * super::simd::dot(qv[qn], kr) + bias);
                }
                softmax_in_place(&mut scores[qn]);
            }
            let mut y = vec![0f32; queries.len() * d];
            for j in 0..common {
                let vr = &vd[vv_row.at(leader, kvh, j)..][..d];
                for (qn, p) in scores.iter().enumerate() {
                    if let Some(&w) = p.get(j) {
                        super::simd::add_scaled(&mut y[qn * d..(qn + 1) * d], w, vr);
                    }
                }
            }
            for (qn, q) in queries.iter().enumerate() {
                for (j, &w) in scores[qn].iter().enumerate().skip(common) {
                    let vr = &vd[vv_row.at(q.0, kvh, j)..][..d];
                    super::simd::add_scaled(&mut y[qn * d..(qn + 1) * d], w, vr);
                }
            }
            y
        })
        .collect();
    let mut out = vec![0f32; b * nh * l * d];
    for (&(gi, kvh), y) in tasks.iter().zip(&results) {
        let mut at = 0;
        for &bi in &groups[gi] {
            for h in kvh * g..(kvh + 1) * g {
                for qi in 0..l {
                    let r = (bi * nh + h) * l + qi;
                    out[r * d..(r + 1) * d].copy_from_slice(&y[at..at + d]);
                    at += d;
                }
            }
        }
    }
    Tensor::from_vec(out, (b, nh, l, d), q.device()).map(Some)
}

/// Batch rows that are copies of another row over their first `len` positions (the
/// samples of one prompt): row `r`'s keys and values there are row `leader[r]`'s,
/// and `leader[leader[r]] == leader[r] <= r`.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedRows {
    /// Per row, the row whose first positions it copies (itself when none).
    pub leader: Arc<Vec<usize>>,
    /// How many first positions the copies hold alike.
    pub len: usize,
}

impl SharedRows {
    /// The sharing of rows whose first `len` positions are alike exactly when their
    /// `keys` are (e.g. the row each was selected from); `None` when no two are.
    pub fn of<K: PartialEq>(keys: &[K], len: usize) -> Option<SharedRows> {
        let leader: Vec<usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| keys.iter().position(|o| o == k).unwrap_or(i))
            .collect();
        let any = leader.iter().enumerate().any(|(i, &l)| l != i);
        any.then(|| SharedRows {
            leader: Arc::new(leader),
            len,
        })
    }

    /// The sharing among the rows `keep` (ascending) once only they remain; `None`
    /// when no two of them share.
    pub fn retain(&self, keep: &[usize]) -> Option<SharedRows> {
        let leaders: Vec<usize> = keep
            .iter()
            .map(|&r| self.leader.get(r).copied().unwrap_or(r))
            .collect();
        Self::of(&leaders, self.len)
    }
}

/// Offsets of the rows of a `(b, heads, positions, d)` view with unit inner stride.
struct RowView {
    start: usize,
    strides: [usize; 3],
}

impl RowView {
    fn new(l: &Layout) -> Result<Self> {
        match l.stride() {
            [s0, s1, s2, 1] => Ok(RowView {
                start: l.start_offset(),
                strides: [*s0, *s1, *s2],
            }),
            s => candle_core::bail!("decode attention: rows not contiguous (strides {s:?})"),
        }
    }

    fn at(&self, b: usize, h: usize, pos: usize) -> usize {
        self.start + b * self.strides[0] + h * self.strides[1] + pos * self.strides[2]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{D, Device};

    fn rand(shape: (usize, usize, usize, usize), seed: u64) -> Tensor {
        let n = shape.0 * shape.1 * shape.2 * shape.3;
        let v: Vec<f32> = (0..n)
            .map(|i| {
                (((i as u64 + 1) * (seed * 2 + 1) * 2_654_435_761) % 1000) as f32 / 500.0 - 1.0
            })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    /// Rows 1 and 2 of `t` made copies of row 0 over the first `len` positions.
    fn copy_first(t: &Tensor, len: usize) -> Tensor {
        let head = t.narrow(0, 0, 1).unwrap().narrow(2, 0, len).unwrap();
        let rows: Vec<Tensor> = (0..t.dim(0).unwrap())
            .map(|r| {
                let row = t.narrow(0, r, 1).unwrap();
                let rest = row.narrow(2, len, t.dim(2).unwrap() - len).unwrap();
                Tensor::cat(&[&head, &rest], 2).unwrap()
            })
            .collect();
        Tensor::cat(&rows, 0).unwrap()
    }

    fn mask(shared: Option<SharedRows>, b: usize, total: usize) -> AttentionMask {
        // The first two keys of every row are padding.
        let bias: Vec<f32> = (0..b * total)
            .map(|i| if i % total < 2 { -1e9 } else { 0.0 })
            .collect();
        AttentionMask {
            causal_past: Some(total - 1),
            key_bias: Some(Arc::new(bias)),
            shared,
        }
    }

    /// softmax(scale q kᵀ + bias) v with candle's ops, kv heads repeated.
    fn reference(q: &Tensor, k: &Tensor, v: &Tensor, m: &AttentionMask, scale: f64) -> Tensor {
        let (b, nh, _, _) = q.dims4().unwrap();
        let (_, nkv, total, _) = k.dims4().unwrap();
        let rep = |t: &Tensor| {
            let heads: Vec<Tensor> = (0..nh)
                .map(|h| t.narrow(1, h / (nh / nkv), 1).unwrap())
                .collect();
            Tensor::cat(&heads, 1).unwrap()
        };
        let bias = Tensor::from_vec(
            m.key_bias.as_ref().unwrap().to_vec(),
            (b, 1, 1, total),
            &Device::Cpu,
        )
        .unwrap();
        let s = (q.matmul(&rep(k).t().unwrap()).unwrap() * scale)
            .unwrap()
            .broadcast_add(&bias)
            .unwrap();
        candle_nn::ops::softmax(&s, D::Minus1)
            .unwrap()
            .matmul(&rep(v))
            .unwrap()
    }

    fn flat(t: &Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn rows_sharing_their_first_keys_decode_exactly_as_separate_rows() {
        let (b, nh, nkv, total, d, len) = (3, 4, 2, 10, 8, 6);
        let q = rand((b, nh, 1, d), 1);
        let k = copy_first(&rand((b, nkv, total, d), 2), len);
        let v = copy_first(&rand((b, nkv, total, d), 3), len);
        let shared = SharedRows {
            leader: Arc::new(vec![0, 0, 0]),
            len,
        };
        let scale = 0.35;
        let alone = decode_attention(&q, &k, &v, &mask(None, b, total), scale)
            .unwrap()
            .unwrap();
        let together = decode_attention(&q, &k, &v, &mask(Some(shared), b, total), scale)
            .unwrap()
            .unwrap();
        assert_eq!(flat(&alone), flat(&together));
        let want = flat(&reference(&q, &k, &v, &mask(None, b, total), scale));
        for (a, w) in flat(&alone).iter().zip(&want) {
            assert!((a - w).abs() < 1e-5, "{a} vs {w}");
        }
    }

    #[test]
    fn shared_keys_are_read_from_the_groups_first_row() {
        // Rows that differ everywhere, declared to share 6 positions: each row then
        // decodes as if it held row 0's first 6 keys and values.
        let (b, nh, nkv, total, d, len) = (3, 4, 2, 10, 8, 6);
        let q = rand((b, nh, 1, d), 4);
        let (k, v) = (rand((b, nkv, total, d), 5), rand((b, nkv, total, d), 6));
        let shared = SharedRows {
            leader: Arc::new(vec![0, 0, 0]),
            len,
        };
        let got = decode_attention(&q, &k, &v, &mask(Some(shared), b, total), 0.35)
            .unwrap()
            .unwrap();
        let (k0, v0) = (copy_first(&k, len), copy_first(&v, len));
        let want = decode_attention(&q, &k0, &v0, &mask(None, b, total), 0.35)
            .unwrap()
            .unwrap();
        assert_eq!(flat(&got), flat(&want));
        assert_ne!(
            flat(&got),
            flat(
                &decode_attention(&q, &k, &v, &mask(None, b, total), 0.35)
                    .unwrap()
                    .unwrap()
            )
        );
    }

    #[test]
    fn sharing_follows_the_rows_that_remain() {
        let s = SharedRows {
            leader: Arc::new(vec![0, 0, 2, 2, 0]),
            len: 5,
        };
        // Row 0 gone: row 1 leads its group; rows 2 and 3 still share.
        assert_eq!(*s.retain(&[1, 2, 3, 4]).unwrap().leader, vec![0, 1, 1, 0]);
        assert_eq!(s.retain(&[0, 2]), None);
    }
}
