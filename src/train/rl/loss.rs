//! The Salvage-DS loss (ALGORITHMS.md §5), on per-token log-probabilities:
//!
//! ```text
//! ratio  = exp(clamp(logp − old_logp, −20, 20))
//! pg     = max(−A·ratio, −A·clamp(ratio, 1 − ε_low, 1 + ε_high));  for A < 0: min(pg, −A·c)
//! kl     = clamp(exp(ref_logp − logp) − (ref_logp − logp) − 1, −10, 10)      (k3)
//! L      = agg(pg) + β·agg(kl) + λ·salvage_nll
//! agg    = seq-mean-token-mean
//! ```
//!
//! Every function takes `[batch, tokens]` tensors and a 0/1 mask of the same shape
//! (1 on the response tokens that count). Only differentiable candle ops are used.

use candle_core::{DType, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Loss coefficients and clip ranges.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossConfig {
    /// ε_low: the ratio is clipped below at 1 − ε_low.
    pub clip_low: f64,
    /// ε_high: the ratio is clipped above at 1 + ε_high.
    pub clip_high: f64,
    /// Dual-clip constant c for negative advantages (`None` disables it).
    pub dual_clip: Option<f64>,
    /// β, weight of the k3 KL to the reference policy.
    pub kl_coef: f64,
    /// λ, weight of the action-only salvage NLL.
    pub salvage_coef: f64,
}

impl Default for LossConfig {
    /// Salvage-DS: clip [0.2, 0.32], dual clip 3, β 1e-3, λ 0.10.
    fn default() -> Self {
        LossConfig {
            clip_low: 0.2,
            clip_high: 0.32,
            dual_clip: Some(3.0),
            kl_coef: 1e-3,
            salvage_coef: 0.10,
        }
    }
}

/// Bound on |logp − old_logp| before exponentiating.
pub const LOG_RATIO_CLAMP: f64 = 20.0;
/// Bound on the per-token k3 KL.
pub const KL_CLAMP: f64 = 10.0;

/// The policy-gradient term and its diagnostics.
#[derive(Debug, Clone)]
pub struct PolicyLoss {
    /// Per-token pg, `[batch, tokens]` (masked positions hold values that agg ignores).
    pub per_token: Tensor,
    /// Share of masked tokens where the clipped objective was the larger (verl's pg_clipfrac).
    pub clipfrac: f64,
    /// Share of masked tokens where the dual clip bound applied (pg_clipfrac_lower).
    pub clipfrac_lower: f64,
    /// Token mean of old_logp − logp (ppo_kl).
    pub ppo_kl: f64,
}

/// Per-token clipped policy-gradient loss. `adv` is `[batch, tokens]` or `[batch]`
/// (one advantage per sequence, broadcast over its tokens).
pub fn policy_loss(
    logp: &Tensor,
    old_logp: &Tensor,
    adv: &Tensor,
    mask: &Tensor,
    cfg: &LossConfig,
) -> Result<PolicyLoss> {
    let adv = if adv.rank() == 1 {
        adv.unsqueeze(1)?.broadcast_as(logp.shape())?.contiguous()?
    } else {
        adv.clone()
    };
    let log_ratio = (logp - old_logp)?;
    let ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)?.exp()?;
    let neg_adv = adv.neg()?;
    let pg1 = (&neg_adv * &ratio)?;
    let pg2 = (&neg_adv * ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high)?)?;
    let clipped = pg2.gt(&pg1)?;
    let pg = pg1.maximum(&pg2)?;
    let (pg, lower) = match cfg.dual_clip {
        Some(c) => {
            let bound = neg_adv.affine(c, 0.0)?;
            let negative = adv.lt(0.0)?;
            let dual = pg.minimum(&bound)?;
            let lower = negative
                .to_dtype(DType::F32)?
                .mul(&pg.gt(&bound)?.to_dtype(DType::F32)?)?;
            (negative.where_cond(&dual, &pg)?, lower)
        }
        None => (pg, mask.zeros_like()?.to_dtype(DType::F32)?),
    };
    let mask32 = mask.to_dtype(DType::F32)?;
    Ok(PolicyLoss {
        clipfrac: token_mean(&clipped.to_dtype(DType::F32)?, &mask32)?,
        clipfrac_lower: token_mean(&lower, &mask32)?,
        ppo_kl: token_mean(&log_ratio.neg()?.to_dtype(DType::F32)?, &mask32)?,
        per_token: pg,
    })
}

/// Per-token k3 ("low_var_kl") estimate of KL(π‖π_ref), clamped to ±10.
pub fn low_var_kl(logp: &Tensor, ref_logp: &Tensor) -> Result<Tensor> {
    let d = (ref_logp - logp)?;
    let k3 = ((d.exp()? - &d)? - 1.0)?;
    k3.clamp(-KL_CLAMP, KL_CLAMP)
}

/// seq-mean-token-mean: the mean over each sequence's masked tokens, then the mean
/// over sequences that have at least one masked token. A scalar tensor.
pub fn seq_mean_token_mean(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let mask = mask.to_dtype(x.dtype())?;
    let per_seq_sum = (x * &mask)?.sum(1)?;
    let counts = mask.sum(1)?;
    let has = counts.gt(0.0)?.to_dtype(x.dtype())?;
    let per_seq = (per_seq_sum / counts.maximum(1.0)?)?;
    let n = has.sum_all()?.maximum(1.0)?;
    (per_seq * &has)?.sum_all()?.div(&n)
}

/// The action-only salvage NLL: seq-mean-token-mean of −logp over the action tokens
/// (`action_mask`) of salvage sequences; reasoning and prompt tokens get no loss.
pub fn salvage_nll(logp: &Tensor, action_mask: &Tensor) -> Result<Tensor> {
    seq_mean_token_mean(&logp.neg()?, action_mask)
}

/// `L = agg(pg) + β·agg(kl) + λ·salvage_nll` from its parts (scalars).
pub fn total(
    pg: &Tensor,
    kl: &Tensor,
    salvage: Option<&Tensor>,
    cfg: &LossConfig,
) -> Result<Tensor> {
    let l = (pg + kl.affine(cfg.kl_coef, 0.0)?)?;
    match salvage {
        Some(s) if cfg.salvage_coef != 0.0 => l + s.affine(cfg.salvage_coef, 0.0)?,
        _ => Ok(l),
    }
}

/// The mean of `x` over masked tokens of the whole batch, as a number (for logging).
pub fn token_mean(x: &Tensor, mask: &Tensor) -> Result<f64> {
    let mask = mask.to_dtype(x.dtype())?;
    let n = mask.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    if n == 0.0 {
        return Ok(0.0);
    }
    let s = (x * mask)?
        .sum_all()?
        .to_dtype(DType::F64)?
        .to_scalar::<f64>()?;
    Ok(s / n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn t(v: &[f32]) -> Tensor {
        Tensor::new(v, &Device::Cpu).unwrap().unsqueeze(0).unwrap()
    }

    fn vals(x: &Tensor) -> Vec<f32> {
        x.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn close(a: f32, b: f64) {
        assert!(
            (a as f64 - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{a} != {b}"
        );
    }

    #[test]
    fn ratio_is_clamped_before_exp() {
        // logp − old = 30 → clamped to 20; A = −1 so pg1 = e^20 dominates, then dual clip 3
        let cfg = LossConfig {
            dual_clip: None,
            ..Default::default()
        };
        let p = policy_loss(&t(&[30.0]), &t(&[0.0]), &t(&[-1.0]), &t(&[1.0]), &cfg).unwrap();
        close(vals(&p.per_token)[0], (20f64).exp());
    }

    #[test]
    fn upper_and_lower_clip_by_hand() {
        let cfg = LossConfig {
            dual_clip: None,
            ..Default::default()
        };
        let ln = |r: f64| r.ln() as f32;
        // A > 0, ratio 1.5 → clipped to 1.32: pg = max(−1.5, −1.32) = −1.32 (clipped)
        // A > 0, ratio 0.5 → pg = max(−0.5, −0.8) = −0.5 (not clipped)
        // A < 0 (−1), ratio 0.5 → pg = max(0.5, 0.8) = 0.8 (clipped below)
        // A < 0, ratio 1.1 → pg = max(1.1, 1.1) = 1.1 (inside, not clipped)
        let logp = t(&[ln(1.5), ln(0.5), ln(0.5), ln(1.1)]);
        let old = t(&[0.0; 4]);
        let adv = t(&[1.0, 1.0, -1.0, -1.0]);
        let p = policy_loss(&logp, &old, &adv, &t(&[1.0; 4]), &cfg).unwrap();
        let v = vals(&p.per_token);
        close(v[0], -1.32);
        close(v[1], -0.5);
        close(v[2], 0.8);
        close(v[3], 1.1);
        assert!((p.clipfrac - 0.5).abs() < 1e-6, "{}", p.clipfrac);
        assert_eq!(p.clipfrac_lower, 0.0);
        // ppo_kl = mean(old − logp)
        let expect = -(1.5f64.ln() + 0.5f64.ln() * 2.0 + 1.1f64.ln()) / 4.0;
        assert!((p.ppo_kl - expect).abs() < 1e-5);
    }

    #[test]
    fn dual_clip_bounds_negative_advantages_only() {
        let cfg = LossConfig::default();
        // A = −2, ratio 5: pg = max(10, 2·1.32) = 10 → dual clip min(10, 2·3) = 6
        // A = +2, ratio 5: pg = max(−10, −2.64) = −2.64, no dual clip
        // A = −2, ratio 2: pg = 4 < 6 → unchanged
        let ln5 = 5f32.ln();
        let p = policy_loss(
            &t(&[ln5, ln5, 2f32.ln()]),
            &t(&[0.0; 3]),
            &t(&[-2.0, 2.0, -2.0]),
            &t(&[1.0; 3]),
            &cfg,
        )
        .unwrap();
        let v = vals(&p.per_token);
        close(v[0], 6.0);
        close(v[1], -2.64);
        close(v[2], 4.0);
        assert!((p.clipfrac_lower - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn k3_by_hand_and_its_clamp() {
        // d = ref − logp = 1: e − 1 − 1 = 0.71828; d = −1: e⁻¹ + 1 − 1 = 0.36788
        // d = 5: e⁵ − 6 = 142.4 → clamped to 10; d = 0: 0
        let k = low_var_kl(&t(&[0.0, 0.0, 0.0, 0.3]), &t(&[1.0, -1.0, 5.0, 0.3])).unwrap();
        let v = vals(&k);
        close(v[0], std::f64::consts::E - 2.0);
        close(v[1], (-1f64).exp());
        close(v[2], 10.0);
        close(v[3], 0.0);
    }

    #[test]
    fn seq_mean_token_mean_weights_sequences_equally() {
        // seq 1: tokens 1, 2, 3 (mean 2); seq 2: token 10 only (mean 10); seq 3: empty
        let x = Tensor::new(
            &[[1f32, 2., 3.], [10., 99., 99.], [7., 7., 7.]],
            &Device::Cpu,
        )
        .unwrap();
        let m = Tensor::new(&[[1f32, 1., 1.], [1., 0., 0.], [0., 0., 0.]], &Device::Cpu).unwrap();
        let a = seq_mean_token_mean(&x, &m)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        close(a, 6.0); // not the token mean 16/4 = 4
        assert!((token_mean(&x, &m).unwrap() - 4.0).abs() < 1e-6);
    }

    #[test]
    fn salvage_gradient_touches_only_action_tokens() {
        let logp = Var::new(
            &[[-1f32, -2., -3., -4.], [-0.5, -0.5, -0.5, -0.5]],
            &Device::Cpu,
        )
        .unwrap();
        let action = Tensor::new(&[[0f32, 0., 1., 1.], [0., 1., 0., 0.]], &Device::Cpu).unwrap();
        let nll = salvage_nll(logp.as_tensor(), &action).unwrap();
        close(nll.to_scalar::<f32>().unwrap(), (3.5 + 0.5) / 2.0);
        let g = nll.backward().unwrap();
        let g: Vec<Vec<f32>> = g.get(logp.as_tensor()).unwrap().to_vec2().unwrap();
        assert_eq!(g[0], vec![0.0, 0.0, -0.25, -0.25]);
        assert_eq!(g[1], vec![0.0, -0.5, 0.0, 0.0]);
    }

    #[test]
    fn policy_gradient_flows_only_where_unclipped() {
        let cfg = LossConfig {
            dual_clip: None,
            ..Default::default()
        };
        // ratio 1.5 with A > 0 is clipped: no gradient; ratio 1.0 is not: d pg/d logp = −A·ratio
        let logp = Var::new(&[[1.5f32.ln(), 0.0]], &Device::Cpu).unwrap();
        let p = policy_loss(
            logp.as_tensor(),
            &t(&[0.0, 0.0]),
            &t(&[1.0, 2.0]),
            &t(&[1.0, 1.0]),
            &cfg,
        )
        .unwrap();
        let loss = seq_mean_token_mean(&p.per_token, &t(&[1.0, 1.0])).unwrap();
        let g: Vec<Vec<f32>> = loss
            .backward()
            .unwrap()
            .get(logp.as_tensor())
            .unwrap()
            .to_vec2()
            .unwrap();
        close(g[0][0], 0.0);
        close(g[0][1], -2.0 / 2.0);
    }

    #[test]
    fn total_combines_the_terms() {
        let s = |x: f32| Tensor::new(x, &Device::Cpu).unwrap();
        let cfg = LossConfig::default();
        let l = total(&s(0.5), &s(2.0), Some(&s(3.0)), &cfg).unwrap();
        close(l.to_scalar::<f32>().unwrap(), 0.5 + 1e-3 * 2.0 + 0.1 * 3.0);
        let free = LossConfig {
            salvage_coef: 0.0,
            ..cfg
        };
        let l = total(&s(0.5), &s(2.0), Some(&s(3.0)), &free).unwrap();
        close(l.to_scalar::<f32>().unwrap(), 0.5 + 1e-3 * 2.0);
    }
}
