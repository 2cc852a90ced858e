//! Linear layers with optional LoRA adapters, and the parameter type shared by the
//! decoder: a frozen tensor or a trainable variable.
//!
//! `y = x Wᵀ + (α/r) · dropout(x) Aᵀ Bᵀ` with `A` (r × in) drawn from a scaled normal
//! (Kaiming-uniform bound, as PEFT) and `B` (out × r) zero, so a fresh adapter leaves
//! the model unchanged. The α/r scale applies to the BA path only.

use candle_core::{DType, Device, Result, Tensor, Var};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A weight: frozen (no gradient is computed for it) or trainable.
#[derive(Debug, Clone)]
pub enum Param {
    Frozen(Tensor),
    Trainable(Var),
}

impl Param {
    /// The tensor to compute with.
    pub fn tensor(&self) -> &Tensor {
        match self {
            Param::Frozen(t) => t,
            Param::Trainable(v) => v.as_tensor(),
        }
    }

    /// A parameter of the given trainability holding `t`.
    pub fn new(t: Tensor, trainable: bool) -> Result<Self> {
        Ok(if trainable {
            Param::Trainable(Var::from_tensor(&t)?)
        } else {
            Param::Frozen(t.detach())
        })
    }

    /// Whether it receives gradients.
    pub fn is_trainable(&self) -> bool {
        matches!(self, Param::Trainable(_))
    }

    /// Replaces the value (shape must match for trainable parameters).
    pub fn set(&mut self, t: &Tensor) -> Result<()> {
        match self {
            Param::Frozen(old) => *old = t.detach(),
            Param::Trainable(v) => v.set(t)?,
        }
        Ok(())
    }
}

/// LoRA hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoraConfig {
    pub r: usize,
    pub alpha: f64,
    pub dropout: f32,
    /// Module names (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`,
    /// `down_proj`) that get an adapter.
    pub target_modules: Vec<String>,
}

impl LoraConfig {
    /// Every linear layer of the decoder.
    pub const ALL_LINEAR: [&'static str; 7] = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ];

    /// The paper's adapter: r 64, α 128, dropout 0.05 on all linear layers.
    pub fn paper() -> Self {
        LoraConfig {
            r: 64,
            alpha: 128.0,
            dropout: 0.05,
            target_modules: Self::ALL_LINEAR.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The adapter of the `lora` preset, for a ~135M-parameter model such as
    /// SmolLM2-135M (hidden 576): r 16, α 32, dropout 0.05 on every linear layer.
    /// Rank 16 keeps the adapters' extra work at about 5% of the base's matrix
    /// products per token (r·(in+out) against in·out; r 64 would add 22% for hidden
    /// 576) and trains 4.9M parameters, 3.6% of the model (the paper's r 64 on 8B
    /// trains ~2%); α/r = 2 keeps the paper's scale (128/64).
    pub fn small() -> Self {
        LoraConfig {
            r: 16,
            alpha: 32.0,
            ..Self::paper()
        }
    }

    /// `α / r`.
    pub fn scale(&self) -> f64 {
        self.alpha / self.r as f64
    }

    /// Whether a module named `name` (its last path component) is a target.
    pub fn targets(&self, module_path: &str) -> bool {
        let last = module_path.rsplit('.').next().unwrap_or(module_path);
        self.target_modules.iter().any(|t| t == last)
    }
}

/// Shared dropout switch: the trainer sets a key per micro-batch; masks are a pure
/// function of (key, module id), so a resumed run draws the same masks. `None`
/// disables dropout (evaluation, sampling). Clones share the switch.
///
/// It also carries the shared "adapters off" switch: with adapters off every layer
/// computes with its base weight only (RL reads the frozen reference policy this way).
#[derive(Debug, Clone, Default)]
pub struct DropoutKey(Arc<AtomicU64>, Arc<std::sync::atomic::AtomicBool>);

impl DropoutKey {
    /// Sets the key for the next forward passes (`None`: no dropout).
    pub fn set(&self, key: Option<u64>) {
        // 0 encodes "off"; keys are remapped so that 0 stays usable.
        let v = key.map_or(0, |k| k.wrapping_mul(2).wrapping_add(1));
        self.0.store(v, Ordering::Relaxed);
    }

    /// Turns every adapter sharing this switch off (`false`) or back on (`true`).
    pub fn set_adapters_enabled(&self, enabled: bool) {
        self.1.store(!enabled, Ordering::Relaxed);
    }

    /// Whether adapters take part in forward passes (the default).
    pub fn adapters_enabled(&self) -> bool {
        !self.1.load(Ordering::Relaxed)
    }

    /// Runs `f` under a key mixed with `salt` (no dropout stays no dropout), then puts
    /// the key back: a second pass over other positions of the same micro-batch draws
    /// masks of its own instead of repeating the first pass's.
    pub fn salted<T>(&self, salt: u64, f: impl FnOnce() -> T) -> T {
        let saved = self.0.load(Ordering::Relaxed);
        if saved != 0 {
            // Odd, so never 0 ("off").
            let mixed = (saved ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
            self.0.store(mixed, Ordering::Relaxed);
        }
        let out = f();
        self.0.store(saved, Ordering::Relaxed);
        out
    }

    /// The current key.
    pub fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            v => Some(v),
        }
    }
}

/// A LoRA adapter on one linear layer.
#[derive(Debug, Clone)]
pub struct Lora {
    pub a: Param,
    pub b: Param,
    pub scale: f64,
    pub dropout: f32,
    module_id: u64,
    key: DropoutKey,
}

/// A linear layer `y = x Wᵀ (+ b)`, W of shape (out, in), b of shape (out), with an
/// optional adapter (on the product only: PEFT's `bias = "none"`).
#[derive(Debug, Clone)]
pub struct Linear {
    /// The HF module path, e.g. `model.layers.0.self_attn.q_proj`.
    pub name: String,
    pub weight: Param,
    pub bias: Option<Param>,
    pub lora: Option<Lora>,
}

fn stable_hash(s: &str) -> u64 {
    // FNV-1a: stable across runs and platforms.
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

impl Linear {
    /// A bias-free linear layer named `name` around `weight`.
    pub fn new(name: impl Into<String>, weight: Param) -> Self {
        Linear {
            name: name.into(),
            weight,
            bias: None,
            lora: None,
        }
    }

    /// The layer with `bias` added to its output.
    pub fn with_bias(self, bias: Option<Param>) -> Self {
        Linear { bias, ..self }
    }

    /// Attaches a fresh adapter (A random from `seed` and the module name, B zero).
    pub fn add_lora(&mut self, cfg: &LoraConfig, seed: u64, key: DropoutKey) -> Result<()> {
        let w = self.weight.tensor();
        let (out_dim, in_dim) = w.dims2()?;
        let module_id = stable_hash(&self.name);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ module_id);
        // PEFT: kaiming_uniform(a=√5) ⇒ U(-1/√in, 1/√in).
        let bound = 1.0 / (in_dim as f64).sqrt();
        let a: Vec<f32> = (0..cfg.r * in_dim)
            .map(|_| rng.random_range(-bound..bound) as f32)
            .collect();
        // Adapters stay in f32 (f64 for an f64 model) so small updates are not lost.
        let dt = if w.dtype() == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let a = Tensor::from_vec(a, (cfg.r, in_dim), w.device())?.to_dtype(dt)?;
        let b = Tensor::zeros((out_dim, cfg.r), dt, w.device())?;
        self.lora = Some(Lora {
            a: Param::new(a, true)?,
            b: Param::new(b, true)?,
            scale: cfg.scale(),
            dropout: cfg.dropout,
            module_id,
            key,
        });
        Ok(())
    }

    /// Applies the layer to `x` of shape (..., in).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let Some(l) = self.lora.as_ref().filter(|l| l.key.adapters_enabled()) else {
            return self.plus_bias(super::fused::linear(x, self.weight.tensor())?);
        };
        let (a, b) = (l.a.tensor(), l.b.tensor());
        let fused = super::fused::lora_linear(x, self.weight.tensor(), a, b, l.scale, l.mask())?;
        if let Some(y) = fused {
            return self.plus_bias(y);
        }
        let y = super::fused::linear(x, self.weight.tensor())?;
        let xd = match l.mask() {
            Some(m) => {
                let f = Tensor::from_vec(m.factors(x.elem_count()), x.shape(), &Device::Cpu)?;
                (x * f.to_device(x.device())?.to_dtype(x.dtype())?)?
            }
            None => x.clone(),
        };
        // Adapters may be kept in f32 under a bf16 base; cast for the product.
        let a = a.to_dtype(x.dtype())?;
        let b = b.to_dtype(x.dtype())?;
        let up = super::fused::linear(&super::fused::linear(&xd, &a)?, &b)?;
        self.plus_bias((y + (up * l.scale)?)?)
    }

    /// `y` plus the bias, if any.
    fn plus_bias(&self, y: Tensor) -> Result<Tensor> {
        match &self.bias {
            Some(b) => y.broadcast_add(b.tensor()),
            None => Ok(y),
        }
    }

    /// Folds the adapter into W (`W += scale · B A`) and removes it.
    pub fn merge(&mut self) -> Result<()> {
        if let Some(l) = self.lora.take() {
            let delta = (l.b.tensor().matmul(l.a.tensor())? * l.scale)?;
            let delta = delta.to_dtype(self.weight.tensor().dtype())?;
            let merged = (self.weight.tensor() + delta)?;
            self.weight.set(&merged)?;
        }
        Ok(())
    }
}

impl Lora {
    /// The dropout mask of the current key (`None`: no dropout now).
    fn mask(&self) -> Option<super::fused::DropoutMask> {
        let key = self.key.get()?;
        super::fused::DropoutMask::new(key ^ self.module_id.rotate_left(17), self.dropout)
    }
}

/// Dtype-preserving zero check used by tests and export.
pub fn is_zero(t: &Tensor) -> Result<bool> {
    Ok(t.to_dtype(DType::F32)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?
        == 0.0)
}

#[cfg(test)]
mod tests {
    use super::DropoutKey;

    /// A salted pass draws under another key, no dropout stays none, and the key is
    /// put back afterwards.
    #[test]
    fn a_salted_pass_draws_another_key_and_restores_it() {
        let k = DropoutKey::default();
        assert_eq!(k.salted(1, || k.get()), None);
        k.set(Some(42));
        let outer = k.get();
        let inner = k.salted(1, || k.get());
        assert!(inner.is_some() && inner != outer);
        assert_ne!(k.salted(2, || k.get()), inner);
        assert_eq!(k.get(), outer);
    }
}
