//! The SFT step the benchmarks time: random token batches, loss on the second half of
//! each sequence (the LM head on those positions only, as the trainer), gradient
//! accumulation, clipping and AdamW over the model's trainable variables. With a
//! `prefix`, a step's sequences start with the same tokens, as web-agent samples start
//! with one system prompt (the trainer encodes it once per micro-batch).

use candle_core::Tensor;
use rand::{Rng, SeedableRng};
use rmsweb::model::Decoder;
use rmsweb::model::chat_template::Encoded;
use rmsweb::train::optim::{AdamW, AdamWConfig, accumulate_grads, clip_grad_norm};
use rmsweb::train::sft::micro_batch_nll;
use std::collections::HashMap;
use std::time::Instant;

/// The value of `--name N` in `args`, else `default`.
pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Batch shape and step count of a run.
pub struct Shape {
    pub seq: usize,
    pub micro: usize,
    pub accum: usize,
    pub steps: usize,
    pub lr: f64,
    /// Leading tokens every sequence of a step shares (at most half of `seq`).
    pub prefix: usize,
}

/// Runs one warm-up step and `shape.steps` timed ones, printing each step's loss and
/// times; returns the timed steps' tokens per second.
pub fn run(model: &Decoder, shape: &Shape) -> anyhow::Result<f64> {
    let Shape {
        seq,
        micro,
        accum,
        steps,
        lr,
        prefix,
    } = *shape;
    let prefix = prefix.min(seq / 2);
    let vocab = model.config.vocab_size as u32;
    let vars = model.trainable_vars();
    let mut opt = AdamW::new(
        vars.clone(),
        AdamWConfig {
            lr,
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
        let common: Vec<u32> = (0..prefix).map(|_| rng.random_range(0..vocab)).collect();
        let samples: Vec<Encoded> = (0..micro * accum)
            .map(|_| Encoded {
                ids: (0..seq)
                    .map(|i| match common.get(i) {
                        Some(&t) => t,
                        None => rng.random_range(0..vocab),
                    })
                    .collect(),
                mask: (0..seq).map(|i| i >= seq / 2).collect(),
            })
            .collect();
        let targets = micro * accum * (seq - seq / 2);
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let mut loss_sum = 0.0;
        let (mut t_fwd, mut t_bwd) = (0.0, 0.0);
        for (k, chunk) in samples.chunks(micro).enumerate() {
            // Adapter dropout draws its masks from the key, as the trainer sets it.
            model.dropout_key().set(Some((step * accum + k) as u64));
            let batch: Vec<&Encoded> = chunk.iter().collect();
            let tf = Instant::now();
            let nll = micro_batch_nll(model, &batch, 0, 0.0)?.weighted;
            let loss = (nll / targets as f64)?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            t_fwd += tf.elapsed().as_secs_f64();
            let tb = Instant::now();
            let gs = loss.backward()?;
            accumulate_grads(&mut grads, &gs, &vars)?;
            t_bwd += tb.elapsed().as_secs_f64();
        }
        model.dropout_key().set(None);
        let to = Instant::now();
        clip_grad_norm(&mut grads, 1.0)?;
        opt.step(&grads, lr)?;
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
    Ok(tokens as f64 / elapsed.max(1e-9))
}
