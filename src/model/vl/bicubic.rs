//! PIL's bicubic resampling of 8-bit RGB, arithmetic for arithmetic (see the
//! `preprocess` module docs): Keys' cubic with a = -0.5, support widened by the scale
//! when shrinking, 22-bit fixed-point weights, two separable passes each rounded to u8.

use anyhow::{Context, Result, ensure};

/// Bits of the fixed-point resampling weights (PIL: 32 - 8 - 2).
const WEIGHT_BITS: u32 = 22;

/// Keys' cubic convolution kernel with a = -0.5 (PIL's bicubic).
fn cubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Taps of one output sample: the first source index and fixed-point weights.
struct Taps {
    first: usize,
    weights: Vec<i64>,
}

/// Weights mapping `n_in` samples onto `n_out`, PIL's way: the kernel is stretched by
/// the scale when shrinking, each window is normalized to sum 1, then weights are
/// rounded to `WEIGHT_BITS` fixed point.
fn taps(n_in: usize, n_out: usize) -> Vec<Taps> {
    let scale = n_in as f64 / n_out as f64;
    let stretch = scale.max(1.0);
    let support = 2.0 * stretch;
    (0..n_out)
        .map(|o| {
            let center = (o as f64 + 0.5) * scale;
            // C's truncating casts; clamped to the source.
            let lo = ((center - support + 0.5) as i64).max(0) as usize;
            let hi = ((center + support + 0.5) as i64).min(n_in as i64).max(0) as usize;
            let raw: Vec<f64> = (lo..hi)
                .map(|i| cubic((i as f64 - center + 0.5) / stretch))
                .collect();
            let sum: f64 = raw.iter().sum();
            let one = f64::from(1u32 << WEIGHT_BITS);
            let weights = raw
                .iter()
                .map(|&k| {
                    let k = if sum != 0.0 { k / sum } else { k };
                    if k < 0.0 {
                        (k * one - 0.5) as i64
                    } else {
                        (k * one + 0.5) as i64
                    }
                })
                .collect();
            Taps { first: lo, weights }
        })
        .collect()
}

/// Rounds a fixed-point accumulator (which started at one half) to a u8, clamping.
fn to_u8(acc: i64) -> u8 {
    (acc >> WEIGHT_BITS).clamp(0, 255) as u8
}

/// Resizes packed RGB8 from `w0 x h0` to `w x h` with PIL-equivalent bicubic resampling:
/// two separable passes, each rounding to u8, a pass skipped when its side is kept.
/// The horizontal pass runs first unless the height shrinks by more than twice as many
/// pixels as the width (Pillow 13's order; older Pillow always starts horizontally).
pub(super) fn resize_bicubic_rgb(
    src: &[u8],
    w0: usize,
    h0: usize,
    w: usize,
    h: usize,
) -> Result<Vec<u8>> {
    ensure!(
        src.len() == w0 * h0 * 3,
        "RGB buffer of {} bytes for {w0}x{h0}",
        src.len()
    );
    let shrink_h = h0 as i64 - h as i64;
    let shrink_w = w0 as i64 - w as i64;
    if shrink_h > 0 && shrink_h > 2 * shrink_w {
        let tmp = resample_vertical(src, w0, h0, h)?;
        resample_horizontal(&tmp, w0, h, w)
    } else {
        let tmp = resample_horizontal(src, w0, h0, w)?;
        resample_vertical(&tmp, w, h0, h)
    }
}

/// Fixed-point rounding offset: one half in `WEIGHT_BITS` fixed point.
const HALF: i64 = 1 << (WEIGHT_BITS - 1);

/// Resamples each row of a packed RGB8 `w0 x rows` image to width `w`.
fn resample_horizontal(src: &[u8], w0: usize, rows: usize, w: usize) -> Result<Vec<u8>> {
    if w == w0 {
        return Ok(src.to_vec());
    }
    let tx = taps(w0, w);
    let mut out = Vec::new();
    out.try_reserve_exact(w * rows * 3)
        .context("allocating resize buffer")?;
    for line in src.chunks_exact(w0 * 3) {
        for t in &tx {
            for c in 0..3 {
                let acc = t.weights.iter().enumerate().fold(HALF, |acc, (k, &wt)| {
                    acc + i64::from(line[(t.first + k) * 3 + c]) * wt
                });
                out.push(to_u8(acc));
            }
        }
    }
    Ok(out)
}

/// Resamples each column of a packed RGB8 `w x h0` image to height `h`.
fn resample_vertical(src: &[u8], w: usize, h0: usize, h: usize) -> Result<Vec<u8>> {
    if h == h0 {
        return Ok(src.to_vec());
    }
    let ty = taps(h0, h);
    let stride = w * 3;
    let mut out = Vec::new();
    out.try_reserve_exact(stride * h)
        .context("allocating resize buffer")?;
    for t in &ty {
        for i in 0..stride {
            let acc = t.weights.iter().enumerate().fold(HALF, |acc, (k, &wt)| {
                acc + i64::from(src[(t.first + k) * stride + i]) * wt
            });
            out.push(to_u8(acc));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_keeps_flat_images_flat_and_identity_is_exact() {
        let flat = vec![77u8; 9 * 5 * 3];
        let out = resize_bicubic_rgb(&flat, 9, 5, 31, 17).unwrap();
        assert_eq!(out.len(), 31 * 17 * 3);
        assert!(out.iter().all(|&v| v == 77));
        let ramp: Vec<u8> = (0..6 * 4 * 3).map(|i| (i * 3) as u8).collect();
        assert_eq!(resize_bicubic_rgb(&ramp, 6, 4, 6, 4).unwrap(), ramp);
        assert!(resize_bicubic_rgb(&ramp, 7, 4, 6, 4).is_err());
    }
}
