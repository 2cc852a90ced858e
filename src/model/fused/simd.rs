//! The two inner loops of the sampling kernels, compiled for AVX2 + FMA when the CPU
//! has them (checked at run time; the default x86-64 target has neither).

/// `Σ a·b` over two equal-length slices.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { dot_avx2_fma(a, b) };
    }
    dot_with::<false>(a, b)
}

/// `y += w · x` over two equal-length slices.
pub(super) fn add_scaled(y: &mut [f32], w: f32, x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { add_scaled_avx2_fma(y, w, x) };
    }
    add_scaled_with::<false>(y, w, x)
}

#[cfg(target_arch = "x86_64")]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2_fma(a: &[f32], b: &[f32]) -> f32 {
    dot_with::<true>(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_scaled_avx2_fma(y: &mut [f32], w: f32, x: &[f32]) {
    add_scaled_with::<true>(y, w, x)
}

/// `x·y + acc`, fused (one rounding) when `FMA`.
#[inline(always)]
fn madd<const FMA: bool>(x: f32, y: f32, acc: f32) -> f32 {
    if FMA { x.mul_add(y, acc) } else { x * y + acc }
}

/// Independent partial sums, so the compiler keeps them in vector registers.
#[inline(always)]
fn dot_with<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = 16;
    let mut acc = [0f32; L];
    let (ca, cb) = (a.chunks_exact(L), b.chunks_exact(L));
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail = madd::<FMA>(*x, *y, tail);
    }
    for (x, y) in ca.zip(cb) {
        for i in 0..L {
            acc[i] = madd::<FMA>(x[i], y[i], acc[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn add_scaled_with<const FMA: bool>(y: &mut [f32], w: f32, x: &[f32]) {
    for (o, v) in y.iter_mut().zip(x) {
        *o = madd::<FMA>(w, *v, *o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
            .collect()
    }

    #[test]
    fn dispatched_loops_equal_the_plain_ones() {
        for n in [0, 1, 15, 16, 17, 64, 100] {
            let (a, b) = (data(n, 1), data(n, 2));
            let plain: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64) * (*y as f64))
                .sum();
            assert!((dot(&a, &b) as f64 - plain).abs() < 1e-4, "dot, n = {n}");
            assert!(
                (dot_with::<false>(&a, &b) as f64 - plain).abs() < 1e-4,
                "n = {n}"
            );
            let mut y1 = data(n, 3);
            let mut y2 = y1.clone();
            add_scaled(&mut y1, 0.7, &a);
            add_scaled_with::<false>(&mut y2, 0.7, &a);
            for (p, q) in y1.iter().zip(&y2) {
                assert!((p - q).abs() < 1e-6, "add_scaled, n = {n}");
            }
        }
    }
}
