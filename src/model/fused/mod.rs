//! Fused CPU kernels for training and sampling, the trainable ones with their own
//! backward pass.
//!
//! candle composes RMS norm, rotary embeddings, masked softmax and log-softmax from
//! many broadcast ops; each one allocates a full-size tensor forward and several
//! backward (gradient accumulation starts every node from zeros). These kernels do
//! one pass forward and one backward over contiguous f32 rows, parallel over rows.
//! They apply to f32 tensors on the CPU; anything else (CUDA, bf16, f64 gradient
//! checks) takes the composite candle path, which is also the reference the tests
//! compare against. `RMSWEB_FUSED=0` turns them off (for comparisons).

mod attention;
mod decode;
mod dropout;
mod gemm;
mod linear;
mod log_probs;
mod lora;
mod norm;
mod rope;
mod simd;
mod softmax;
mod swiglu;

pub use attention::attention;
use candle_core::{CpuStorage, DType, Layout, Result, Storage, Tensor};
pub use decode::{SharedRows, decode_attention};
pub use dropout::DropoutMask;
pub use linear::linear;
pub use log_probs::target_log_probs;
pub use lora::lora_linear;
pub use norm::rms_norm;
use rayon::prelude::*;
pub use rope::{RopeTables, rope};
pub use softmax::{AttentionMask, attention_softmax};
use softmax::{softmax_in_place, softmax_rows, softmax_rows_bwd};
use std::sync::OnceLock;
pub use swiglu::swiglu;

/// Rows handed to one rayon task at least (keeps small tensors on one thread).
const MIN_ROWS_PER_TASK: usize = 16;

/// Whether the fused kernels are switched on (`RMSWEB_FUSED` unset or not `0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("RMSWEB_FUSED").map_or(true, |v| v != "0"))
}

/// Whether tensors of `dtype` on `device` take the fused kernels: f32 on the CPU,
/// kernels switched on.
pub fn applies(device: &candle_core::Device, dtype: DType) -> bool {
    enabled() && device.is_cpu() && dtype == DType::F32
}

fn fusable(t: &Tensor) -> bool {
    applies(t.device(), t.dtype())
}

/// The contiguous f32 data of a CPU storage.
fn f32_slice<'a>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [f32]> {
    let (a, b) = l
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg("fused kernel: input not contiguous".into()))?;
    Ok(&s.as_slice::<f32>()?[a..b])
}

/// Runs `f` on the contiguous f32 data of CPU tensors (all read at once).
fn with_f32<const N: usize, R>(
    ts: [&Tensor; N],
    f: impl FnOnce([&[f32]; N]) -> Result<R>,
) -> Result<R> {
    let ts = ts
        .iter()
        .map(|t| t.contiguous())
        .collect::<Result<Vec<_>>>()?;
    let guards: Vec<_> = ts.iter().map(|t| t.storage_and_layout()).collect();
    let slices = guards
        .iter()
        .map(|(s, l)| match &**s {
            Storage::Cpu(c) => f32_slice(c, l),
            _ => candle_core::bail!("fused kernel: tensor is not on the CPU"),
        })
        .collect::<Result<Vec<_>>>()?;
    match <[&[f32]; N]>::try_from(slices) {
        Ok(slices) => f(slices),
        Err(_) => candle_core::bail!("fused kernel: {N} inputs expected"),
    }
}

/// Output rows `out` (`n` wide) computed in parallel by `f(row_index, row)`.
fn par_rows(out: &mut [f32], n: usize, f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    if n == 0 {
        return; // no rows (an empty dimension)
    }
    out.par_chunks_mut(n)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(r, row)| f(r, row));
}
