//! Supervised fine-tuning: loss on assistant tokens only, gradient accumulation,
//! AdamW with cosine/warmup and gradient clipping, metrics, resumable checkpoints,
//! graceful stop.
//!
//! Data order: each epoch is a permutation of the samples seeded by `(seed, epoch)`;
//! the samples form one stream and optimizer step `s` takes stream items
//! `s·B .. (s+1)·B` (B = micro_batch × grad_accum). The data position is therefore a
//! function of the step, and so are the dropout masks (keyed by seed, step and
//! micro-batch): a run resumed from a checkpoint continues exactly as it would have.

pub use super::nll::{BatchNll, micro_batch_nll};
use super::optim::{AdamW, accumulate_grads, clip_grad_norm};
use super::run::{
    RunDir, RunState, load_trainable_and_optimizer, read_trainer_state,
    save_trainable_and_optimizer, write_checkpoint,
};
use super::schedule::{cosine_with_warmup, warmup_steps};
pub use super::sft_config::{SftConfig, TinyModel, TinyVision};
use super::sft_model::SftModel;
pub use super::sft_prepare::compute_dtype;
use super::sft_prepare::{Prepared, prepare};
use crate::model::chat_template::Encoded;
use crate::model::{parse_device, peft, tokenizer};
use crate::train::lifecycle;
use crate::train::metric_keys as keys;
use anyhow::Result;
use candle_core::{Device, Tensor};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// What the trainer reports after each optimizer step.
#[derive(Debug, Clone)]
pub struct StepReport {
    pub step: u64,
    pub total: u64,
    pub loss: f64,
    pub lr: f64,
    pub tokens_per_s: f64,
}

pub use crate::train::lifecycle::Outcome;

/// Sample index of stream item `g` of `n` items: epoch `g / n` is a permutation seeded
/// by `(seed, epoch)` (see the module docs); `cache` keeps the permutations drawn.
pub fn stream_item(g: usize, n: usize, seed: u64, cache: &mut HashMap<usize, Vec<usize>>) -> usize {
    let epoch = g / n;
    let perm = cache.entry(epoch).or_insert_with(|| {
        let mut p: Vec<usize> = (0..n).collect();
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        p.shuffle(&mut rng);
        p
    });
    perm[g % n]
}

fn order_hash(indices: &[usize]) -> f64 {
    let h = indices.iter().fold(0xcbf29ce484222325u64, |h, &i| {
        (h ^ i as u64).wrapping_mul(0x100000001b3)
    });
    (h >> 12) as f64
}

#[derive(Serialize, Deserialize)]
struct TrainerState {
    step: u64,
    optimizer_t: u64,
    samples_seen: u64,
}

fn save_checkpoint(
    cfg: &SftConfig,
    run: &RunDir,
    model: &SftModel,
    opt: &AdamW,
    step: u64,
    prompt_format: Option<&str>,
) -> Result<PathBuf> {
    write_checkpoint(run, step, |dir| {
        save_trainable_and_optimizer(dir, &model.trainable_vars(), opt)?;
        match (&cfg.lora, &cfg.model) {
            (Some(l), Some(base)) => {
                let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.clone());
                let base = base.to_string_lossy();
                match model {
                    SftModel::Text(m) => peft::export(m, l, &base, &dir.join("adapter"))?,
                    // Under the checkpoint's module names, with the screenshot setting
                    // the policy must preprocess with.
                    SftModel::Vl(v) => {
                        v.model.export_adapter(l, &base, &dir.join("adapter"))?;
                        v.image.save(dir)?;
                    }
                }
            }
            _ => {
                // A tiny (fully trained) model: the folder is a loadable HF model.
                model.save_model(dir)?;
                tokenizer::copy_files(run.root(), dir)?;
                if let SftModel::Vl(v) = model {
                    v.image.save(dir)?;
                }
            }
        }
        if let Some(v) = prompt_format {
            super::prompt_record::write(dir, v)?;
        }
        let st = TrainerState {
            step,
            optimizer_t: opt.t,
            samples_seen: step * cfg.effective_batch() as u64,
        };
        crate::util::fs::write_atomic(
            &dir.join("trainer_state.json"),
            serde_json::to_string_pretty(&st)?.as_bytes(),
        )
    })
}

/// Runs (or, with `resume`, continues from the latest checkpoint) an SFT run in `run`.
/// `stop` is polled after each step: when set the run checkpoints and ends `stopped`.
pub fn train(
    cfg: &SftConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&StepReport),
) -> Result<Outcome> {
    lifecycle::run(run, cfg, resume, &mut Vec::new(), |_| {
        train_inner(cfg, run, resume, stop, on_step)
    })
}

// Kept whole: the step loop reads as one step in order (draw the samples, forward
// and backward, clip, update, metrics, checkpoint or stop, the log line).
fn train_inner(
    cfg: &SftConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&StepReport),
) -> Result<Outcome> {
    let device = parse_device(&cfg.device)?;
    let mut prepared = prepare(cfg, run, &device)?;
    let n = prepared.samples.len();
    let eff = cfg.effective_batch();
    let mut total = (n * cfg.epochs).div_ceil(eff) as u64;
    if cfg.max_steps > 0 {
        total = total.min(cfg.max_steps as u64);
    }
    run.set_total_steps(total);
    let warmup = warmup_steps(cfg.warmup_ratio, total as usize);
    let mut opt = AdamW::for_training(prepared.model.trainable_vars(), cfg.lr, cfg.weight_decay)?;
    let start = if resume {
        restore(run, &mut prepared.model, &device, &mut opt)?
    } else {
        0
    };
    log_start(cfg, run, &prepared, &device, total)?;
    let mut perms = HashMap::new();
    let since = Instant::now();
    for step in start..total {
        let t0 = Instant::now();
        let idx: Vec<usize> = (0..eff)
            .map(|k| stream_item(step as usize * eff + k, n, cfg.seed, &mut perms))
            .collect();
        let mut sums = forward_backward(cfg, &prepared, &idx, step)?;
        // Logged as before: the mean NLL of the assistant tokens.
        let loss_sum = sums.assistant_nll / sums.targets.max(1) as f64;
        anyhow::ensure!(
            loss_sum.is_finite() && sums.prompt_nll.is_finite(),
            "loss is not finite at step {}",
            step + 1
        );
        let grad_norm = clip_grad_norm(&mut sums.grads, cfg.max_grad_norm)?;
        let lr = cosine_with_warmup(cfg.lr, step as usize, total as usize, warmup);
        opt.step(&sums.grads, lr)?;
        let dt = t0.elapsed().as_secs_f64();
        let done = step + 1;
        let tokens_per_s = sums.tokens as f64 / dt;
        let m = sft_metrics(
            &sums,
            loss_sum,
            lr,
            grad_norm,
            dt,
            (done as usize * eff) as f64 / n as f64,
            &idx,
        );
        run.log_metrics(done, &m)?;
        on_step(&StepReport {
            step: done,
            total,
            loss: loss_sum,
            lr,
            tokens_per_s,
        });
        let step_done = lifecycle::StepDone {
            done,
            total,
            checkpoint_every: cfg.checkpoint_every,
            stop: &stop,
            alerts: &[],
        };
        if let Some(out) = step_done.checkpoint(run, || {
            let format = prepared.prompt_format.as_deref();
            save_checkpoint(cfg, run, &prepared.model, &opt, done, format)
        })? {
            return Ok(out);
        }
        // One line a step in stdout.log (what `train sft` prints and the Runs tab
        // tails): the step's loss and speed, the time left at this run's mean pace.
        let pace = since.elapsed().as_secs_f64() / (done - start) as f64;
        run.log(&format!(
            "step {done}/{total} loss {loss_sum:.4} lr {lr:.2e} {dt:.1} s ({tokens_per_s:.0} tokens/s), about {} left",
            crate::util::duration::human_time(pace * (total - done) as f64)
        ))?;
        run.set_status(
            RunState::Running,
            done,
            &format!("step {done}/{total} loss {loss_sum:.4}"),
        )?;
    }
    lifecycle::finish(run, total, &[])
}

/// The metrics of one SFT step: the assistant tokens' mean NLL (and the other
/// tokens' when they are weighed), lr, gradient norm, speed, epoch and data order.
fn sft_metrics(
    sums: &StepSums,
    loss: f64,
    lr: f64,
    grad_norm: f64,
    dt: f64,
    epoch: f64,
    idx: &[usize],
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert(keys::SFT_LOSS.into(), loss.into());
    if sums.others > 0 {
        m.insert(
            keys::SFT_PROMPT_LOSS.into(),
            (sums.prompt_nll / sums.others as f64).into(),
        );
    }
    m.insert(keys::SFT_TOKENS.into(), sums.targets.into());
    m.insert(keys::ACTOR_LR.into(), lr.into());
    m.insert(keys::ACTOR_GRAD_NORM.into(), grad_norm.into());
    m.insert(
        keys::PERF_TOKENS_PER_S.into(),
        (sums.tokens as f64 / dt).into(),
    );
    m.insert(keys::PERF_STEP_S.into(), dt.into());
    m.insert(keys::TRAIN_EPOCH.into(), epoch.into());
    m.insert("data/order_hash".into(), order_hash(idx).into());
    m
}

/// Loads the latest checkpoint's adapters (or weights) and optimizer state into
/// `model` and `opt`, and drops the metrics logged after it. Returns the step to start
/// from: 0 when there is no checkpoint yet.
fn restore(run: &RunDir, model: &mut SftModel, device: &Device, opt: &mut AdamW) -> Result<u64> {
    let Some((step, dir)) = run.latest_checkpoint() else {
        return Ok(0);
    };
    let st: TrainerState = read_trainer_state(&dir)?;
    let params = load_trainable_and_optimizer(&dir, device, opt, st.optimizer_t)?;
    model.load_params(&params)?;
    run.truncate_metrics_after(step)?;
    run.log(&format!("resumed from checkpoint step {step}"))?;
    Ok(step)
}

/// The run log's first line: steps, samples, epochs, device (with its threads) and
/// dtype.
fn log_start(
    cfg: &SftConfig,
    run: &RunDir,
    prepared: &Prepared,
    device: &Device,
    total: u64,
) -> Result<()> {
    let threads = if device.is_cpu() {
        let t = crate::train::cpu_tuning::cpu_threads();
        format!(" ({t} thread{})", if t == 1 { "" } else { "s" })
    } else {
        String::new()
    };
    run.log(&format!(
        "training {total} steps of {} samples ({} samples, {} epochs) on {}{threads} in {:?}",
        cfg.effective_batch(),
        prepared.samples.len(),
        cfg.epochs,
        cfg.device,
        prepared.model.decoder().dtype()
    ))
}

/// What one optimizer step's micro-batches add up to.
struct StepSums {
    grads: HashMap<String, Tensor>,
    assistant_nll: f64,
    prompt_nll: f64,
    /// Tokens the model read.
    tokens: usize,
    /// Loss tokens (the assistant's), and the other tokens weighed by
    /// `prompt_loss_weight` (0 when it is 0).
    targets: usize,
    others: usize,
}

/// Draws step `step`'s samples `idx` (renamed by the augmenter where it is asked to),
/// and accumulates each micro-batch's gradient of the weighted NLL over the weight of
/// the step's loss tokens. Dropout is keyed by seed, step and micro-batch.
fn forward_backward(
    cfg: &SftConfig,
    prepared: &Prepared,
    idx: &[usize],
    step: u64,
) -> Result<StepSums> {
    let Prepared {
        model,
        samples,
        images,
        pad,
        augment,
        ..
    } = prepared;
    let first = step as usize * idx.len();
    let drawn: Vec<std::borrow::Cow<'_, Encoded>> = idx
        .iter()
        .enumerate()
        .map(|(k, &i)| augment.draw(samples, i, first + k, cfg.augment_values, cfg.seed))
        .collect::<Result<_>>()?;
    let targets: usize = drawn
        .iter()
        .map(|e| e.mask.iter().skip(1).filter(|&&m| m).count())
        .sum();
    let others: usize = if cfg.prompt_loss_weight > 0.0 {
        drawn.iter().map(|e| e.ids.len() - 1).sum::<usize>() - targets
    } else {
        0
    };
    let denom = (targets as f64 + cfg.prompt_loss_weight * others as f64).max(1.0);
    let vars = model.trainable_vars();
    let mut sums = StepSums {
        grads: HashMap::new(),
        assistant_nll: 0.0,
        prompt_nll: 0.0,
        tokens: 0,
        targets,
        others,
    };
    for (mi, chunk) in drawn.chunks(cfg.micro_batch).enumerate() {
        let key = cfg.seed ^ (step << 20) ^ mi as u64;
        model.decoder().dropout_key().set(Some(key));
        let batch: Vec<&Encoded> = chunk.iter().map(|e| e.as_ref()).collect();
        let shots: Vec<Option<PathBuf>> = idx[mi * cfg.micro_batch..][..chunk.len()]
            .iter()
            .map(|&i| images[i].clone())
            .collect();
        let nll = model.nll(&batch, &shots, *pad, cfg.prompt_loss_weight)?;
        sums.tokens += nll.tokens;
        sums.assistant_nll += nll.assistant_nll;
        sums.prompt_nll += nll.prompt_nll;
        let loss = (nll.weighted / denom)?;
        accumulate_grads(&mut sums.grads, &loss.backward()?, &vars)?;
    }
    model.decoder().dropout_key().set(None);
    Ok(sums)
}

/// Continues the run in `run_dir` from its `run.toml` and latest checkpoint.
pub fn resume(
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&StepReport),
) -> Result<Outcome> {
    let (run, cfg) = lifecycle::reopen(run_dir, SftConfig::from_toml)?;
    train(&cfg, &run, true, stop, on_step)
}

#[cfg(test)]
mod tests {
    use super::{Encoded, compute_dtype, micro_batch_nll};
    use candle_core::DType;

    #[test]
    fn prompt_tokens_enter_the_loss_only_at_their_weight() {
        let m = crate::train::rl::test_model(40, 3, 2.0, true);
        let a = Encoded {
            ids: vec![1, 5, 9, 14, 2, 30, 7],
            mask: vec![false, false, false, true, true, false, true],
        };
        let b = Encoded {
            ids: vec![3, 8, 11, 2],
            mask: vec![false, false, true, true],
        };
        let batch = [&a, &b];
        let scalar =
            |t: &candle_core::Tensor| t.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap();
        let only = micro_batch_nll(&m, &batch, 0, 0.0).unwrap();
        assert_eq!((only.assistant_tokens, only.prompt_tokens), (5, 0));
        assert!((scalar(&only.weighted) - only.assistant_nll).abs() < 1e-4);
        let mixed = micro_batch_nll(&m, &batch, 0, 0.25).unwrap();
        // Every token after the first is a target; padding never is.
        assert_eq!((mixed.assistant_tokens, mixed.prompt_tokens), (5, 4));
        assert!((mixed.assistant_nll - only.assistant_nll).abs() < 1e-4);
        assert!(mixed.prompt_nll > 0.0);
        let expect = mixed.assistant_nll + 0.25 * mixed.prompt_nll;
        assert!((scalar(&mixed.weighted) - expect).abs() < 1e-3, "{expect}");
        // The weight reaches the gradient: prompt tokens pull on the embeddings.
        let g0 = only.weighted.backward().unwrap();
        let g1 = mixed.weighted.backward().unwrap();
        let emb = |g: &candle_core::backprop::GradStore| {
            let v = &m.trainable_vars()[0].1;
            g.get(v.as_tensor())
                .unwrap()
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!((emb(&g0) - emb(&g1)).abs() > 1e-9);
    }

    #[test]
    fn auto_dtype_is_bf16_for_lora_on_a_gpu_and_f32_elsewhere() {
        assert_eq!(compute_dtype("auto", true, true).unwrap(), DType::BF16);
        assert_eq!(compute_dtype("auto", false, true).unwrap(), DType::F32);
        assert_eq!(compute_dtype("auto", true, false).unwrap(), DType::F32);
        assert_eq!(compute_dtype("auto", false, false).unwrap(), DType::F32);
        assert_eq!(compute_dtype("bf16", false, false).unwrap(), DType::BF16);
        assert_eq!(compute_dtype("f32", true, true).unwrap(), DType::F32);
        let e = compute_dtype("fp16", true, true).unwrap_err().to_string();
        assert!(e.contains("dtype `fp16`: use auto, f32 or bf16"), "{e}");
    }
}
