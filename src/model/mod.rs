//! Candle decoders behind one causal-LM interface ([`Decoder`], the families of
//! [`arch`]: Qwen3, Llama; Qwen3-VL in [`vl`] wraps it), LoRA, tokenizer, chat
//! template, checkpoints, and Qwen3-VL image preprocessing.
//!
//! Training-safe: the decoder only uses ops with backward passes (see [`decoder`]).

pub mod arch;
pub mod chat_template;
pub mod config;
pub mod constrain;
pub mod cut;
pub mod decoder;
pub mod engine;
pub mod fused;
pub mod gguf;
pub mod kv_cache;
pub mod lora;
pub mod merge;
pub mod peft;
pub mod policy;
pub mod prefix;
pub mod rope;
pub mod sample;
pub mod score;
pub mod tokenizer;
pub mod vl;
pub mod weights;

pub use chat_template::{ChatTemplate, Message};
pub use config::DecoderConfig;
pub use decoder::{Decoder, KvCache};
pub use lora::LoraConfig;
pub use policy::LocalModelPolicy;

/// `t` in f32 unless it is f64 (log-probabilities of bf16 logits lose too much).
pub fn at_least_f32(t: &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> {
    match t.dtype() {
        candle_core::DType::F64 => Ok(t.clone()),
        _ => t.to_dtype(candle_core::DType::F32),
    }
}

/// Parses a device name: `cpu` or `cuda:N` (`cuda` = `cuda:0`).
pub fn parse_device(s: &str) -> anyhow::Result<candle_core::Device> {
    match s {
        "cpu" => Ok(candle_core::Device::Cpu),
        _ => {
            let rest = s
                .strip_prefix("cuda")
                .ok_or_else(|| anyhow::anyhow!("unknown device `{s}` (use cpu or cuda:N)"))?;
            let n: usize = match rest.strip_prefix(':') {
                Some(n) => n
                    .parse()
                    .map_err(|_| anyhow::anyhow!("bad device ordinal in `{s}`"))?,
                None if rest.is_empty() => 0,
                None => anyhow::bail!("unknown device `{s}` (use cpu or cuda:N)"),
            };
            candle_core::Device::new_cuda(n).map_err(|e| {
                let e = without_backtrace(e);
                anyhow::anyhow!("device `{s}`: {e} ({CUDA_HINT})")
            })
        }
    }
}

/// The error without the backtrace candle attaches under `RUST_BACKTRACE`: a device
/// that cannot be opened is the user's setup, not a bug to locate in our code.
fn without_backtrace(e: candle_core::Error) -> candle_core::Error {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => without_backtrace(*inner),
        e => e,
    }
}

/// What to check when a CUDA device cannot be opened.
#[cfg(feature = "cuda")]
const CUDA_HINT: &str = "no usable NVIDIA driver or GPU: check `nvidia-smi`, and that \
    libcuda.so.1 is the driver's, not a stub";
/// What to check when a CUDA device cannot be opened.
#[cfg(not(feature = "cuda"))]
const CUDA_HINT: &str = "this rmsweb was built without GPU support: rebuild with \
    `cargo build --release --features cuda`, see scripts/build-cuda.sh";

#[cfg(test)]
mod tests {
    use super::parse_device;

    fn err(s: &str) -> String {
        format!("{:#}", parse_device(s).unwrap_err())
    }

    #[test]
    fn device_names_parse_or_fail_clearly() {
        assert!(parse_device("cpu").unwrap().is_cpu());
        assert!(err("gpu").contains("unknown device `gpu` (use cpu or cuda:N)"));
        assert!(err("cudax").contains("unknown device `cudax`"));
        assert!(err("cuda:x").contains("bad device ordinal in `cuda:x`"));
    }

    #[test]
    fn device_errors_drop_candles_backtrace() {
        let e = candle_core::Error::WithBacktrace {
            inner: Box::new(candle_core::Error::Msg("no driver".into())),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert!(e.to_string().lines().count() > 1);
        assert_eq!(super::without_backtrace(e).to_string(), "no driver");
    }

    /// In a CPU-only build, asking for a GPU names the device and says how to get one.
    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_in_a_cpu_build_says_how_to_build_with_cuda() {
        for name in ["cuda", "cuda:0", "cuda:3"] {
            let e = err(name);
            assert!(e.starts_with(&format!("device `{name}`:")), "{e}");
            assert!(e.contains("--features cuda"), "{e}");
        }
    }
}
