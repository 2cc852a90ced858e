//! SFT throughput of the tiny preset's model on CPU, same shapes as
//! `benches/sft_torch.py`: random token batches, loss on the second half of each
//! sequence, gradient accumulation, clipping and AdamW — the trainer's step code.
//!
//! `cargo bench --bench sft_tiny -- --seq 512 --micro-batch 4 --grad-accum 2 --steps 6`

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use rmsweb::model::chat_template::Encoded;
use rmsweb::model::{Qwen3, Qwen3Config};
use rmsweb::train::optim::{AdamW, AdamWConfig, accumulate_grads, clip_grad_norm};
use rmsweb::train::sft::micro_batch_nll;
use std::collections::HashMap;
use std::time::Instant;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
    let cfg = Qwen3Config {
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
    let model = Qwen3::from_weights(
        &cfg,
        Qwen3::random_weights(&cfg, 42)?,
        DType::F32,
        &Device::Cpu,
        true,
    )?;
    let vars = model.trainable_vars();
    let mut opt = AdamW::new(
        vars.clone(),
        AdamWConfig {
            lr: 2e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        },
    )?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let (mut tokens, mut elapsed) = (0usize, 0.0f64);
    for step in 0..=steps {
        let t0 = Instant::now();
        let samples: Vec<Encoded> = (0..micro * accum)
            .map(|_| Encoded {
                ids: (0..seq)
                    .map(|_| rng.random_range(0..cfg.vocab_size as u32))
                    .collect(),
                mask: (0..seq).map(|i| i >= seq / 2).collect(),
            })
            .collect();
        let targets = micro * accum * (seq - seq / 2);
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let mut loss_sum = 0.0;
        let (mut t_fwd, mut t_bwd) = (0.0, 0.0);
        for chunk in samples.chunks(micro) {
            let batch: Vec<&Encoded> = chunk.iter().collect();
            let tf = Instant::now();
            let nll = micro_batch_nll(&model, &batch, 0, 0.0)?.weighted;
            let loss = (nll / targets as f64)?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            t_fwd += tf.elapsed().as_secs_f64();
            let tb = Instant::now();
            let gs = loss.backward()?;
            accumulate_grads(&mut grads, &gs, &vars)?;
            t_bwd += tb.elapsed().as_secs_f64();
        }
        let to = Instant::now();
        clip_grad_norm(&mut grads, 1.0)?;
        opt.step(&grads, 2e-3)?;
        let t_opt = to.elapsed().as_secs_f64();
        let dt = t0.elapsed().as_secs_f64();
        if step > 0 {
            tokens += micro * accum * seq;
            elapsed += dt;
        }
        println!(
            "step {step} loss {loss_sum:.4} {dt:.2}s \
             (forward {t_fwd:.2}s, backward {t_bwd:.2}s, optimizer {t_opt:.2}s)"
        );
    }
    println!("candle: {:.0} tokens/s", tokens as f64 / elapsed);
    Ok(())
}
