//! Small statistics of the report: Wilson score intervals for pass@1, means.

/// z of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `successes` out of `n` at `z` (None when `n` is 0).
/// Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or
/// n successes, which small per-task evaluations hit often.
pub fn wilson(successes: usize, n: usize, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (s, n) = (successes.min(n) as f64, n as f64);
    let p = s / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(((center - half).max(0.0), (center + half).min(1.0)))
}

/// The mean of `v` (None when empty).
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Steps saved by `with` over `without`: `1 − with/without`.
pub fn steps_saved(with: Option<f64>, without: Option<f64>) -> Option<f64> {
    match (with, without) {
        (Some(a), Some(b)) if b > 0.0 => Some(1.0 - a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_reference_values() {
        // 30 of 120 (the SFT pass@1): [0.1811, 0.3344].
        let (lo, hi) = wilson(30, 120, Z95).unwrap();
        assert!(
            (lo - 0.1811).abs() < 1e-4 && (hi - 0.3344).abs() < 1e-4,
            "{lo} {hi}"
        );
        // 0 of 10: [0, 0.2775]; 10 of 10: [0.7225, 1].
        let (lo, hi) = wilson(0, 10, Z95).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 5e-4, "{hi}");
        let (lo, hi) = wilson(10, 10, Z95).unwrap();
        assert!(
            (lo - 0.7225).abs() < 1e-4 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 0, Z95), None);
    }

    #[test]
    fn steps_saved_is_one_minus_the_ratio() {
        assert_eq!(steps_saved(Some(1.5), Some(2.0)), Some(0.25));
        assert_eq!(steps_saved(Some(1.5), None), None);
        assert_eq!(steps_saved(Some(1.5), Some(0.0)), None);
        assert_eq!(mean(&[1.0, 2.0]), Some(1.5));
        assert_eq!(mean(&[]), None);
    }
}
