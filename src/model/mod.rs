//! Candle Qwen3-architecture decoder with LoRA, tokenizer, chat template, checkpoints.
//!
//! Training-safe: the decoder only uses ops with backward passes (see [`qwen3`]).

pub mod chat_template;
pub mod config;
pub mod lora;
pub mod peft;
pub mod policy;
pub mod qwen3;
pub mod sample;
pub mod tokenizer;
pub mod weights;

pub use chat_template::{ChatTemplate, Message};
pub use config::Qwen3Config;
pub use lora::LoraConfig;
pub use policy::LocalModelPolicy;
pub use qwen3::{KvCache, Qwen3};

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
                anyhow::anyhow!("device `{s}`: {e} (was rmsweb built with `--features cuda`?)")
            })
        }
    }
}
