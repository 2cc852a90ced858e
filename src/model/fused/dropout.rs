//! Adapter dropout masks as a pure function of (seed, element index): the forward
//! pass and the backward pass (and the composite path) draw the same mask without
//! storing it, any element can be drawn on any thread, and a resumed run draws the
//! masks it drew before.

/// The dropout of one adapter input: element `i` is kept (scaled by `1/(1−p)`) unless
/// its 16-bit draw falls below `p` (one 64-bit hash gives the draws of four elements;
/// `p` is rounded to a multiple of 2⁻¹⁶).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutMask {
    seed: u64,
    /// Elements whose draw is below this are dropped.
    threshold: u16,
    keep_scale: f32,
}

impl DropoutMask {
    /// The mask of dropout rate `p` (0 ≤ p < 1) under `seed`; `None` when nothing
    /// would be dropped.
    pub fn new(seed: u64, p: f32) -> Option<Self> {
        if !(p > 0.0 && p < 1.0) {
            return None;
        }
        let threshold = (f64::from(p) * 65_536.0).round().min(65_535.0) as u16;
        Some(DropoutMask {
            seed,
            threshold,
            keep_scale: (65_536.0 / (65_536.0 - f64::from(threshold))) as f32,
        })
    }

    /// The factor of element `i`: 0 (dropped) or `1/(1−p)`.
    #[inline]
    pub fn factor(&self, i: usize) -> f32 {
        let draw = (hash64(self.seed, (i / 4) as u64) >> (16 * (i % 4))) as u16;
        if draw < self.threshold {
            0.0
        } else {
            self.keep_scale
        }
    }

    /// `out[j] = x[j] · factor(offset + j)`.
    pub fn apply(&self, offset: usize, x: &[f32], out: &mut [f32]) {
        self.for_each_factor(offset, x.len(), |j, f| out[j] = x[j] * f);
    }

    /// `f(j, factor(offset + j))` for `j` in `0..n`, one hash per four elements.
    #[inline]
    pub fn for_each_factor(&self, offset: usize, n: usize, mut f: impl FnMut(usize, f32)) {
        let mut j = 0;
        while j < n {
            let i = offset + j;
            let word = hash64(self.seed, (i / 4) as u64);
            let lanes = (4 - i % 4).min(n - j);
            for lane in 0..lanes {
                let draw = (word >> (16 * (i % 4 + lane))) as u16;
                let factor = if draw < self.threshold {
                    0.0
                } else {
                    self.keep_scale
                };
                f(j + lane, factor);
            }
            j += lanes;
        }
    }

    /// The factors of elements `0..n`.
    pub fn factors(&self, n: usize) -> Vec<f32> {
        let mut out = vec![0.0; n];
        self.for_each_factor(0, n, |j, f| out[j] = f);
        out
    }
}

/// SplitMix64's finalizer of `seed` and `i`.
#[inline]
fn hash64(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_about_p_scales_the_rest_and_depends_on_the_seed() {
        let m = DropoutMask::new(7, 0.25).unwrap();
        let f = m.factors(100_000);
        let dropped = f.iter().filter(|&&x| x == 0.0).count() as f64 / 1e5;
        assert!((dropped - 0.25).abs() < 0.01, "{dropped}");
        assert!(f.iter().all(|&x| x == 0.0 || (x - 4.0 / 3.0).abs() < 1e-6));
        // The mean factor is 1 (the expectation is unchanged).
        let mean: f64 = f.iter().map(|&x| f64::from(x)).sum::<f64>() / 1e5;
        assert!((mean - 1.0).abs() < 0.02, "{mean}");
        assert_ne!(f, DropoutMask::new(8, 0.25).unwrap().factors(100_000));
        assert_eq!(f, m.factors(100_000));
        assert!(DropoutMask::new(7, 0.0).is_none() && DropoutMask::new(7, 1.0).is_none());
        // Applied from any offset, the factors are element i's.
        let x: Vec<f32> = (0..23).map(|i| i as f32 + 1.0).collect();
        let mut out = vec![0.0; 23];
        m.apply(5, &x, &mut out);
        for (j, o) in out.iter().enumerate() {
            assert_eq!(*o, x[j] * f[5 + j]);
        }
    }
}
