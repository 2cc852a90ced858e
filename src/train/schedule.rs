//! Learning-rate schedule: linear warmup then cosine decay to zero.

/// The learning rate for optimizer step `step` (0-based) of `total`.
///
/// Warmup: `base · (step+1) / warmup` for `step < warmup` (the first update already
/// moves the weights); then `base · ½(1 + cos(π · p))` with
/// `p = (step − warmup) / (total − warmup)`.
pub fn cosine_with_warmup(base: f64, step: usize, total: usize, warmup: usize) -> f64 {
    if step < warmup {
        return base * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let p = ((step - warmup) as f64 / span as f64).min(1.0);
    base * 0.5 * (1.0 + (std::f64::consts::PI * p).cos())
}

/// Warmup steps for a ratio of the total (`ceil`).
pub fn warmup_steps(ratio: f64, total: usize) -> usize {
    (ratio * total as f64).ceil() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_linearly_then_decays_to_zero() {
        let lr = |s| cosine_with_warmup(1.0, s, 100, 10);
        assert!((lr(0) - 0.1).abs() < 1e-12);
        assert!((lr(9) - 1.0).abs() < 1e-12);
        assert!((lr(10) - 1.0).abs() < 1e-12);
        assert!((lr(55) - 0.5).abs() < 1e-12);
        assert!(lr(99) < 0.001);
        assert!((1..100).all(|s| s < 10 || lr(s) <= lr(s - 1)));
        assert_eq!(warmup_steps(0.03, 100), 3);
    }
}
