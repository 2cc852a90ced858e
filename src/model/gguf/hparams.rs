//! A Llama GGUF's hyper-parameters, read from its metadata and checked, and the
//! transformers `config.json` and `generation_config.json` they make.
//!
//! Keys read (`llama.` is `general.architecture`'s value, which must be `llama`):
//! `llama.block_count`, `llama.context_length`, `llama.embedding_length`,
//! `llama.feed_forward_length`, `llama.attention.head_count`,
//! `llama.attention.head_count_kv` (default: head_count),
//! `llama.attention.layer_norm_rms_epsilon`, `llama.rope.freq_base` (default 10000),
//! `llama.attention.key_length` / `value_length` (head_dim; default hidden / heads),
//! `llama.rope.dimension_count` (must be head_dim: transformers' Llama rotates whole
//! heads), `llama.vocab_size` (must be the number of tokens), the rotary scaling keys,
//! and `tokenizer.ggml.{bos,eos,padding}_token_id`.
//!
//! Rotary scaling: none, or `llama.rope.scaling.type = linear` with
//! `llama.rope.scaling.factor` (also the older `llama.rope.scale_linear`), which is
//! transformers' `linear` rope type exactly. YaRN and the others, and Llama 3's
//! `rope_freqs.weight` frequency factors, are refused by name. So are mixture-of-experts
//! files (`llama.expert_count` > 0).

use super::reader::{Gguf, Value, quoted};
use anyhow::{Result, anyhow, bail, ensure};
use serde_json::{Value as Json, json};

/// The only architecture this importer reads.
pub const ARCHITECTURE: &str = "llama";

/// Largest width, head count or head size accepted (far above any real model's; it
/// keeps every product of two of them far from overflowing).
pub const MAX_WIDTH: usize = 1 << 20;

/// A Llama model's shape and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    /// `general.name`, when present.
    pub name: Option<String>,
    pub layers: usize,
    pub context_length: usize,
    pub hidden: usize,
    pub ff: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    /// `Some(factor)` for linear rotary scaling.
    pub rope_linear_factor: Option<f64>,
    /// Number of tokens (`tokenizer.ggml.tokens`).
    pub vocab: usize,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub pad: Option<u32>,
    /// No `output.weight`: the head is the embedding.
    pub tied: bool,
    pub attention_bias: bool,
    pub mlp_bias: bool,
}

/// A required key's value.
pub fn require<'a>(g: &'a Gguf, key: &str) -> Result<&'a Value> {
    g.get(key)
        .ok_or_else(|| anyhow!("key {} is missing", quoted(key)))
}

/// An unsigned integer key that fits a `usize`, `None` when absent.
pub fn opt_count(g: &Gguf, key: &str) -> Result<Option<usize>> {
    g.get(key)
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    anyhow!(
                        "key {}: expected an unsigned integer, found {}",
                        quoted(key),
                        describe(v)
                    )
                })
        })
        .transpose()
}

/// A required unsigned integer key, at least 1.
pub fn count(g: &Gguf, key: &str) -> Result<usize> {
    require(g, key)?;
    let n = opt_count(g, key)?.unwrap_or(0);
    ensure!(n > 0, "key {} is 0", quoted(key));
    Ok(n)
}

/// A float key, `None` when absent; it must be finite.
pub fn opt_float(g: &Gguf, key: &str) -> Result<Option<f64>> {
    g.get(key)
        .map(|v| {
            v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| {
                anyhow!(
                    "key {}: expected a finite float, found {}",
                    quoted(key),
                    describe(v)
                )
            })
        })
        .transpose()
}

/// A string key, `None` when absent.
pub fn opt_str<'a>(g: &'a Gguf, key: &str) -> Result<Option<&'a str>> {
    g.get(key)
        .map(|v| {
            v.as_str().ok_or_else(|| {
                anyhow!(
                    "key {}: expected a string, found {}",
                    quoted(key),
                    describe(v)
                )
            })
        })
        .transpose()
}

/// A bool key, `None` when absent.
pub fn opt_bool(g: &Gguf, key: &str) -> Result<Option<bool>> {
    g.get(key)
        .map(|v| {
            v.as_bool().ok_or_else(|| {
                anyhow!(
                    "key {}: expected a bool, found {}",
                    quoted(key),
                    describe(v)
                )
            })
        })
        .transpose()
}

/// A value's type and, for a scalar, the value, for messages.
fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string {}", quoted(s)),
        Value::Array(..) => v.describe(),
        Value::F32(x) => format!("f32 {x}"),
        Value::F64(x) => format!("f64 {x}"),
        Value::Bool(b) => format!("bool {b}"),
        other => match other.as_i64() {
            Some(i) => format!("{} {i}", other.describe()),
            None => other.describe(),
        },
    }
}

/// The architecture the file names (`general.architecture`), refused unless `llama`.
pub fn architecture(g: &Gguf) -> Result<&str> {
    let arch = opt_str(g, "general.architecture")?
        .ok_or_else(|| anyhow!("key `general.architecture` is missing"))?;
    ensure!(
        arch == ARCHITECTURE,
        "key `general.architecture` is {}; only `{ARCHITECTURE}` models are supported",
        quoted(arch)
    );
    Ok(arch)
}

/// A width key's value, at most [`MAX_WIDTH`].
fn width(g: &Gguf, key: &str) -> Result<usize> {
    let n = count(g, key)?;
    ensure!(
        n <= MAX_WIDTH,
        "key {} is {n}, more than {MAX_WIDTH}",
        quoted(key)
    );
    Ok(n)
}

/// The attention's heads, key-value heads and head width: the key and value lengths
/// agree (transformers' Llama has one head_dim), or it is the hidden width over the
/// heads; the rotary embedding covers all of it.
fn attention_shape(g: &Gguf, arch: &str, hidden: usize) -> Result<(usize, usize, usize)> {
    let k = |s: &str| format!("{arch}.{s}");
    let heads = width(g, &k("attention.head_count"))?;
    let kv_heads = match g.get(&k("attention.head_count_kv")) {
        None => heads,
        Some(_) => width(g, &k("attention.head_count_kv"))?,
    };
    ensure!(
        heads.is_multiple_of(kv_heads),
        "key {} ({kv_heads}) does not divide key {} ({heads})",
        quoted(&k("attention.head_count_kv")),
        quoted(&k("attention.head_count"))
    );
    let key_len = opt_count(g, &k("attention.key_length"))?;
    let value_len = opt_count(g, &k("attention.value_length"))?;
    for (key, n) in [
        ("attention.key_length", key_len),
        ("attention.value_length", value_len),
    ] {
        if let Some(n) = n {
            ensure!(
                n <= MAX_WIDTH,
                "key {} is {n}, more than {MAX_WIDTH}",
                quoted(&k(key))
            );
        }
    }
    let head_dim = match (key_len, value_len) {
        (Some(a), Some(b)) if a != b => bail!(
            "key {} ({a}) differs from key {} ({b}); transformers' Llama has one head_dim",
            quoted(&k("attention.key_length")),
            quoted(&k("attention.value_length"))
        ),
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => {
            ensure!(
                hidden.is_multiple_of(heads),
                "key {} ({heads}) does not divide key {} ({hidden})",
                quoted(&k("attention.head_count")),
                quoted(&k("embedding_length"))
            );
            hidden / heads
        }
    };
    ensure!(
        head_dim > 0 && head_dim.is_multiple_of(2),
        "head_dim {head_dim} is not a positive even number"
    );
    if let Some(rot) = opt_count(g, &k("rope.dimension_count"))? {
        ensure!(
            rot == head_dim,
            "key {} is {rot}, not head_dim {head_dim}: partial rotary embeddings are not \
             supported",
            quoted(&k("rope.dimension_count"))
        );
    }
    Ok((heads, kv_heads, head_dim))
}

impl Hparams {
    /// Reads and checks the hyper-parameters. `vocab` is the number of tokens.
    pub fn from_gguf(g: &Gguf, vocab: usize) -> Result<Self> {
        let arch = architecture(g)?;
        let k = |s: &str| format!("{arch}.{s}");
        if let Some(n) = opt_count(g, &k("expert_count"))?.filter(|&n| n > 0) {
            bail!(
                "key {} is {n}: mixture-of-experts models are not supported",
                quoted(&k("expert_count"))
            );
        }
        // Every block has 9 tensors.
        let layers = count(g, &k("block_count"))?;
        ensure!(
            layers <= g.tensors.len() / 9,
            "key {} is {layers} but the file has only {} tensors (a block has 9)",
            quoted(&k("block_count")),
            g.tensors.len()
        );
        let context_length = count(g, &k("context_length"))?;
        let hidden = width(g, &k("embedding_length"))?;
        let ff = width(g, &k("feed_forward_length"))?;
        let (heads, kv_heads, head_dim) = attention_shape(g, arch, hidden)?;
        let eps_key = k("attention.layer_norm_rms_epsilon");
        require(g, &eps_key)?;
        let rms_norm_eps = opt_float(g, &eps_key)?.unwrap_or_default();
        ensure!(
            rms_norm_eps > 0.0,
            "key {} is {rms_norm_eps}; it must be positive",
            quoted(&eps_key)
        );
        let rope_theta = opt_float(g, &k("rope.freq_base"))?.unwrap_or(10_000.0);
        ensure!(
            rope_theta > 0.0,
            "key {} is {rope_theta}; it must be positive",
            quoted(&k("rope.freq_base"))
        );
        let rope_linear_factor = rope_scaling(g, arch)?;
        if let Some(n) = opt_count(g, &k("vocab_size"))? {
            ensure!(
                n == vocab,
                "key {} is {n} but key `tokenizer.ggml.tokens` has {vocab} tokens",
                quoted(&k("vocab_size"))
            );
        }
        let token_id = |name: &str| -> Result<Option<u32>> {
            let key = format!("tokenizer.ggml.{name}_token_id");
            match opt_count(g, &key)? {
                None => Ok(None),
                Some(id) if id < vocab => Ok(Some(id as u32)),
                Some(id) => bail!("key {} is {id}, past the {vocab} tokens", quoted(&key)),
            }
        };
        Ok(Hparams {
            name: opt_str(g, "general.name")?.map(str::to_string),
            layers,
            context_length,
            hidden,
            ff,
            heads,
            kv_heads,
            head_dim,
            rms_norm_eps,
            rope_theta,
            rope_linear_factor,
            vocab,
            bos: token_id("bos")?,
            eos: token_id("eos")?,
            pad: token_id("padding")?,
            tied: g.tensor("output.weight").is_none(),
            attention_bias: false,
            mlp_bias: false,
        })
    }

    /// Number of parameters the transformers model has (the tied head counted once).
    pub fn parameters(&self) -> u64 {
        let n = |x: usize| x as u128;
        let (h, q, kv, ff) = (
            n(self.hidden),
            n(self.heads) * n(self.head_dim),
            n(self.kv_heads) * n(self.head_dim),
            n(self.ff),
        );
        let mut block = 2 * h + q * h + 2 * kv * h + h * q + 3 * ff * h;
        if self.attention_bias {
            block += q + 2 * kv + h;
        }
        if self.mlp_bias {
            block += 2 * ff + h;
        }
        let head = if self.tied { 0 } else { n(self.vocab) * h };
        let total = n(self.vocab) * h + n(self.layers) * block + h + head;
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// transformers' `rope_parameters` (transformers 5's spelling).
    fn rope_parameters(&self) -> Json {
        match self.rope_linear_factor {
            None => json!({"rope_type": "default", "rope_theta": self.rope_theta}),
            Some(f) => json!({"rope_type": "linear", "factor": f, "rope_theta": self.rope_theta}),
        }
    }

    /// `config.json` for transformers' `LlamaForCausalLM`; `torch_dtype` names the
    /// weights' dtype (`float32` or `bfloat16`).
    pub fn config_json(&self, torch_dtype: &str) -> Json {
        let mut c = json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab,
            "hidden_size": self.hidden,
            "intermediate_size": self.ff,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": self.context_length,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": self.rope_parameters(),
            "tie_word_embeddings": self.tied,
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "bos_token_id": self.bos,
            "eos_token_id": self.eos,
            "torch_dtype": torch_dtype,
        });
        if let Some(p) = self.pad {
            c["pad_token_id"] = p.into();
        }
        if let Some(f) = self.rope_linear_factor {
            // transformers 4 reads the scaling from here.
            c["rope_scaling"] = json!({"rope_type": "linear", "factor": f});
        }
        c
    }

    /// `generation_config.json`: the token ids generation starts, stops and pads with.
    pub fn generation_config(&self) -> Json {
        let mut c = json!({});
        for (k, v) in [
            ("bos_token_id", self.bos),
            ("eos_token_id", self.eos),
            ("pad_token_id", self.pad),
        ] {
            if let Some(id) = v {
                c[k] = id.into();
            }
        }
        c
    }
}

/// The linear rotary scaling factor, `None` without scaling; other scalings refused.
fn rope_scaling(g: &Gguf, arch: &str) -> Result<Option<f64>> {
    let k = |s: &str| format!("{arch}.{s}");
    let kind = opt_str(g, &k("rope.scaling.type"))?;
    let factor = opt_float(g, &k("rope.scaling.factor"))?;
    let old = opt_float(g, &k("rope.scale_linear"))?.filter(|&f| f != 1.0);
    let linear = match (kind, factor, old) {
        (None | Some("none"), _, None) => None,
        (None | Some("none"), _, Some(f)) => Some((f, k("rope.scale_linear"))),
        (Some("linear"), Some(f), _) => Some((f, k("rope.scaling.factor"))),
        (Some("linear"), None, _) => bail!(
            "key {} is `linear` but key {} is missing",
            quoted(&k("rope.scaling.type")),
            quoted(&k("rope.scaling.factor"))
        ),
        (Some(other), ..) => bail!(
            "key {} is {}: only linear rotary scaling is supported (transformers' `linear`)",
            quoted(&k("rope.scaling.type")),
            quoted(other)
        ),
    };
    if let Some(a) = opt_float(g, &k("rope.scaling.attn_factor"))?.filter(|&a| a != 1.0) {
        bail!(
            "key {} is {a}: scaled attention is not supported",
            quoted(&k("rope.scaling.attn_factor"))
        );
    }
    if g.tensor("rope_freqs.weight").is_some() {
        bail!(
            "tensor `rope_freqs.weight`: Llama 3 rotary frequency factors (rope type `llama3`) \
             are not supported"
        );
    }
    match linear {
        None => Ok(None),
        Some((f, key)) => {
            ensure!(f > 0.0, "key {} is {f}; it must be positive", quoted(&key));
            Ok(Some(f))
        }
    }
}
