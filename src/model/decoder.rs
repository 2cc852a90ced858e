//! The causal-LM decoder every family of [`super::arch`] runs on, written for training:
//! every op has a backward pass (candle 0.11's fused softmax / rms-norm / rope kernels
//! drop gradients; f32 on the CPU uses [`super::fused`]'s kernels, which carry their
//! own, and everything else candle's composite ops).
//!
//! Pre-norm blocks: grouped-query attention with rotary embeddings (per-head q/k RMS
//! norm where the family has it, Qwen3; biases where the config asks), causal and
//! key-padding masks, SwiGLU MLP, tied or untied head. SFT, RL, scoring, sampling,
//! serving and the PEFT export all go through this one type. `forward` returns the
//! logits of every position; a [`KvCache`] makes incremental decoding possible.

use super::config::DecoderConfig;
use super::fused::{self, AttentionMask, RopeTables};
pub use super::kv_cache::KvCache;
use super::kv_cache::LayerKv;
use super::lora::{DropoutKey, Linear, Param};
use candle_core::{DType, Device, Result, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use std::collections::HashMap;

mod params;

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    /// Per-head RMS norms of queries and keys (families with `qk_norm`).
    q_norm: Option<Param>,
    k_norm: Option<Param>,
}

struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

struct Layer {
    attn: Attention,
    mlp: Mlp,
    input_layernorm: Param,
    post_attention_layernorm: Param,
}

/// The decoder with its LM head (any family of [`super::arch`]).
pub struct Decoder {
    pub config: DecoderConfig,
    embed_tokens: Param,
    layers: Vec<Layer>,
    norm: Param,
    /// `None` when the embeddings are tied.
    lm_head: Option<Linear>,
    cos: Tensor,
    sin: Tensor,
    dropout_key: DropoutKey,
    dtype: DType,
}

/// Takes a weight by HF name from `weights`, checking its shape.
fn take(
    weights: &mut HashMap<String, Tensor>,
    name: &str,
    shape: &[usize],
    dtype: DType,
    device: &Device,
    trainable: bool,
) -> anyhow::Result<Param> {
    let t = weights
        .remove(name)
        .ok_or_else(|| anyhow::anyhow!("weight `{name}` is missing"))?;
    anyhow::ensure!(
        t.dims() == shape,
        "weight `{name}` has shape {:?}, expected {shape:?}",
        t.dims()
    );
    Ok(Param::new(
        t.to_dtype(dtype)?.to_device(device)?,
        trainable,
    )?)
}

impl Decoder {
    /// Builds the model from HF-named weights (`model.layers.0.self_attn.q_proj.weight`,
    /// ...); the family ([`DecoderConfig::arch`]) says which norms and biases there are.
    /// `trainable` makes every base weight a training variable (full fine-tuning);
    /// otherwise base weights are frozen and only adapters train.
    pub fn from_weights(
        config: &DecoderConfig,
        mut weights: HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
        trainable: bool,
    ) -> anyhow::Result<Self> {
        config.validate()?;
        let arch = config.arch;
        let w = &mut weights;
        let mut param =
            |name: &str, shape: &[usize]| take(w, name, shape, dtype, device, trainable);
        let mut layers = Vec::new();
        for (i, block) in block_tensors(config).into_iter().enumerate() {
            layers.push(take_layer(config, i, &block, &mut param)?);
        }
        let h = config.hidden_size;
        let lm_head = if config.tie_word_embeddings {
            None
        } else {
            let p = param("lm_head.weight", &[config.vocab_size, h])?;
            Some(Linear::new("lm_head", p))
        };
        let embed_tokens = param("model.embed_tokens.weight", &[config.vocab_size, h])?;
        let norm = param("model.norm.weight", &[h])?;
        // Old checkpoints carry the rotary tables, which are computed here instead.
        let unused = weights
            .keys()
            .filter(|k| k.starts_with("model.layers.") && !k.ends_with(".rotary_emb.inv_freq"))
            .min();
        if let Some(extra) = unused {
            anyhow::bail!(
                "weight `{}` is not part of a {} decoder with this config",
                crate::util::sanitize::clean_line(extra),
                arch.spec.model_type
            );
        }
        let (cos, sin) = rope_tables(config, device, dtype)?;
        Ok(Decoder {
            config: config.clone(),
            embed_tokens,
            layers,
            norm,
            lm_head,
            cos,
            sin,
            dropout_key: DropoutKey::default(),
            dtype,
        })
    }

    /// Random weights (normal, std 0.02, biases included; norms 1), seeded; HF names,
    /// f32 on CPU.
    pub fn random_weights(config: &DecoderConfig, seed: u64) -> Result<HashMap<String, Tensor>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let normal = Normal::new(0.0f32, 0.02).map_err(candle_core::Error::wrap)?;
        let mut out = HashMap::new();
        let dev = Device::Cpu;
        let mut rand = |shape: &[usize]| -> Result<Tensor> {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|_| normal.sample(&mut rng)).collect();
            Tensor::from_vec(v, shape, &dev)
        };
        let (h, hd) = (config.hidden_size, config.head_dim());
        out.insert(
            "model.embed_tokens.weight".into(),
            rand(&[config.vocab_size, h])?,
        );
        if !config.tie_word_embeddings {
            out.insert("lm_head.weight".into(), rand(&[config.vocab_size, h])?);
        }
        out.insert(
            "model.norm.weight".into(),
            Tensor::ones(h, DType::F32, &dev)?,
        );
        for (i, block) in block_tensors(config).into_iter().enumerate() {
            let p = format!("model.layers.{i}");
            for t in block {
                out.insert(format!("{p}.{}.weight", t.module), rand(&t.shape)?);
                if t.bias {
                    out.insert(format!("{p}.{}.bias", t.module), rand(&t.shape[..1])?);
                }
            }
            let mut norms = vec![("input_layernorm", h), ("post_attention_layernorm", h)];
            if config.arch.spec.qk_norm {
                norms.extend([("self_attn.q_norm", hd), ("self_attn.k_norm", hd)]);
            }
            for (n, d) in norms {
                out.insert(
                    format!("{p}.{n}.weight"),
                    Tensor::ones(d, DType::F32, &dev)?,
                );
            }
        }
        Ok(out)
    }

    /// The compute dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        self.embed_tokens.tensor().device()
    }

    /// The shared dropout switch of the adapters (see [`DropoutKey`]).
    pub fn dropout_key(&self) -> &DropoutKey {
        &self.dropout_key
    }

    /// Logits `(batch, seq, vocab)` for every position of `input_ids` `(batch, seq)`,
    /// the first token being at absolute position `start_pos`. With a cache, keys and
    /// values of earlier positions are read from it and the new ones appended.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        start_pos: usize,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let x = self.forward_hidden(input_ids, start_pos, cache)?;
        self.logits(&x)
    }

    /// Turns adapters off (the base model alone) or back on, for every layer.
    pub fn set_adapters_enabled(&self, enabled: bool) {
        self.dropout_key.set_adapters_enabled(enabled);
    }

    /// LM-head logits `(..., vocab)` of final hidden states `(..., hidden)`.
    pub fn logits(&self, x: &Tensor) -> Result<Tensor> {
        match &self.lm_head {
            Some(head) => head.forward(x),
            None => fused::linear(x, self.embed_tokens.tensor()),
        }
    }

    /// Final (normed) hidden states `(batch, seq, hidden)`: [`Self::forward`] without
    /// the LM head, so callers can take logits of only the positions they need.
    pub fn forward_hidden(
        &self,
        input_ids: &Tensor,
        start_pos: usize,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        self.forward_hidden_masked(input_ids, start_pos, cache, None)
    }

    /// [`Self::forward_hidden`] with an additive key mask `(batch, past + seq)` added
    /// to every head's attention scores, e.g. a large negative value on the left
    /// padding of a batch of prompts of different lengths (rotary embeddings are
    /// relative, so left padding leaves the real tokens' results unchanged). Use a
    /// finite value, not −∞: a padding query that sees only padding must not turn NaN.
    pub fn forward_hidden_masked(
        &self,
        input_ids: &Tensor,
        start_pos: usize,
        cache: Option<&mut KvCache>,
        key_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let (_, l) = input_ids.dims2()?;
        if start_pos + l > self.cos.dim(0)? {
            candle_core::bail!(
                "sequence of {} positions exceeds max_position_embeddings {}{}",
                start_pos + l,
                self.cos.dim(0)?,
                self.config.rope().length_limit_note()
            );
        }
        let x = self.embed(input_ids)?;
        let rope = self.rope_at(start_pos, l)?;
        self.forward_embeds(x, &rope, cache, key_mask, &mut |_, x| Ok(x))
    }

    /// The rotary tables of positions `start .. start + len`.
    pub fn rope_at(&self, start: usize, len: usize) -> Result<RopeTables> {
        RopeTables::new(
            self.cos.narrow(0, start, len)?,
            self.sin.narrow(0, start, len)?,
        )
    }

    /// The rotary table that turns cached keys `delta` positions later (earlier when
    /// negative): rotations compose, so a key at `p` turned by `delta` equals the key
    /// encoded at `p + delta`.
    pub fn rope_turn(&self, delta: isize) -> Result<RopeTables> {
        let d = delta.unsigned_abs();
        let (cos, sin) = (self.cos.narrow(0, d, 1)?, self.sin.narrow(0, d, 1)?);
        RopeTables::new(cos, if delta < 0 { sin.neg()? } else { sin })
    }

    /// Token embeddings `(batch, seq, hidden)` of `input_ids` `(batch, seq)`.
    pub fn embed(&self, input_ids: &Tensor) -> Result<Tensor> {
        let (b, l) = input_ids.dims2()?;
        let emb = self.embed_tokens.tensor();
        emb.index_select(&input_ids.flatten_all()?, 0)?
            .reshape((b, l, self.config.hidden_size))
    }

    /// Final (normed) hidden states of input embeddings `x` `(batch, seq, hidden)`
    /// whose positions' rotary tables are `rope` (one row per position of `x`, the same
    /// for every batch row), as [`Self::forward_hidden_masked`] otherwise. After each
    /// layer `i` the hidden states pass through `after_layer(i, x)` (the identity
    /// `|_, x| Ok(x)` for a plain decoder; Qwen3-VL adds its DeepStack features there).
    pub fn forward_embeds(
        &self,
        mut x: Tensor,
        rope: &RopeTables,
        mut cache: Option<&mut KvCache>,
        key_mask: Option<&Tensor>,
        after_layer: &mut dyn FnMut(usize, Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let (b, l, _) = x.dims3()?;
        let past = cache.as_ref().map_or(0, |c| c.len());
        let (amask, mask) = if fused::applies(x.device(), self.dtype) {
            let key_bias = match key_mask {
                Some(k) => Some(std::sync::Arc::new(
                    k.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?,
                )),
                None => None,
            };
            let amask = AttentionMask {
                causal_past: Some(past),
                key_bias,
                shared: cache.as_ref().and_then(|c| c.shared_rows().cloned()),
            };
            (amask, None)
        } else {
            let mask = causal_mask(l, past, self.dtype, x.device())?;
            let mask = match key_mask {
                None => mask,
                Some(k) => {
                    let k = k.to_dtype(self.dtype)?.reshape((b, 1, 1, past + l))?;
                    Some(match mask {
                        Some(c) => c.unsqueeze(0)?.unsqueeze(0)?.broadcast_add(&k)?,
                        None => k,
                    })
                }
            };
            let amask = AttentionMask {
                causal_past: None,
                key_bias: None,
                shared: None,
            };
            (amask, mask)
        };
        if let Some(c) = cache.as_deref_mut()
            && c.layers.len() != self.layers.len()
        {
            c.layers = vec![None; self.layers.len()];
        }
        let eps = self.config.rms_norm_eps as f32;
        for (i, layer) in self.layers.iter().enumerate() {
            let slot = cache.as_deref_mut().map(|c| (&mut c.layers[i], c.headroom));
            let hnorm = rms_norm(&x, layer.input_layernorm.tensor(), eps)?;
            let a = self.attention(&layer.attn, &hnorm, rope, (&amask, mask.as_ref()), slot)?;
            x = (x + a)?;
            let hnorm = rms_norm(&x, layer.post_attention_layernorm.tensor(), eps)?;
            let m = &layer.mlp;
            let gate = m.gate_proj.forward(&hnorm)?;
            let up = m.up_proj.forward(&hnorm)?;
            x = (x + m.down_proj.forward(&fused::swiglu(&gate, &up)?)?)?;
            x = after_layer(i, x)?;
        }
        rms_norm(&x, self.norm.tensor(), eps)
    }

    fn attention(
        &self,
        at: &Attention,
        x: &Tensor,
        rope: &RopeTables,
        (amask, mask): (&AttentionMask, Option<&Tensor>),
        cache: Option<(&mut Option<LayerKv>, Option<usize>)>,
    ) -> Result<Tensor> {
        let (b, l, _) = x.dims3()?;
        let hd = self.config.head_dim();
        let (nh, nkv) = (self.config.num_attention_heads, self.config.kv_heads());
        let eps = self.config.rms_norm_eps as f32;
        let q = at.q_proj.forward(x)?.reshape((b, l, nh, hd))?;
        let k = at.k_proj.forward(x)?.reshape((b, l, nkv, hd))?;
        let v = at.v_proj.forward(x)?.reshape((b, l, nkv, hd))?;
        let scale = 1.0 / (hd as f64).sqrt();
        let (q, k) = match (&at.q_norm, &at.k_norm) {
            (Some(qn), Some(kn)) => (
                rms_norm(&q, qn.tensor(), eps)?,
                rms_norm(&k, kn.tensor(), eps)?,
            ),
            _ => (q, k),
        };
        if cache.is_none()
            && let Some(ctx) = fused::attention(&q, &k, &v, rope, amask, scale)?
        {
            return at.o_proj.forward(&ctx);
        }
        let (q, k) = (q.transpose(1, 2)?, k.transpose(1, 2)?);
        let v = v.transpose(1, 2)?.contiguous()?;
        let q = fused::rope(&q, rope)?;
        let k = fused::rope(&k, rope)?;
        let decoding = matches!(&cache, Some((_, Some(_))));
        let (k, v) = match cache {
            Some((slot, headroom)) => LayerKv::append(slot, k, v, headroom)?,
            None => (k, v),
        };
        // Sampling steps (a decoding cache is not differentiable anyway) read the
        // cache in place.
        if decoding && let Some(ctx) = fused::decode_attention(&q, &k, &v, amask, scale)? {
            return at
                .o_proj
                .forward(&ctx.transpose(1, 2)?.reshape((b, l, nh * hd))?);
        }
        // Grouped-query attention without repeating keys and values: the query heads
        // sharing a kv head (heads kv·g .. kv·g+g−1) are stacked along the query axis.
        let g = nh / nkv;
        let total = k.dim(2)?;
        let qg = q.reshape((b, nkv, g * l, hd))?;
        let scores = qg.matmul(&k.t()?)?.reshape((b, nh, l, total))?;
        let probs = fused::attention_softmax(&scores, scale, amask, mask)?;
        let ctx = probs
            .reshape((b, nkv, g * l, total))?
            .matmul(&v)?
            .reshape((b, nh, l, hd))?
            .transpose(1, 2)?
            .reshape((b, l, nh * hd))?;
        at.o_proj.forward(&ctx)
    }
}

/// One linear layer of a block: its module path under `model.layers.N.`, weight shape
/// `(out, in)`, whether it has a bias.
struct BlockLinear {
    module: &'static str,
    shape: [usize; 2],
    bias: bool,
}
/// Layer `i`'s weights taken by `param` (name, shape): its seven linear layers (with
/// their biases where the family has them), the q/k norms of a family that has them,
/// and the two layer norms.
fn take_layer(
    config: &DecoderConfig,
    i: usize,
    block: &[BlockLinear],
    param: &mut dyn FnMut(&str, &[usize]) -> anyhow::Result<Param>,
) -> anyhow::Result<Layer> {
    let arch = config.arch;
    let mut lins = Vec::with_capacity(block.len());
    for t in block {
        let name = format!("model.layers.{i}.{}", t.module);
        let weight = param(&format!("{name}.weight"), &t.shape)?;
        let bias = match t.bias {
            true => Some(param(&format!("{name}.bias"), &t.shape[..1])?),
            false => None,
        };
        lins.push(Linear::new(name, weight).with_bias(bias));
    }
    let Ok::<[Linear; 7], _>(
        [
            q_proj,
            k_proj,
            v_proj,
            o_proj,
            gate_proj,
            up_proj,
            down_proj,
        ],
    ) = lins.try_into()
    else {
        unreachable!("block_tensors lists seven linear layers")
    };
    let mut norm = |n: &str, dim: usize| param(&format!("model.layers.{i}.{n}.weight"), &[dim]);
    let hd = config.head_dim();
    let (q_norm, k_norm) = match arch.spec.qk_norm {
        true => (
            Some(norm("self_attn.q_norm", hd)?),
            Some(norm("self_attn.k_norm", hd)?),
        ),
        false => (None, None),
    };
    let h = config.hidden_size;
    let input_layernorm = norm("input_layernorm", h)?;
    let post_attention_layernorm = norm("post_attention_layernorm", h)?;
    Ok(Layer {
        attn: Attention {
            q_proj,
            k_proj,
            v_proj,
            o_proj,
            q_norm,
            k_norm,
        },
        mlp: Mlp {
            gate_proj,
            up_proj,
            down_proj,
        },
        input_layernorm,
        post_attention_layernorm,
    })
}

/// The seven linear layers of every block of `config`, in HF order.
fn block_tensors(config: &DecoderConfig) -> Vec<Vec<BlockLinear>> {
    let (h, hd, inter) = (
        config.hidden_size,
        config.head_dim(),
        config.intermediate_size,
    );
    let (nh, nkv) = (config.num_attention_heads, config.kv_heads());
    let (ab, mb) = (config.arch.attention_bias, config.arch.mlp_bias);
    let one = |module, shape, bias| BlockLinear {
        module,
        shape,
        bias,
    };
    (0..config.num_hidden_layers)
        .map(|_| {
            vec![
                one("self_attn.q_proj", [nh * hd, h], ab),
                one("self_attn.k_proj", [nkv * hd, h], ab),
                one("self_attn.v_proj", [nkv * hd, h], ab),
                one("self_attn.o_proj", [h, nh * hd], ab),
                one("mlp.gate_proj", [inter, h], mb),
                one("mlp.up_proj", [inter, h], mb),
                one("mlp.down_proj", [h, inter], mb),
            ]
        })
        .collect()
}

/// RMS norm over the last dimension with a differentiable graph.
fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    fused::rms_norm(x, w, eps)
}

/// Additive mask `(l, past + l)`: 0 where key ≤ query position, −∞ after. `None` for
/// a single new token (it may attend to everything cached).
fn causal_mask(l: usize, past: usize, dtype: DType, dev: &Device) -> Result<Option<Tensor>> {
    if l <= 1 {
        return Ok(None);
    }
    let total = past + l;
    let v: Vec<f32> = (0..l)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if j <= past + i {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Tensor::from_vec(v, (l, total), dev)?
        .to_dtype(dtype)
        .map(Some)
}

/// cos/sin tables `(max_positions, head_dim/2)` of the model's rotary embedding
/// (scaled variants included, see [`super::rope`]).
fn rope_tables(cfg: &DecoderConfig, dev: &Device, dtype: DType) -> Result<(Tensor, Tensor)> {
    let hd = cfg.head_dim();
    let (inv, attention_factor) = cfg.rope().inv_freq(hd);
    let inv: Vec<f32> = inv.into_iter().map(|f| f as f32).collect();
    let n = cfg.max_position_embeddings;
    let inv = Tensor::from_vec(inv, (1, hd / 2), dev)?;
    let t = Tensor::arange(0u32, n as u32, dev)?
        .to_dtype(DType::F32)?
        .reshape((n, 1))?;
    let f = t.matmul(&inv)?;
    let (cos, sin) = if attention_factor == 1.0 {
        (f.cos()?, f.sin()?)
    } else {
        (
            (f.cos()? * attention_factor)?,
            (f.sin()? * attention_factor)?,
        )
    };
    Ok((cos.to_dtype(dtype)?, sin.to_dtype(dtype)?))
}
