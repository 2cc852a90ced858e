//! Supervised fine-tuning: loss on assistant tokens only, gradient accumulation,
//! AdamW with cosine/warmup and gradient clipping, metrics, resumable checkpoints,
//! graceful stop.
//!
//! Data order: each epoch is a permutation of the samples seeded by `(seed, epoch)`;
//! the samples form one stream and optimizer step `s` takes stream items
//! `s·B .. (s+1)·B` (B = micro_batch × grad_accum). The data position is therefore a
//! function of the step, and so are the dropout masks (keyed by seed, step and
//! micro-batch): a run resumed from a checkpoint continues exactly as it would have.

use super::optim::{AdamW, AdamWConfig, accumulate_grads, clip_grad_norm};
use super::run::{
    RunDir, RunState, read_trainer_state, save_trainable_and_optimizer, write_checkpoint,
};
use super::samples;
use super::schedule::{cosine_with_warmup, warmup_steps};
use crate::model::chat_template::{ChatTemplate, Encoded};
use crate::model::{
    LoraConfig, Qwen3, Qwen3Config, at_least_f32, fused, parse_device, peft, tokenizer, weights,
};
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use candle_core::{D, DType, Device, Tensor};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Shape of the `tiny` preset's model (its vocabulary is the trained BPE's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TinyModel {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
}

/// The full resolved configuration of an SFT run (written to `run.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftConfig {
    pub kind: String,
    pub preset: String,
    pub dataset: PathBuf,
    /// Base model folder (qwen3-lora).
    #[serde(default)]
    pub model: Option<PathBuf>,
    pub device: String,
    /// `auto` (bf16 for LoRA on CUDA, else f32), `f32` or `bf16`.
    pub dtype: String,
    pub seed: u64,
    pub epochs: usize,
    /// Cap on optimizer steps (0: no cap).
    pub max_steps: usize,
    pub lr: f64,
    pub weight_decay: f64,
    pub warmup_ratio: f64,
    pub max_grad_norm: f64,
    pub micro_batch: usize,
    pub grad_accum: usize,
    /// Longest sequence in tokens; longer samples keep their last `context` tokens.
    pub context: usize,
    /// Save a checkpoint every this many optimizer steps (and at the end).
    pub checkpoint_every: usize,
    #[serde(default)]
    pub lora: Option<LoraConfig>,
    #[serde(default)]
    pub tiny: Option<TinyModel>,
}

impl SftConfig {
    /// The named preset: `tiny` (CPU, full training of a ~4M-parameter model with a
    /// BPE trained on the dataset) or `qwen3-lora` (the paper's recipe, ALGORITHMS.md §6).
    pub fn preset(name: &str, dataset: &Path, model: Option<&Path>) -> Result<Self> {
        let base = SftConfig {
            kind: "sft".into(),
            preset: name.into(),
            dataset: dataset.to_path_buf(),
            model: model.map(Path::to_path_buf),
            device: "cpu".into(),
            dtype: "auto".into(),
            seed: 42,
            epochs: 3,
            max_steps: 0,
            lr: 1e-4,
            weight_decay: 0.01,
            warmup_ratio: 0.03,
            max_grad_norm: 1.0,
            micro_batch: 1,
            grad_accum: 32,
            context: 12_000,
            checkpoint_every: 100,
            lora: None,
            tiny: None,
        };
        match name {
            "tiny" => Ok(SftConfig {
                lr: 2e-3,
                micro_batch: 4,
                grad_accum: 2,
                context: 1024,
                checkpoint_every: 50,
                tiny: Some(TinyModel {
                    vocab_size: 4096,
                    hidden_size: 256,
                    num_hidden_layers: 4,
                    num_attention_heads: 4,
                    num_key_value_heads: 2,
                    head_dim: 64,
                    intermediate_size: 768,
                }),
                ..base
            }),
            "qwen3-lora" => {
                anyhow::ensure!(model.is_some(), "preset qwen3-lora needs --model DIR");
                Ok(SftConfig {
                    lora: Some(LoraConfig::paper()),
                    ..base
                })
            }
            _ => anyhow::bail!("unknown preset `{name}` (tiny, qwen3-lora)"),
        }
    }

    /// Applies `key=value` overrides (dotted keys, TOML values; bare words are strings).
    pub fn with_overrides(self, sets: &[String]) -> Result<Self> {
        let text = super::run::apply_overrides(&self, sets)?;
        Self::from_toml(&text).context("after --set overrides")
    }

    /// Parses `run.toml`.
    pub fn from_toml(text: &str) -> Result<Self> {
        let de = toml::Deserializer::parse(text)?;
        let cfg: SftConfig = serde_path_to_error::deserialize(de)
            .map_err(|e| anyhow::anyhow!("field `{}`: {}", e.path(), e.inner()))?;
        anyhow::ensure!(
            cfg.micro_batch > 0 && cfg.grad_accum > 0,
            "micro_batch and grad_accum must be positive"
        );
        anyhow::ensure!(cfg.context >= 2, "context must be at least 2 tokens");
        anyhow::ensure!(cfg.epochs > 0, "epochs must be positive");
        Ok(cfg)
    }

    /// Samples per optimizer step.
    pub fn effective_batch(&self) -> usize {
        self.micro_batch * self.grad_accum
    }
}

/// What the trainer reports after each optimizer step.
#[derive(Debug, Clone)]
pub struct StepReport {
    pub step: u64,
    pub total: u64,
    pub loss: f64,
    pub lr: f64,
    pub tokens_per_s: f64,
}

/// How a training call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    Stopped,
}

struct Prepared {
    model: Qwen3,
    samples: Vec<Encoded>,
    pad: u32,
}

fn resolve_dtype(cfg: &SftConfig, device: &Device) -> Result<DType> {
    compute_dtype(&cfg.dtype, cfg.lora.is_some(), !device.is_cpu())
}

/// The model's compute dtype for a run's `dtype` setting.
///
/// `auto` is bf16 on a GPU when the base weights are frozen (LoRA: the frozen base is
/// stored and multiplied in bf16, the adapters stay f32 and the loss is taken in f32),
/// and f32 otherwise: on the CPU (no fast bf16 there), and for full training (the
/// `tiny` preset), where bf16 weights would round away AdamW's small updates.
/// `--set dtype=bf16` forces bf16 anyway.
pub fn compute_dtype(dtype: &str, lora: bool, on_gpu: bool) -> Result<DType> {
    Ok(match dtype {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "auto" if lora && on_gpu => DType::BF16,
        "auto" => DType::F32,
        other => anyhow::bail!("dtype `{other}`: use auto, f32 or bf16"),
    })
}

/// Builds tokenizer, samples and model, writing the tokenizer/config of a tiny model
/// into the run folder (and reusing them on resume).
fn prepare(cfg: &SftConfig, run: &RunDir, device: &Device) -> Result<Prepared> {
    let ds = Dataset::open(&cfg.dataset)
        .with_context(|| format!("opening dataset {}", cfg.dataset.display()))?;
    let chats = samples::from_dataset(&ds)?;
    anyhow::ensure!(
        !chats.is_empty(),
        "{}: no successful trajectory steps to train on",
        cfg.dataset.display()
    );
    let dtype = resolve_dtype(cfg, device)?;
    let (tok, template, mut model) = match (&cfg.tiny, &cfg.model) {
        (Some(tiny), _) => {
            let tok_path = run.root().join("tokenizer.json");
            let template = ChatTemplate::chatml();
            let tok = if tok_path.exists() {
                tokenizer::load(&tok_path)?
            } else {
                let texts: Vec<String> = chats
                    .iter()
                    .map(|c| template.render(c, false))
                    .collect::<Result<_>>()?;
                let tok = tokenizer::train_bpe(texts.iter(), tiny.vocab_size)?;
                tokenizer::save(&tok, run.root())?;
                tok
            };
            let config = Qwen3Config {
                vocab_size: tok.get_vocab_size(true),
                hidden_size: tiny.hidden_size,
                intermediate_size: tiny.intermediate_size,
                num_hidden_layers: tiny.num_hidden_layers,
                num_attention_heads: tiny.num_attention_heads,
                num_key_value_heads: Some(tiny.num_key_value_heads),
                head_dim: Some(tiny.head_dim),
                rms_norm_eps: 1e-6,
                rope_theta: 10_000.0,
                rope_scaling: None,
                tie_word_embeddings: true,
                max_position_embeddings: cfg.context.max(2048),
                eos_token_id: tok.token_to_id(tokenizer::IM_END).map(Into::into),
            };
            config.save(run.root())?;
            tokenizer::save_tokenizer_config(
                &tok,
                template.source(),
                config.max_position_embeddings,
                run.root(),
            )?;
            let w = Qwen3::random_weights(&config, cfg.seed)?;
            let model = Qwen3::from_weights(&config, w, dtype, device, true)?;
            (tok, template, model)
        }
        (None, Some(dir)) => {
            let config = Qwen3Config::from_file(dir.join("config.json"))?;
            let w = weights::load_dir(dir, device)?;
            let model = Qwen3::from_weights(&config, w, dtype, device, cfg.lora.is_none())?;
            let tok = tokenizer::load(dir.join("tokenizer.json"))?;
            let template = ChatTemplate::for_model_dir(dir)?;
            (tok, template, model)
        }
        (None, None) => anyhow::bail!("config has neither `tiny` nor `model`"),
    };
    if let Some(l) = &cfg.lora {
        let n = model.add_lora(l, cfg.seed)?;
        anyhow::ensure!(
            n > 0,
            "no module matches lora.target_modules {:?}",
            l.target_modules
        );
    }
    let pad = tok
        .token_to_id(tokenizer::END_OF_TEXT)
        .or_else(|| tok.token_to_id(tokenizer::IM_END))
        .unwrap_or(0);
    let mut enc = Vec::new();
    let mut truncated = 0;
    let sequences = chats
        .iter()
        .map(|c| template.encode_turns(&tok, c))
        .collect::<Result<Vec<_>>>()?;
    let n_sequences: usize = sequences.iter().map(Vec::len).sum();
    for mut e in sequences.into_iter().flatten() {
        if e.ids.len() > cfg.context {
            let cut = e.ids.len() - cfg.context;
            e.ids.drain(..cut);
            e.mask.drain(..cut);
            truncated += 1;
        }
        // The first token is never a target.
        if e.mask.iter().skip(1).any(|&m| m) {
            enc.push(e);
        }
    }
    run.log(&format!(
        "{} samples ({} left-truncated to {} tokens, {} without assistant tokens dropped); {} parameters, {} trainable",
        enc.len(),
        truncated,
        cfg.context,
        n_sequences - enc.len(),
        model.config.num_params(),
        model.trainable_vars().iter().map(|(_, v)| v.elem_count()).sum::<usize>()
    ))?;
    anyhow::ensure!(
        !enc.is_empty(),
        "no sample has assistant tokens to train on"
    );
    Ok(Prepared {
        model,
        samples: enc,
        pad,
    })
}

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

/// Loss terms of one micro-batch: summed negative log-likelihood of its assistant
/// tokens (a scalar tensor), the number of such tokens and of all tokens.
pub fn micro_batch_nll(
    model: &Qwen3,
    batch: &[&Encoded],
    pad: u32,
) -> Result<(Tensor, usize, usize)> {
    let dev = model.device();
    let len = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0);
    anyhow::ensure!(len >= 2, "samples need at least two tokens");
    // Inputs, and the flat positions with a loss (assistant tokens) and their targets.
    let (mut inp, mut rows, mut targets) = (Vec::new(), Vec::new(), Vec::new());
    let mut n_tokens = 0;
    for e in batch {
        n_tokens += e.ids.len();
        for i in 0..len - 1 {
            inp.push(e.ids.get(i).copied().unwrap_or(pad));
            if let Some(&t) = e.ids.get(i + 1)
                && e.mask.get(i + 1).copied().unwrap_or(false)
            {
                rows.push(inp.len() as u32 - 1);
                targets.push(t);
            }
        }
    }
    let (b, n) = (batch.len(), batch.len() * (len - 1));
    let inp = Tensor::from_vec(inp, (b, len - 1), dev)?;
    let hidden = model.forward_hidden(&inp, 0, None)?;
    let hidden = hidden.reshape((n, hidden.dim(D::Minus1)?))?;
    // The LM head and softmax run only where there is a loss: the assistant tokens,
    // a small part of a web-agent sample (long observation, short action).
    let n_target = rows.len();
    if rows.is_empty() {
        return Ok(((hidden.sum_all()? * 0.0)?, 0, n_tokens));
    }
    let idx = Tensor::from_vec(rows, n_target, dev)?;
    // Log-probabilities in f32 at least (bf16 logits lose too much).
    let logits = at_least_f32(&model.logits(&hidden.index_select(&idx, 0)?)?)?;
    let nll = fused::target_log_probs(&logits, &targets)?
        .sum_all()?
        .neg()?;
    Ok((nll, n_target, n_tokens))
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
    model: &Qwen3,
    opt: &AdamW,
    step: u64,
) -> Result<PathBuf> {
    write_checkpoint(run, step, |dir| {
        save_trainable_and_optimizer(dir, model, opt)?;
        match (&cfg.lora, &cfg.model) {
            (Some(l), Some(base)) => {
                let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.clone());
                peft::export(model, l, &base.to_string_lossy(), &dir.join("adapter"))?;
            }
            _ => {
                // A tiny (fully trained) model: the folder is a loadable HF model.
                model.config.save(dir)?;
                weights::save_file(&model.base_weights(), &dir.join("model.safetensors"))?;
                tokenizer::copy_files(run.root(), dir)?;
            }
        }
        let st = TrainerState {
            step,
            optimizer_t: opt.t,
            samples_seen: step * cfg.effective_batch() as u64,
        };
        crate::trajectory::jsonl::write_atomic(
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
    crate::train::cpu_tuning::keep_tensor_memory();
    if !resume {
        run.ensure_new()?;
    }
    let result = train_inner(cfg, run, resume, stop, on_step);
    if let Err(e) = &result {
        run.record_failure(e, &[]);
    }
    result
}

fn train_inner(
    cfg: &SftConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&StepReport),
) -> Result<Outcome> {
    let device = parse_device(&cfg.device)?;
    if !resume {
        run.write_config(&toml::to_string_pretty(cfg)?)?;
    }
    run.set_status(RunState::Running, 0, "preparing")?;
    let Prepared {
        mut model,
        samples,
        pad,
    } = prepare(cfg, run, &device)?;
    let n = samples.len();
    let eff = cfg.effective_batch();
    let mut total = (n * cfg.epochs).div_ceil(eff) as u64;
    if cfg.max_steps > 0 {
        total = total.min(cfg.max_steps as u64);
    }
    let warmup = warmup_steps(cfg.warmup_ratio, total as usize);
    let mut opt = AdamW::new(
        model.trainable_vars(),
        AdamWConfig {
            lr: cfg.lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: cfg.weight_decay,
        },
    )?;
    let mut start = 0u64;
    if resume && let Some((step, dir)) = run.latest_checkpoint() {
        let st: TrainerState = read_trainer_state(&dir)?;
        let params = weights::load_file(&dir.join("trainable.safetensors"), &device)?;
        model.load_params(&params)?;
        let ost = weights::load_file(&dir.join("optimizer.safetensors"), &device)?;
        opt.load_state(&ost, st.optimizer_t)?;
        start = step;
        run.truncate_metrics_after(step)?;
        run.log(&format!("resumed from checkpoint step {step}"))?;
    }
    run.log(&format!(
        "training {total} steps of {eff} samples ({n} samples, {} epochs) on {} in {:?}",
        cfg.epochs,
        cfg.device,
        model.dtype()
    ))?;
    let mut perms = HashMap::new();
    let vars = model.trainable_vars();
    for step in start..total {
        let t0 = Instant::now();
        let idx: Vec<usize> = (0..eff)
            .map(|k| stream_item(step as usize * eff + k, n, cfg.seed, &mut perms))
            .collect();
        let targets: usize = idx
            .iter()
            .map(|&i| samples[i].mask.iter().skip(1).filter(|&&m| m).count())
            .sum();
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let (mut loss_sum, mut tokens) = (0.0f64, 0usize);
        for (mi, chunk) in idx.chunks(cfg.micro_batch).enumerate() {
            let key = cfg.seed ^ (step << 20) ^ mi as u64;
            model.dropout_key().set(Some(key));
            let batch: Vec<&Encoded> = chunk.iter().map(|&i| &samples[i]).collect();
            let (nll, _, ntok) = micro_batch_nll(&model, &batch, pad)?;
            tokens += ntok;
            let loss = (nll / targets.max(1) as f64)?;
            loss_sum += loss.to_dtype(DType::F64)?.to_scalar::<f64>()?;
            accumulate_grads(&mut grads, &loss.backward()?, &vars)?;
        }
        model.dropout_key().set(None);
        anyhow::ensure!(
            loss_sum.is_finite(),
            "loss is not finite at step {}",
            step + 1
        );
        let grad_norm = clip_grad_norm(&mut grads, cfg.max_grad_norm)?;
        let lr = cosine_with_warmup(cfg.lr, step as usize, total as usize, warmup);
        opt.step(&grads, lr)?;
        let dt = t0.elapsed().as_secs_f64();
        let done = step + 1;
        let mut m = serde_json::Map::new();
        m.insert("sft/loss".into(), loss_sum.into());
        m.insert("sft/tokens".into(), targets.into());
        m.insert("actor/lr".into(), lr.into());
        m.insert("actor/grad_norm".into(), grad_norm.into());
        m.insert("perf/tokens_per_s".into(), (tokens as f64 / dt).into());
        m.insert("perf/step_s".into(), dt.into());
        m.insert(
            "train/epoch".into(),
            ((done as usize * eff) as f64 / n as f64).into(),
        );
        m.insert("data/order_hash".into(), order_hash(&idx).into());
        run.log_metrics(done, &m)?;
        on_step(&StepReport {
            step: done,
            total,
            loss: loss_sum,
            lr,
            tokens_per_s: tokens as f64 / dt,
        });
        let stopping = stop.load(Ordering::SeqCst);
        if done == total
            || stopping
            || (cfg.checkpoint_every > 0 && done % cfg.checkpoint_every as u64 == 0)
        {
            let dir = save_checkpoint(cfg, run, &model, &opt, done)?;
            run.log(&format!("checkpoint {}", dir.display()))?;
        }
        if stopping && done < total {
            run.set_status(
                RunState::Stopped,
                done,
                "stopped on signal after a checkpoint",
            )?;
            run.log("stopped on signal")?;
            return Ok(Outcome::Stopped);
        }
        run.set_status(
            RunState::Running,
            done,
            &format!("step {done}/{total} loss {loss_sum:.4}"),
        )?;
    }
    run.set_status(RunState::Finished, total, "finished")?;
    run.log("finished")?;
    Ok(Outcome::Finished)
}

/// Continues the run in `run_dir` from its `run.toml` and latest checkpoint.
pub fn resume(
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&StepReport),
) -> Result<Outcome> {
    let run = RunDir::open(run_dir)?;
    let cfg = SftConfig::from_toml(&run.read_config()?)
        .with_context(|| format!("{}: invalid run.toml", run_dir.join("run.toml").display()))?;
    train(&cfg, &run, true, stop, on_step)
}

#[cfg(test)]
mod tests {
    use super::compute_dtype;
    use candle_core::DType;

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
