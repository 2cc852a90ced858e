//! AdamW with inspectable state (so checkpoints can save and restore it) and
//! global gradient-norm clipping. candle-nn's AdamW keeps its moments private, so
//! resuming a run bit-for-bit needs our own.

use anyhow::Result;
use candle_core::{DType, Tensor, Var};
use std::collections::HashMap;

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// AdamW over named variables. Decoupled weight decay applies to matrices only
/// (1-D parameters — norm weights — are not decayed, as in HF's Trainer).
pub struct AdamW {
    vars: Vec<(String, Var)>,
    m: HashMap<String, Tensor>,
    v: HashMap<String, Tensor>,
    /// Updates done so far.
    pub t: u64,
    pub config: AdamWConfig,
}

impl AdamW {
    /// A fresh optimizer over `vars` (only trainable variables should be passed).
    /// AdamW as both trainers use it: β (0.9, 0.999), ε 1e-8, the run's learning
    /// rate and weight decay.
    pub fn for_training(vars: Vec<(String, Var)>, lr: f64, weight_decay: f64) -> Result<Self> {
        Self::new(
            vars,
            AdamWConfig {
                lr,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay,
            },
        )
    }

    pub fn new(vars: Vec<(String, Var)>, config: AdamWConfig) -> Result<Self> {
        let mut m = HashMap::new();
        let mut v = HashMap::new();
        for (n, var) in &vars {
            m.insert(n.clone(), var.zeros_like()?.to_dtype(DType::F32)?);
            v.insert(n.clone(), var.zeros_like()?.to_dtype(DType::F32)?);
        }
        Ok(AdamW {
            vars,
            m,
            v,
            t: 0,
            config,
        })
    }

    /// One update with `lr` from the (already clipped) gradients by name.
    /// Moments are kept in f32 whatever the parameter dtype.
    pub fn step(&mut self, grads: &HashMap<String, Tensor>, lr: f64) -> Result<()> {
        self.t += 1;
        let c = self.config;
        let bc1 = 1.0 - c.beta1.powi(self.t as i32);
        let bc2 = 1.0 - c.beta2.powi(self.t as i32);
        for (name, var) in &self.vars {
            let Some(g) = grads.get(name) else { continue };
            let g = g.to_dtype(DType::F32)?;
            let (Some(m), Some(v)) = (self.m.get_mut(name), self.v.get_mut(name)) else {
                continue;
            };
            *m = ((&*m * c.beta1)? + (&g * (1.0 - c.beta1))?)?;
            *v = ((&*v * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?;
            let mhat = (&*m / bc1)?;
            let vhat = (&*v / bc2)?;
            let upd = (mhat / (vhat.sqrt()? + c.eps)?)?;
            let w = var.as_tensor().to_dtype(DType::F32)?;
            let decay = if var.rank() >= 2 { c.weight_decay } else { 0.0 };
            let w = ((w * (1.0 - lr * decay))? - (upd * lr)?)?;
            var.set(&w.to_dtype(var.dtype())?)?;
        }
        Ok(())
    }

    /// Moments as tensors `m.<name>` / `v.<name>` for a checkpoint.
    pub fn state_tensors(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (n, t) in &self.m {
            out.insert(format!("m.{n}"), t.clone());
        }
        for (n, t) in &self.v {
            out.insert(format!("v.{n}"), t.clone());
        }
        out
    }

    /// Restores moments saved by [`Self::state_tensors`] and the step count.
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>, t: u64) -> Result<()> {
        for (name, var) in &self.vars {
            for (prefix, store) in [("m", &mut self.m), ("v", &mut self.v)] {
                let key = format!("{prefix}.{name}");
                let saved = tensors
                    .get(&key)
                    .ok_or_else(|| anyhow::anyhow!("optimizer state lacks `{key}`"))?;
                anyhow::ensure!(
                    saved.dims() == var.dims(),
                    "optimizer state `{key}` has wrong shape"
                );
                store.insert(
                    name.clone(),
                    saved.to_dtype(DType::F32)?.to_device(var.device())?,
                );
            }
        }
        self.t = t;
        Ok(())
    }
}

/// Adds this micro-batch's gradients of `vars` (from `loss.backward()`) to the
/// running sums in `grads`, in f32.
pub fn accumulate_grads(
    grads: &mut HashMap<String, Tensor>,
    gs: &candle_core::backprop::GradStore,
    vars: &[(String, Var)],
) -> Result<()> {
    for (name, var) in vars {
        if let Some(g) = gs.get(var.as_tensor()) {
            let g = g.to_dtype(DType::F32)?;
            let acc = match grads.remove(name) {
                Some(prev) => (prev + g)?,
                None => g,
            };
            grads.insert(name.clone(), acc);
        }
    }
    Ok(())
}

/// Global L2 norm of the gradients; if above `max_norm` (> 0), scales them all by
/// `max_norm / norm`. Returns the norm before clipping.
pub fn clip_grad_norm(grads: &mut HashMap<String, Tensor>, max_norm: f64) -> Result<f64> {
    let mut sq = 0.0f64;
    for g in grads.values() {
        sq += g
            .to_dtype(DType::F64)?
            .sqr()?
            .sum_all()?
            .to_scalar::<f64>()?;
    }
    let norm = sq.sqrt();
    if max_norm > 0.0 && norm > max_norm {
        let s = max_norm / (norm + 1e-6);
        for g in grads.values_mut() {
            *g = (&*g * s)?;
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn clipping_scales_to_max_norm_and_reports_the_original() {
        let mut g = HashMap::new();
        g.insert(
            "a".to_string(),
            Tensor::new(&[3.0f32, 0.0], &Device::Cpu).unwrap(),
        );
        g.insert(
            "b".to_string(),
            Tensor::new(&[[4.0f32]], &Device::Cpu).unwrap(),
        );
        let n = clip_grad_norm(&mut g, 1.0).unwrap();
        assert!((n - 5.0).abs() < 1e-9);
        let after = clip_grad_norm(&mut g, 0.0).unwrap();
        assert!((after - 1.0).abs() < 1e-5, "{after}");
    }

    #[test]
    fn adamw_minimises_a_quadratic_and_decays_only_matrices() {
        let dev = Device::Cpu;
        let w = Var::new(&[[2.0f32, -3.0]], &dev).unwrap();
        let b = Var::new(&[5.0f32], &dev).unwrap();
        let cfg = AdamWConfig {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let mut opt =
            AdamW::new(vec![("w".into(), w.clone()), ("b".into(), b.clone())], cfg).unwrap();
        for _ in 0..300 {
            let loss = (w.as_tensor().sqr().unwrap().sum_all().unwrap()
                + b.as_tensor().sqr().unwrap().sum_all().unwrap())
            .unwrap();
            let gs = loss.backward().unwrap();
            let mut grads = HashMap::new();
            grads.insert("w".to_string(), gs.get(w.as_tensor()).unwrap().clone());
            grads.insert("b".to_string(), gs.get(b.as_tensor()).unwrap().clone());
            opt.step(&grads, 0.1).unwrap();
        }
        let wmax = w
            .as_tensor()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(wmax < 0.05, "{wmax}");
        // With zero gradients only decay acts: the matrix shrinks, the vector stays.
        let mut opt2 = AdamW::new(
            vec![("w".into(), w.clone()), ("b".into(), b.clone())],
            AdamWConfig {
                weight_decay: 0.5,
                ..cfg
            },
        )
        .unwrap();
        w.set(&Tensor::new(&[[1.0f32, 1.0]], &dev).unwrap())
            .unwrap();
        b.set(&Tensor::new(&[1.0f32], &dev).unwrap()).unwrap();
        let mut zeros = HashMap::new();
        zeros.insert("w".to_string(), w.zeros_like().unwrap());
        zeros.insert("b".to_string(), b.zeros_like().unwrap());
        opt2.step(&zeros, 0.1).unwrap();
        assert_eq!(
            w.as_tensor().to_vec2::<f32>().unwrap(),
            vec![vec![0.95f32, 0.95]]
        );
        assert_eq!(b.as_tensor().to_vec1::<f32>().unwrap(), vec![1.0f32]);
    }
}
