//! Rotary position embeddings as Hugging Face transformers configures them: the base
//! (`rope_theta`) and the scaling variants of `rope_parameters` (transformers 5) or
//! `rope_scaling` (earlier releases): `linear`, `dynamic`, `yarn` and `llama3`.
//!
//! [`RopeSpec::from_hf`] reads every form transformers writes and refuses what it
//! cannot compute exactly (another `rope_type`, a partial rotary dimension, a key it does
//! not know), naming the field: a rotary embedding silently computed another way gives
//! wrong logits everywhere. [`RopeSpec::inv_freq`] follows transformers' formulas
//! (`modeling_rope_utils.py`) term by term.

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// transformers' base when a config names none (`RotaryEmbeddingConfigMixin.default_theta`).
pub const DEFAULT_THETA: f64 = 10_000.0;

/// A scaling variant beyond plain RoPE (`rope_type` other than `default`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "lowercase")]
pub enum RopeScaling {
    /// Position interpolation: every frequency divided by `factor`.
    Linear { factor: f64 },
    /// Dynamic NTK. Up to `max_position_embeddings` it is plain RoPE (transformers only
    /// rescales the base for longer sequences); longer sequences are refused.
    Dynamic { factor: f64 },
    /// YaRN: per-frequency blend of interpolation and extrapolation, and cos/sin
    /// scaled by an attention factor.
    Yarn(Yarn),
    /// Llama 3.1: low frequencies divided by `factor`, high ones kept, smoothed between.
    Llama3(Llama3),
}

/// YaRN parameters (absent optional ones take transformers' defaults when computed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Yarn {
    pub factor: f64,
    pub original_max_position_embeddings: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_factor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_fast: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_slow: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mscale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mscale_all_dim: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate: Option<bool>,
}

/// Llama 3.1 rotary scaling parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Llama3 {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: usize,
}

/// The rotary embedding of a model: its base and scaling.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeSpec {
    pub theta: f64,
    pub scaling: Option<RopeScaling>,
}

/// The keys each `rope_type` may carry besides `rope_type`/`type`, `rope_theta` and
/// `partial_rotary_factor` (transformers' validators list the same).
fn allowed_keys(rope_type: &str) -> Option<&'static [&'static str]> {
    Some(match rope_type {
        "default" => &[],
        "linear" | "dynamic" => &["factor"],
        "yarn" => &[
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "truncate",
        ],
        "llama3" => &[
            "factor",
            "original_max_position_embeddings",
            "low_freq_factor",
            "high_freq_factor",
        ],
        _ => return None,
    })
}

/// The layer types a nested (per layer type) rope dictionary may be keyed by.
const LAYER_TYPES: [&str; 2] = ["full_attention", "sliding_attention"];

fn number(v: &Value, field: &str) -> Result<f64> {
    v.as_f64()
        .filter(|x| x.is_finite())
        .with_context(|| format!("field `{field}`: expected a finite number, got {v}"))
}

fn positive(v: &Value, field: &str) -> Result<f64> {
    let x = number(v, field)?;
    ensure!(x > 0.0, "field `{field}`: must be positive, got {x}");
    Ok(x)
}

fn count(v: &Value, field: &str) -> Result<usize> {
    v.as_u64()
        .filter(|&n| n > 0)
        .map(|n| n as usize)
        .with_context(|| format!("field `{field}`: expected a positive integer, got {v}"))
}

/// A value that is present and not `null`.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

impl RopeSpec {
    /// Plain RoPE with base `theta`.
    pub fn plain(theta: f64) -> Self {
        RopeSpec {
            theta,
            scaling: None,
        }
    }

    /// Reads the rotary embedding of a `config.json` object.
    ///
    /// The base is `rope_parameters.rope_theta` (transformers 5) or the top-level
    /// `rope_theta`, both when they agree, else [`DEFAULT_THETA`] as in transformers.
    /// The scaling comes from `rope_scaling` or `rope_parameters` (transformers 5 takes
    /// `rope_scaling` first; when both are given they must agree). The top-level
    /// `original_max_position_embeddings`, when present, overrides the dictionary's for
    /// `yarn` and `llama3`, as in transformers.
    pub fn from_hf(cfg: &Map<String, Value>, max_position_embeddings: usize) -> Result<Self> {
        let top_theta = present(cfg, "rope_theta")
            .map(|v| positive(v, "rope_theta"))
            .transpose()?;
        if let Some(v) = present(cfg, "partial_rotary_factor") {
            partial_rotary_factor_is_one(v, "partial_rotary_factor")?;
        }
        let top_ompe = present(cfg, "original_max_position_embeddings")
            .map(|v| count(v, "original_max_position_embeddings"))
            .transpose()?;
        let mut found = Vec::new();
        for name in ["rope_scaling", "rope_parameters"] {
            if let Some(v) = present(cfg, name) {
                let dict = flat_dict(v, name)?;
                found.push((
                    name,
                    Self::from_dict(&dict, name, top_theta, top_ompe, max_position_embeddings)?,
                ));
            }
        }
        match found.as_slice() {
            [] => Ok(RopeSpec::plain(top_theta.unwrap_or(DEFAULT_THETA))),
            [(_, spec)] => Ok(spec.clone()),
            [(a, x), (b, y), ..] => {
                ensure!(
                    x == y,
                    "fields `{a}` and `{b}` describe different rotary embeddings ({x:?} and {y:?}); keep one"
                );
                Ok(x.clone())
            }
        }
    }

    fn from_dict(
        d: &Map<String, Value>,
        name: &str,
        top_theta: Option<f64>,
        top_ompe: Option<usize>,
        max_pos: usize,
    ) -> Result<Self> {
        let dict = Dict { d, name };
        let rope_type = dict.rope_type()?;
        let theta = match (
            present(d, "rope_theta")
                .map(|v| positive(v, &dict.field("rope_theta")))
                .transpose()?,
            top_theta,
        ) {
            (Some(a), Some(b)) if a != b => bail!(
                "fields `{}` ({a}) and `rope_theta` ({b}) disagree",
                dict.field("rope_theta")
            ),
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => DEFAULT_THETA,
        };
        // transformers moves the pre-training length into the dictionary, defaulting
        // to max_position_embeddings; a top-level value wins.
        let ompe = || -> Result<usize> {
            match (top_ompe, present(d, "original_max_position_embeddings")) {
                (Some(n), _) => Ok(n),
                (None, Some(v)) => count(v, &dict.field("original_max_position_embeddings")),
                (None, None) => Ok(max_pos),
            }
        };
        let factor = || dict.positive_field("factor", rope_type);
        let scaling = match rope_type {
            "default" => None,
            "linear" => Some(RopeScaling::Linear { factor: factor()? }),
            "dynamic" => Some(RopeScaling::Dynamic { factor: factor()? }),
            "yarn" => Some(RopeScaling::Yarn(dict.yarn(ompe()?, max_pos)?)),
            "llama3" => {
                let l = Llama3 {
                    factor: factor()?,
                    low_freq_factor: dict.positive_field("low_freq_factor", rope_type)?,
                    high_freq_factor: dict.positive_field("high_freq_factor", rope_type)?,
                    original_max_position_embeddings: ompe()?,
                };
                ensure!(
                    l.high_freq_factor > l.low_freq_factor,
                    "field `{}` ({}) must exceed `{}` ({})",
                    dict.field("high_freq_factor"),
                    l.high_freq_factor,
                    dict.field("low_freq_factor"),
                    l.low_freq_factor
                );
                Some(RopeScaling::Llama3(l))
            }
            _ => unreachable!("allowed_keys admitted only the types above"),
        };
        Ok(RopeSpec { theta, scaling })
    }

    /// The `rope_parameters` dictionary transformers 5 writes for this embedding.
    pub fn to_rope_parameters(&self) -> Value {
        let mut m = match &self.scaling {
            None => Map::from_iter([("rope_type".to_string(), Value::from("default"))]),
            Some(s) => match serde_json::to_value(s) {
                Ok(Value::Object(m)) => m,
                _ => unreachable!("a rope scaling serializes to an object"),
            },
        };
        m.insert("rope_theta".into(), Value::from(self.theta));
        Value::Object(m)
    }

    /// The legacy `rope_scaling` dictionary (transformers 4 and candle read it), or
    /// `null` for plain RoPE.
    pub fn to_rope_scaling(&self) -> Value {
        match &self.scaling {
            None => Value::Null,
            Some(s) => match serde_json::to_value(s) {
                Ok(Value::Object(mut m)) => {
                    if let Some(t) = m.get("rope_type").cloned() {
                        m.insert("type".into(), t);
                    }
                    Value::Object(m)
                }
                _ => unreachable!("a rope scaling serializes to an object"),
            },
        }
    }

    /// Inverse frequencies (`head_dim / 2` of them) and the factor cos and sin are
    /// multiplied by (1 except for YaRN), as transformers computes them for sequences
    /// up to `max_position_embeddings` (the only ones the decoder accepts).
    pub fn inv_freq(&self, head_dim: usize) -> (Vec<f64>, f64) {
        let dim = head_dim as f64;
        let base = self.theta;
        let plain: Vec<f64> = (0..head_dim)
            .step_by(2)
            .map(|i| 1.0 / base.powf(i as f64 / dim))
            .collect();
        match &self.scaling {
            None => (plain, 1.0),
            Some(RopeScaling::Linear { factor }) => {
                (plain.iter().map(|f| f / factor).collect(), 1.0)
            }
            // Within max_position_embeddings transformers' dynamic base equals `theta`:
            // base · (factor · L / max − (factor − 1))^(d/(d−2)) with L = max.
            Some(RopeScaling::Dynamic { .. }) => (plain, 1.0),
            Some(RopeScaling::Llama3(l)) => (llama3(&plain, l), 1.0),
            Some(RopeScaling::Yarn(y)) => yarn(&plain, y, head_dim, base),
        }
    }

    /// Why a sequence of `positions` cannot be computed exactly, if it cannot.
    pub fn length_limit_note(&self) -> &'static str {
        match self.scaling {
            Some(RopeScaling::Dynamic { .. }) => {
                " (dynamic NTK rescaling beyond it is not implemented)"
            }
            _ => "",
        }
    }
}

fn partial_rotary_factor_is_one(v: &Value, field: &str) -> Result<()> {
    let f = number(v, field)?;
    ensure!(
        f == 1.0,
        "field `{field}`: {f} (a partial rotary dimension) is not supported; only 1.0"
    );
    Ok(())
}

/// A rope dictionary, unnested when it is keyed by layer type (transformers 5 writes
/// `{"full_attention": {...}}` for models with several attention kinds).
fn flat_dict(v: &Value, name: &str) -> Result<Map<String, Value>> {
    let d = v
        .as_object()
        .with_context(|| format!("field `{name}`: expected an object, got {v}"))?;
    if !d.keys().any(|k| LAYER_TYPES.contains(&k.as_str())) {
        return Ok(d.clone());
    }
    for k in d.keys() {
        ensure!(
            k == "full_attention",
            "field `{name}.{k}`: only full-attention layers are supported"
        );
    }
    let inner = &d["full_attention"];
    inner
        .as_object()
        .cloned()
        .with_context(|| format!("field `{name}.full_attention`: expected an object"))
}

fn llama3(plain: &[f64], l: &Llama3) -> Vec<f64> {
    let old = l.original_max_position_embeddings as f64;
    let low_wavelen = old / l.low_freq_factor;
    let high_wavelen = old / l.high_freq_factor;
    plain
        .iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f64::consts::PI / f;
            if wavelen < high_wavelen {
                f
            } else if wavelen > low_wavelen {
                f / l.factor
            } else {
                let smooth =
                    (old / wavelen - l.low_freq_factor) / (l.high_freq_factor - l.low_freq_factor);
                (1.0 - smooth) * f / l.factor + smooth * f
            }
        })
        .collect()
}

fn yarn_mscale(scale: f64, m: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * m * scale.ln() + 1.0
    }
}

fn yarn(plain: &[f64], y: &Yarn, head_dim: usize, base: f64) -> (Vec<f64>, f64) {
    let dim = head_dim as f64;
    let factor = y.factor;
    // Python's `x or default`: 0 counts as absent.
    let or = |x: Option<f64>, d: f64| x.filter(|&v| v != 0.0).unwrap_or(d);
    let attention = match (y.attention_factor, y.mscale, y.mscale_all_dim) {
        (Some(a), _, _) => a,
        (None, Some(m), Some(ma)) if m != 0.0 && ma != 0.0 => {
            yarn_mscale(factor, m) / yarn_mscale(factor, ma)
        }
        _ => yarn_mscale(factor, 1.0),
    };
    let (beta_fast, beta_slow) = (or(y.beta_fast, 32.0), or(y.beta_slow, 1.0));
    let original = y.original_max_position_embeddings as f64;
    let correction_dim = |rotations: f64| {
        dim * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
    };
    let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
    if y.truncate.unwrap_or(true) {
        low = low.floor();
        high = high.ceil();
    }
    let low = low.max(0.0);
    let mut high = high.min(dim - 1.0);
    if low == high {
        high += 0.001;
    }
    let inv = plain
        .iter()
        .enumerate()
        .map(|(i, &extrapolation)| {
            let interpolation = extrapolation / factor;
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            interpolation * (1.0 - keep) + extrapolation * keep
        })
        .collect();
    (inv, attention)
}

/// A rope-scaling dictionary, with the name errors give it (`rope_scaling` or
/// `rope_parameters`).
struct Dict<'a> {
    d: &'a Map<String, Value>,
    name: &'a str,
}

impl<'a> Dict<'a> {
    fn field(&self, k: &str) -> String {
        format!("{}.{k}", self.name)
    }

    /// The rope type (`rope_type`, or the older `type`; both must agree), once every
    /// key is known to be one of its parameters and any partial rotary factor is 1.
    fn rope_type(&self) -> Result<&'a str> {
        let d = self.d;
        let kind = |k: &str| -> Result<Option<&'a str>> {
            present(d, k)
                .map(|v| {
                    v.as_str().with_context(|| {
                        format!("field `{}`: expected a string, got {v}", self.field(k))
                    })
                })
                .transpose()
        };
        let rope_type = match (kind("rope_type")?, kind("type")?) {
            (Some(a), Some(b)) if a != b => bail!(
                "fields `{}` ({a:?}) and `{}` ({b:?}) disagree",
                self.field("rope_type"),
                self.field("type")
            ),
            (Some(a), _) | (None, Some(a)) => a,
            (None, None) => "default",
        };
        let Some(allowed) = allowed_keys(rope_type) else {
            bail!(
                "field `{}`: rope type {rope_type:?} is not supported (rmsweb computes default, \
                 linear, dynamic, yarn and llama3)",
                self.field("rope_type")
            );
        };
        for key in d.keys() {
            let known = ["rope_type", "type", "rope_theta", "partial_rotary_factor"]
                .contains(&key.as_str())
                || allowed.contains(&key.as_str());
            ensure!(
                known,
                "field `{}`: not a parameter of rope type {rope_type:?}; refused rather than \
                 ignored, since it may change the rotary embedding",
                self.field(key)
            );
        }
        if let Some(v) = present(d, "partial_rotary_factor") {
            partial_rotary_factor_is_one(v, &self.field("partial_rotary_factor"))?;
        }
        Ok(rope_type)
    }

    /// A parameter the rope type needs, a positive number.
    fn positive_field(&self, k: &str, rope_type: &str) -> Result<f64> {
        let v = present(self.d, k).with_context(|| {
            format!(
                "field `{}` missing (rope type {rope_type:?} needs it)",
                self.field(k)
            )
        })?;
        positive(v, &self.field(k))
    }

    /// YaRN's parameters. `original` is the pre-training length.
    fn yarn(&self, original: usize, max_pos: usize) -> Result<Yarn> {
        let d = self.d;
        let opt = |k: &str| -> Result<Option<f64>> {
            present(d, k).map(|v| number(v, &self.field(k))).transpose()
        };
        // A `null` factor means the ratio of the two lengths (DeepSeek-V3 style).
        let factor = match d.get("factor") {
            Some(Value::Null) => max_pos as f64 / original as f64,
            Some(v) => positive(v, &self.field("factor"))?,
            None => self.positive_field("factor", "yarn")?,
        };
        // transformers reads `get("truncate", True)`: an explicit null is false.
        let truncate = match d.get("truncate") {
            None => None,
            Some(Value::Null) => Some(false),
            Some(v) => Some(v.as_bool().with_context(|| {
                format!(
                    "field `{}`: expected true or false, got {v}",
                    self.field("truncate")
                )
            })?),
        };
        Ok(Yarn {
            factor,
            original_max_position_embeddings: original,
            attention_factor: opt("attention_factor")?,
            beta_fast: opt("beta_fast")?,
            beta_slow: opt("beta_slow")?,
            mscale: opt("mscale")?,
            mscale_all_dim: opt("mscale_all_dim")?,
            truncate,
        })
    }
}

#[cfg(test)]
mod tests;
