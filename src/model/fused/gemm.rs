//! Matrix products into caller-owned buffers through gemm (the crate candle's CPU
//! matmul uses), so that a fused kernel can add a product to what a buffer holds
//! instead of allocating the product and adding it in a second pass.

/// A read-only f32 matrix view: `rows × cols`, element `(i, j)` at `i·rs + j·cs`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: isize,
    cs: isize,
}

impl<'a> Mat<'a> {
    /// `data` as a row-major `rows × cols` matrix.
    pub(super) fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        debug_assert_eq!(data.len(), rows * cols);
        Mat {
            data,
            rows,
            cols,
            rs: cols as isize,
            cs: 1,
        }
    }

    /// The transposed view (no copy).
    pub(super) fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// `dst = (dst if accumulate) + scale · lhs · rhs` for a row-major `dst`
/// (`lhs.rows × rhs.cols`), parallel over candle's CPU threads.
pub(super) fn product_into(dst: &mut [f32], accumulate: bool, lhs: Mat, rhs: Mat, scale: f32) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert!(
        rhs.rows == k && dst.len() == m * n,
        "fused gemm: {m}×{k} · {}×{n} into {}",
        rhs.rows,
        dst.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst.fill(0.0);
        }
        return;
    }
    let threads = candle_core::utils::get_num_threads();
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the views' extents lie inside their slices (built by `Mat::rows` over
    // slices of exactly rows·cols elements, or transposed from one), `dst` holds m·n
    // elements (asserted), and `dst` does not alias the inputs (a unique borrow).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.cs,
            lhs.rs,
            rhs.data.as_ptr(),
            rhs.cs,
            rhs.rs,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        (0..m * n)
            .map(|e| (0..k).map(|p| a[e / n * k + p] * b[p * n + e % n]).sum())
            .collect()
    }

    #[test]
    fn products_of_views_match_the_definition_and_accumulate() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(&a, &b, m, k, n);
        let mut dst = vec![1.0; m * n];
        product_into(
            &mut dst,
            false,
            Mat::rows(&a, m, k),
            Mat::rows(&b, k, n),
            1.0,
        );
        for (d, w) in dst.iter().zip(&want) {
            assert!((d - w).abs() < 1e-5);
        }
        // Transposed views: (bᵀ)ᵀ = b; accumulate 2·a·b onto a·b.
        let bt: Vec<f32> = (0..n * k).map(|e| b[(e % k) * n + e / k]).collect();
        product_into(
            &mut dst,
            true,
            Mat::rows(&a, m, k),
            Mat::rows(&bt, n, k).t(),
            2.0,
        );
        for (d, w) in dst.iter().zip(&want) {
            assert!((d - 3.0 * w).abs() < 1e-4);
        }
    }
}
