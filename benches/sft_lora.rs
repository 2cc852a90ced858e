//! LoRA SFT throughput on a pretrained model folder (SmolLM2-135M-Instruct imported by
//! `rmsweb model import`), the same work as `benches/sft_lora_torch.py` (PyTorch +
//! PEFT): frozen f32 base, adapters on every linear layer (r, α as given; dropout
//! 0.05), random token batches with the loss on the second half of each sequence,
//! gradient accumulation, clipping and AdamW over the adapters.
//!
//! `cargo bench --bench sft_lora -- --model DIR --seq 512 --micro-batch 4
//! --grad-accum 2 --steps 6 --r 16 --alpha 32 [--prefix 256]`
//!
//! `--prefix N` starts every sequence of a step with the same N tokens, as the
//! recipe's samples start with one system prompt, which the trainer encodes once per
//! micro-batch.
//!
//! Without `--model` (as under `cargo test --all-targets`) a random two-layer Llama
//! runs one short step.

use candle_core::{DType, Device};
use common::sft::arg;
use rmsweb::model::{Decoder, DecoderConfig, LoraConfig, weights};

mod common {
    pub mod sft;
}

fn main() -> anyhow::Result<()> {
    // As `rmsweb` and its trainer do (see rmsweb::train::cpu_tuning).
    // SAFETY: first thing in main; no other thread exists yet.
    unsafe { rmsweb::train::cpu_tuning::configure_thread_pools() };
    rmsweb::train::cpu_tuning::keep_tensor_memory();
    let args: Vec<String> = std::env::args().collect();
    let model_dir = args
        .iter()
        .position(|a| a == "--model")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let full = model_dir.is_some();
    let lora = LoraConfig {
        r: arg(&args, "--r", 16),
        alpha: arg(&args, "--alpha", 32) as f64,
        ..LoraConfig::small()
    };
    let shape = common::sft::Shape {
        seq: arg(&args, "--seq", if full { 512 } else { 32 }),
        micro: arg(&args, "--micro-batch", 4),
        accum: arg(&args, "--grad-accum", 2),
        steps: arg(&args, "--steps", if full { 6 } else { 1 }),
        lr: 2e-4,
        // Tokens every sequence of a step starts with (a system prompt); 0 by default,
        // as the PyTorch peer's batches.
        prefix: arg(&args, "--prefix", if full { 0 } else { 8 }),
    };
    let (cfg, w) = match &model_dir {
        Some(dir) => (
            DecoderConfig::from_file(dir.join("config.json"))?,
            weights::load_dir(dir, &Device::Cpu)?,
        ),
        None => {
            let cfg = DecoderConfig::from_hf_json(&serde_json::json!({
                "model_type": "llama", "vocab_size": 512, "hidden_size": 64,
                "intermediate_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2,
                "tie_word_embeddings": true}))?;
            let w = Decoder::random_weights(&cfg, 42)?;
            (cfg, w)
        }
    };
    let mut model = Decoder::from_weights(&cfg, w, DType::F32, &Device::Cpu, false)?;
    let n = model.add_lora(&lora, 42)?;
    let trainable: usize = model
        .trainable_vars()
        .iter()
        .map(|(_, v)| v.elem_count())
        .sum();
    println!(
        "{} x{} layers: {n} adapters (r {}, alpha {}), {trainable} trainable parameters",
        cfg.arch.spec.model_type, cfg.num_hidden_layers, lora.r, lora.alpha
    );
    let tps = common::sft::run(&model, &shape)?;
    println!("candle: {tps:.0} tokens/s");
    Ok(())
}
