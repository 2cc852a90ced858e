//! SFT throughput of the tiny preset's model on CPU, same shapes as
//! `benches/sft_torch.py`: random token batches, loss on the second half of each
//! sequence, gradient accumulation, clipping and AdamW — the trainer's step code.
//!
//! `cargo bench --bench sft_tiny -- --seq 512 --micro-batch 4 --grad-accum 2 --steps 6`

use candle_core::{DType, Device};
use common::sft::arg;
use rmsweb::model::{Decoder, DecoderConfig};

mod common {
    pub mod sft;
}

fn main() -> anyhow::Result<()> {
    // As `rmsweb` and its trainer do (see rmsweb::train::cpu_tuning).
    // SAFETY: first thing in main; no other thread exists yet.
    unsafe { rmsweb::train::cpu_tuning::configure_thread_pools() };
    rmsweb::train::cpu_tuning::keep_tensor_memory();
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes --bench; under `cargo test --all-targets` run a short smoke.
    let full = args.iter().any(|a| a == "--bench");
    let seq = arg(&args, "--seq", if full { 512 } else { 32 });
    let micro = arg(&args, "--micro-batch", 4);
    let accum = arg(&args, "--grad-accum", 2);
    let steps = arg(&args, "--steps", if full { 6 } else { 1 });
    let cfg = DecoderConfig {
        arch: rmsweb::model::arch::Arch::qwen3(),
        vocab_size: arg(&args, "--vocab", 4096),
        hidden_size: arg(&args, "--hidden", 256),
        intermediate_size: arg(&args, "--inter", 768),
        num_hidden_layers: arg(&args, "--layers", 4),
        num_attention_heads: 4,
        num_key_value_heads: Some(2),
        head_dim: Some(64),
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: true,
        max_position_embeddings: seq.max(2048),
        eos_token_id: None,
    };
    let model = Decoder::from_weights(
        &cfg,
        Decoder::random_weights(&cfg, 42)?,
        DType::F32,
        &Device::Cpu,
        true,
    )?;
    let shape = common::sft::Shape {
        seq,
        micro,
        accum,
        steps,
        lr: 2e-3,
        prefix: 0,
    };
    let tps = common::sft::run(&model, &shape)?;
    println!("candle: {tps:.0} tokens/s");
    Ok(())
}
