//! The Salvage-DS step loop (ALGORITHMS.md §5) and its run folder.
//!
//! Each step:
//! 1. **Sample** generation batches of `gen_batch` prompts (a seeded stream over the
//!    prompts, a function of the number drawn so far, so a resumed run draws the same
//!    prompts), `n` rollouts each with the KV cache; parse and score each rollout with
//!    the §3 rubric against the prompt's verified target.
//! 2. **Gate** each group (mode-aware, [`super::groups::decide`]) and **refill** until
//!    `train_batch` groups are accepted or `max_gen_batches` were drawn (logged as
//!    `train/num_gen_batches`; hitting the cap trains on what was accepted, and a step
//!    with nothing to train on just logs). Accepted groups beyond `train_batch` are
//!    surplus: discarded and counted (`salvage/surplus_groups`).
//! 3. **Salvage** (salvage-ds only): of the D rejected groups keep
//!    `S = unit·⌊min(D, cap)/unit⌋`, hard and mastered in proportion; each of their
//!    rollouts becomes prompt + own reasoning + ground-truth action, NLL on the
//!    action tokens only.
//! 4. **Score** old log-probs (the sampling policy) and reference log-probs (the
//!    frozen SFT policy = the model with the RL adapter switched off) once.
//! 5. **Update** in mini-batches of `mini_batch` accepted groups (salvage groups dealt
//!    round-robin over the mini-batches): `L = agg(pg) + β·agg(kl) + λ·salvage_nll`,
//!    gradients accumulated over micro-batches exactly (each micro-batch's
//!    seq-mean-token-mean is weighted by its share of the mini-batch's sequences),
//!    gradient clipping, AdamW.
//!
//! Logged each step: every metric key of FORMATS.md (values with no data this step,
//! e.g. the loss of a step without updates, are 0 and `train/updates` says how many
//! updates ran), `alerts/self_sharpening`, and every sampled group in
//! `rollouts.jsonl`. `critic/score/*` and `response_length/mean` are over all sampled
//! rollouts of the step (not just the accepted ones, which the gates bias upwards).

use super::config::RlConfig;
use super::groups::{GateDecision, GroupStats, advantages, decide, salvage_mix_for};
use super::loss::{low_var_kl, policy_loss, salvage_nll, seq_mean_token_mean, total};
use super::prompts::{self, RlPrompt};
use super::rollout::{Rollout, RolloutConfig, sample_group};
use super::seqs::{self, TrainSeq, padded, row, token_logps};
use super::sharpening::{Detector, Signals};
use crate::action::Action;
use crate::action::parse::parse_response;
use crate::model::{ChatTemplate, LocalModelPolicy, Qwen3, parse_device, tokenizer, weights};
use crate::reward::{Decision, RewardConfig, score_against};
use crate::train::optim::{AdamW, AdamWConfig, clip_grad_norm};
use crate::train::run::{Alert, RunDir, RunState, write_checkpoint};
use crate::train::schedule::{cosine_with_warmup, warmup_steps};
use crate::train::sft::{Outcome, stream_item};
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokenizers::Tokenizer;

/// What the trainer reports after each step.
#[derive(Debug, Clone)]
pub struct RlStepReport {
    pub step: u64,
    pub total: u64,
    /// Mean reward of all rollouts sampled this step.
    pub reward_mean: f64,
    pub accepted_groups: usize,
    pub salvage_groups: usize,
    pub num_gen_batches: usize,
    pub step_s: f64,
}

/// Where a sampled group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Routed {
    Rl,
    Salvage,
    Discarded,
}

/// A sampled group with its scores and fate.
struct Group {
    prompt: usize,
    gen_batch: usize,
    rollouts: Vec<Rollout>,
    texts: Vec<String>,
    decisions: Vec<Decision>,
    actions: Vec<Option<Action>>,
    rewards: Vec<f64>,
    stats: GroupStats,
    gate: GateDecision,
    routed: Routed,
}

/// The model being trained, its tokenizer and stop tokens.
pub struct Policy {
    pub model: Qwen3,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    pub stop: Vec<u32>,
    /// The init checkpoint is a full model folder (a tiny SFT run): checkpoints then
    /// also hold the merged RL model, loadable as a model folder.
    pub full_model_init: bool,
    pub init_checkpoint: PathBuf,
}

/// The checkpoint folder `init` names: a checkpoint folder itself, or the latest
/// checkpoint of a run folder.
pub fn resolve_init(init: &Path) -> Result<PathBuf> {
    let is_ckpt = |d: &Path| {
        d.join("config.json").is_file()
            || d.join("adapter").join("adapter_config.json").is_file()
            || d.join("adapter_config.json").is_file()
    };
    // A run folder holds config.json/tokenizer.json at its root too: prefer its
    // checkpoints.
    if init.join("checkpoints").is_dir() {
        let run = RunDir::open(init)?;
        if let Some((_, dir)) = run.latest_checkpoint()
            && is_ckpt(&dir)
        {
            return Ok(dir);
        }
    } else if is_ckpt(init) {
        return Ok(init.to_path_buf());
    }
    anyhow::bail!(
        "--init {}: neither an SFT run folder with a complete checkpoint nor a checkpoint folder (config.json or adapter/)",
        init.display()
    )
}

/// Loads the SFT policy of `cfg.init` and attaches the fresh RL adapter.
pub fn load_policy(cfg: &RlConfig) -> Result<Policy> {
    let device = parse_device(&cfg.device)?;
    let ckpt = resolve_init(&cfg.init)?;
    let p = LocalModelPolicy::from_checkpoint(&ckpt, &device)
        .with_context(|| format!("loading the SFT policy from {}", ckpt.display()))?;
    let mut model = p.model;
    let n = model.add_lora(&cfg.lora, cfg.seed)?;
    anyhow::ensure!(
        n > 0,
        "field `lora.target_modules`: no module matches {:?}",
        cfg.lora.target_modules
    );
    let stop: Vec<u32> = [tokenizer::IM_END, tokenizer::END_OF_TEXT]
        .iter()
        .filter_map(|t| p.tokenizer.token_to_id(t))
        .collect();
    anyhow::ensure!(
        !stop.is_empty(),
        "the tokenizer has neither `<|im_end|>` nor `<|endoftext|>`"
    );
    Ok(Policy {
        model,
        tokenizer: p.tokenizer,
        template: p.template,
        stop,
        full_model_init: ckpt.join("config.json").is_file(),
        init_checkpoint: ckpt,
    })
}

/// Prompt token ids (the chat template's generation prompt), keeping the last
/// `max_tokens` of a longer one.
pub fn encode_prompt(policy: &Policy, p: &RlPrompt, max_tokens: usize) -> Result<Vec<u32>> {
    let mut ids = policy
        .template
        .encode_prompt(&policy.tokenizer, &p.messages)
        .with_context(|| format!("prompt `{}`", p.id))?;
    if ids.len() > max_tokens {
        ids.drain(..ids.len() - max_tokens);
    }
    Ok(ids)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TrainerState {
    step: u64,
    optimizer_t: u64,
    /// Prompts drawn from the stream so far.
    cursor: u64,
    #[serde(default)]
    alerts: Vec<Alert>,
}

/// Runs (or, with `resume`, continues from the latest checkpoint) an RL run.
pub fn train(
    cfg: &RlConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
) -> Result<Outcome> {
    if !resume {
        anyhow::ensure!(
            !run.root().join("run.toml").exists(),
            "{} already holds a run; continue it with `rmsweb train resume {}` or choose another --run-dir",
            run.root().display(),
            run.root().display()
        );
    }
    cfg.validate()?;
    let mut alerts = Vec::new();
    let result = train_inner(cfg, run, resume, stop, on_step, &mut alerts);
    if let Err(e) = &result {
        let _ = run.log(&format!("failed: {e:#}"));
        let step = run.latest_checkpoint().map_or(0, |(s, _)| s);
        let _ = run.set_status_with_alerts(RunState::Failed, step, &format!("{e:#}"), &alerts);
    }
    result
}

/// Continues the RL run in `run_dir` from its `run.toml` and latest checkpoint.
pub fn resume(
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
) -> Result<Outcome> {
    let run = RunDir::open(run_dir)?;
    let cfg = RlConfig::from_toml(&run.read_config()?)
        .with_context(|| format!("{}: invalid run.toml", run_dir.join("run.toml").display()))?;
    train(&cfg, &run, true, stop, on_step)
}

/// Per-step state shared by the phases.
struct Ctx<'a> {
    cfg: &'a RlConfig,
    policy: &'a Policy,
    prompts: &'a [RlPrompt],
    prompt_ids: &'a [Vec<u32>],
    reward: RewardConfig,
}

fn train_inner(
    cfg: &RlConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
    alerts: &mut Vec<Alert>,
) -> Result<Outcome> {
    if !resume {
        run.write_config(&toml::to_string_pretty(cfg)?)?;
    }
    run.set_status(RunState::Running, 0, "preparing")?;
    // Fail fast on a wrong --init, before prompts are built.
    resolve_init(&cfg.init)?;
    let ds = Dataset::open(&cfg.dataset)
        .with_context(|| format!("opening dataset {}", cfg.dataset.display()))?;
    let (prompts, skipped) = prompts::load(&ds, cfg.prompts)?;
    for (id, why) in skipped.0.iter().take(20) {
        run.log(&format!("prompt `{id}` skipped: {why}"))?;
    }
    anyhow::ensure!(
        !prompts.is_empty(),
        "{}: no usable {:?} prompts ({} skipped)",
        cfg.dataset.display(),
        cfg.prompts,
        skipped.0.len()
    );
    let policy = load_policy(cfg)?;
    let prompt_ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| encode_prompt(&policy, p, cfg.max_prompt_tokens))
        .collect::<Result<_>>()?;
    let trainable: usize = policy
        .model
        .trainable_vars()
        .iter()
        .map(|(_, v)| v.elem_count())
        .sum();
    run.log(&format!(
        "{} prompts ({} skipped), init {}, mode {:?}; {} parameters, {} trainable (RL LoRA r {} on {:?})",
        prompts.len(),
        skipped.0.len(),
        policy.init_checkpoint.display(),
        cfg.mode,
        policy.model.config.num_params(),
        trainable,
        cfg.lora.r,
        cfg.lora.target_modules
    ))?;
    let mut opt = AdamW::new(
        policy.model.trainable_vars(),
        AdamWConfig {
            lr: cfg.lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: cfg.weight_decay,
        },
    )?;
    let mut detector = Detector::new(cfg.sharpening);
    let (mut start, mut cursor) = (0u64, 0u64);
    if resume && let Some((step, dir)) = run.latest_checkpoint() {
        let st: TrainerState = serde_json::from_str(
            &std::fs::read_to_string(dir.join("trainer_state.json"))
                .with_context(|| format!("reading {}", dir.display()))?,
        )
        .with_context(|| format!("{}: invalid trainer_state.json", dir.display()))?;
        let device = policy.model.device().clone();
        let params = weights::load_file(&dir.join("trainable.safetensors"), &device)?;
        load_adapters(&policy.model, &params)?;
        let ost = weights::load_file(&dir.join("optimizer.safetensors"), &device)?;
        opt.load_state(&ost, st.optimizer_t)?;
        start = step;
        cursor = st.cursor;
        *alerts = st.alerts;
        run.truncate_metrics_after(step)?;
        truncate_jsonl_after(&run.root().join("rollouts.jsonl"), step)?;
        for s in past_signals(run)? {
            detector.push(s);
        }
        run.log(&format!("resumed from checkpoint step {step}"))?;
    }
    let ctx = Ctx {
        cfg,
        policy: &policy,
        prompts: &prompts,
        prompt_ids: &prompt_ids,
        reward: RewardConfig::default(),
    };
    let total = cfg.steps as u64;
    let total_updates = cfg.steps * cfg.updates_per_step();
    let warmup = warmup_steps(cfg.warmup_ratio, total_updates);
    let mut flagged = detector.flagged();
    for step in start..total {
        let done = step + 1;
        let t0 = Instant::now();
        // 1–3: sample, gate, refill, salvage selection.
        let (mut groups, gen_batches, surplus) = sample_and_gate(&ctx, &mut cursor)?;
        route_salvage(cfg, &mut groups);
        let gen_s = t0.elapsed().as_secs_f64();
        // Diagnostics of the sampling policy: log-prob of correct vs wrong actions.
        let probe = probe_logprobs(&ctx, &groups)?;
        // 4–5: score and update.
        let upd = update(
            &ctx,
            &groups,
            &mut opt,
            step as usize,
            total_updates,
            warmup,
        )?;
        let dt = t0.elapsed().as_secs_f64();
        let m = step_metrics(&ctx, &groups, gen_batches, surplus, &probe, &upd, dt, gen_s);
        let reward_mean = m
            .get("critic/score/mean")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let signals = Signals {
            logprob_gap: probe.gap().unwrap_or(f64::NAN),
            ppo_kl: upd.ppo_kl,
            clipfrac: upd.clipfrac,
            rollout_log_ppl: m
                .get("rollout_corr/rollout_log_ppl")
                .and_then(Value::as_f64)
                .unwrap_or(f64::NAN),
            reward: reward_mean,
        };
        let now_flagged = detector.push(signals);
        if now_flagged && !flagged {
            let msg = format!("self-sharpening suspected {}", detector.describe());
            run.log(&format!("ALERT step {done}: {msg}"))?;
            alerts.push(Alert {
                kind: "self_sharpening".into(),
                step: done,
                message: msg,
            });
        }
        flagged = now_flagged;
        let mut m = m;
        m.insert(
            "alerts/self_sharpening".into(),
            u8::from(now_flagged).into(),
        );
        write_rollouts(run, &ctx, done, &groups)?;
        run.log_metrics(done, &m)?;
        let accepted = groups.iter().filter(|g| g.routed == Routed::Rl).count();
        let salvaged = groups
            .iter()
            .filter(|g| g.routed == Routed::Salvage)
            .count();
        run.log(&format!(
            "step {done}/{total}: reward {reward_mean:.3}, {} groups sampled in {gen_batches} generation batches, {accepted} accepted, {salvaged} salvaged, {surplus} surplus, {} updates, {dt:.1}s",
            groups.len(),
            upd.updates
        ))?;
        on_step(&RlStepReport {
            step: done,
            total,
            reward_mean,
            accepted_groups: accepted,
            salvage_groups: salvaged,
            num_gen_batches: gen_batches,
            step_s: dt,
        });
        let stopping = stop.load(Ordering::SeqCst);
        if done == total
            || stopping
            || (cfg.checkpoint_every > 0 && done % cfg.checkpoint_every as u64 == 0)
        {
            let st = TrainerState {
                step: done,
                optimizer_t: opt.t,
                cursor,
                alerts: alerts.clone(),
            };
            let dir = save_checkpoint(cfg, run, &policy, &opt, &st)?;
            run.log(&format!("checkpoint {}", dir.display()))?;
        }
        if stopping && done < total {
            run.set_status_with_alerts(
                RunState::Stopped,
                done,
                "stopped on signal after a checkpoint",
                alerts,
            )?;
            run.log("stopped on signal")?;
            return Ok(Outcome::Stopped);
        }
        run.set_status_with_alerts(
            RunState::Running,
            done,
            &format!("step {done}/{total} reward {reward_mean:.3}"),
            alerts,
        )?;
    }
    run.set_status_with_alerts(RunState::Finished, total, "finished", alerts)?;
    run.log("finished")?;
    Ok(Outcome::Finished)
}

/// Sets the RL adapter's variables from a checkpoint (Vars are shared handles, so
/// the model sees the new values).
fn load_adapters(model: &Qwen3, values: &HashMap<String, Tensor>) -> Result<()> {
    let vars: HashMap<String, candle_core::Var> = model.trainable_vars().into_iter().collect();
    for (name, t) in values {
        let v = vars
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("checkpoint has unknown adapter `{name}`"))?;
        anyhow::ensure!(
            v.dims() == t.dims(),
            "adapter `{name}`: checkpoint shape {:?}, model shape {:?}",
            t.dims(),
            v.dims()
        );
        v.set(&t.to_dtype(v.dtype())?.to_device(v.device())?)?;
    }
    Ok(())
}

/// Seed of the `k`-th prompt drawn in the run.
fn draw_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A17
}

/// Samples and gates generation batches until `train_batch` groups are accepted or
/// the cap is reached. Returns the groups (accepted ones routed `rl`, surplus and
/// rejected ones `discarded` for now), the generation batches used and the surplus.
fn sample_and_gate(ctx: &Ctx, cursor: &mut u64) -> Result<(Vec<Group>, usize, usize)> {
    let cfg = ctx.cfg;
    let gate = cfg.gate();
    let rc = RolloutConfig {
        temperature: cfg.temperature,
        top_p: cfg.top_p,
        max_new_tokens: cfg.max_new_tokens,
    };
    let mut groups = Vec::new();
    let (mut accepted, mut surplus, mut batches) = (0usize, 0usize, 0usize);
    let mut perms = HashMap::new();
    while accepted < cfg.train_batch && batches < cfg.max_gen_batches {
        for _ in 0..cfg.gen_batch {
            let k = *cursor;
            *cursor += 1;
            let pi = stream_item(k as usize, ctx.prompts.len(), cfg.seed, &mut perms);
            let p = &ctx.prompts[pi];
            let rollouts = sample_group(
                &ctx.policy.model,
                &ctx.prompt_ids[pi],
                cfg.n,
                &ctx.policy.stop,
                &rc,
                draw_seed(cfg.seed, k),
            )?;
            let mut texts = Vec::with_capacity(cfg.n);
            let mut decisions = Vec::with_capacity(cfg.n);
            let mut actions = Vec::with_capacity(cfg.n);
            for r in &rollouts {
                let text = ctx
                    .policy
                    .tokenizer
                    .decode(r.text_ids(), true)
                    .map_err(|e| anyhow::anyhow!("decoding a rollout: {e}"))?;
                actions.push(
                    parse_response(&text)
                        .ok()
                        .and_then(|p| p.actions.into_iter().next()),
                );
                decisions.push(score_against(&text, &p.targets, &p.elements, &ctx.reward));
                texts.push(text);
            }
            let rewards: Vec<f64> = decisions.iter().map(|d| d.score).collect();
            let stats = GroupStats::of(&rewards)
                .ok_or_else(|| anyhow::anyhow!("prompt `{}`: non-finite reward", p.id))?;
            let gate_decision = decide(&stats, &gate);
            let routed = if gate_decision == GateDecision::Accepted {
                if accepted < cfg.train_batch {
                    accepted += 1;
                    Routed::Rl
                } else {
                    surplus += 1;
                    Routed::Discarded
                }
            } else {
                Routed::Discarded
            };
            groups.push(Group {
                prompt: pi,
                gen_batch: batches,
                rollouts,
                texts,
                decisions,
                actions,
                rewards,
                stats,
                gate: gate_decision,
                routed,
            });
        }
        batches += 1;
    }
    Ok((groups, batches, surplus))
}

/// Routes the retained rejected groups to salvage (salvage-ds only): the first `h`
/// competence-rejected and the first `m` std-rejected groups, in sampling order.
fn route_salvage(cfg: &RlConfig, groups: &mut [Group]) {
    if !cfg.mode.salvages() || cfg.loss().salvage_coef == 0.0 {
        return;
    }
    let idx = |d: GateDecision, groups: &[Group]| -> Vec<usize> {
        groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.gate == d)
            .map(|(i, _)| i)
            .collect()
    };
    let hard = idx(GateDecision::CompetenceGate, groups);
    let mastered = idx(GateDecision::StdGate, groups);
    let (h, m) = salvage_mix_for(
        hard.len(),
        mastered.len(),
        cfg.salvage_unit,
        cfg.salvage_cap,
    );
    for &i in hard.iter().take(h).chain(mastered.iter().take(m)) {
        groups[i].routed = Routed::Salvage;
    }
}

/// Log-probs of correct vs sampled wrong actions (per-token means, averaged over
/// probes).
#[derive(Debug, Default)]
struct Probe {
    correct: Vec<f64>,
    wrong: Vec<f64>,
}

impl Probe {
    fn mean(v: &[f64]) -> Option<f64> {
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
    fn gap(&self) -> Option<f64> {
        Some(Self::mean(&self.correct)? - Self::mean(&self.wrong)?)
    }
}

/// For up to `probe_groups` sampled groups: a wrong rollout (reward < 1 with a
/// readable action) gives the log-prob of its own action tokens, and the same
/// rollout with the ground-truth action spliced in gives the log-prob of the correct
/// action in the same context. Groups without a wrong rollout probe the correct
/// action after their first rollout's reasoning.
fn probe_logprobs(ctx: &Ctx, groups: &[Group]) -> Result<Probe> {
    let tok = &ctx.policy.tokenizer;
    let mut correct: Vec<TrainSeq> = Vec::new();
    let mut wrong: Vec<TrainSeq> = Vec::new();
    for g in groups.iter().take(ctx.cfg.probe_groups) {
        let prompt = &ctx.prompt_ids[g.prompt];
        let targets = &ctx.prompts[g.prompt].targets;
        let bad = g.texts.iter().zip(&g.rewards).find_map(|(t, &r)| {
            (r < 1.0)
                .then(|| parse_response(t).ok().map(|p| (t, p)))
                .flatten()
        });
        let base = match &bad {
            Some((t, p)) => {
                let s = seqs::span_seq(tok, prompt, t, &p.action_span)?;
                if s.masked() > 0 {
                    wrong.push(s);
                }
                t.as_str()
            }
            None => g.texts.first().map_or("", String::as_str),
        };
        let (s, _) = seqs::salvage(tok, prompt, base, targets)?;
        if s.masked() > 0 {
            correct.push(s);
        }
    }
    let mean_logps = |set: &[TrainSeq]| -> Result<Vec<f64>> {
        let mut out = Vec::new();
        for chunk in set.chunks(ctx.cfg.micro_batch) {
            let refs: Vec<&TrainSeq> = chunk.iter().collect();
            let lp = token_logps(&ctx.policy.model, &refs, ctx.cfg.temperature, false)?;
            let logp = lp.logp.detach();
            for (i, s) in chunk.iter().enumerate() {
                let v = row(&logp, i, s.resp_len())?;
                let (sum, n) = v
                    .iter()
                    .zip(&s.mask)
                    .filter(|(_, m)| **m > 0.0)
                    .fold((0.0f64, 0usize), |(a, n), (x, _)| {
                        (a + f64::from(*x), n + 1)
                    });
                if n > 0 {
                    out.push(sum / n as f64);
                }
            }
        }
        Ok(out)
    };
    Ok(Probe {
        correct: mean_logps(&correct)?,
        wrong: mean_logps(&wrong)?,
    })
}

/// Sums over the updates of a step (divided by `updates` when logged).
#[derive(Debug, Default)]
struct UpdateStats {
    updates: usize,
    pg_loss: f64,
    kl_loss: f64,
    salvage_nll: f64,
    salvage_updates: usize,
    grad_norm: f64,
    lr: f64,
    /// Token-weighted over all RL tokens of the step.
    entropy: f64,
    clipfrac: f64,
    clipfrac_lower: f64,
    ppo_kl: f64,
    rl_tokens: f64,
    trained_tokens: usize,
}

struct RlItem {
    seq: TrainSeq,
    adv: f32,
    old: Vec<f32>,
    reference: Vec<f32>,
}

/// Log-probs (detached) of every sequence, in micro-batches; `adapters` off reads
/// the reference policy.
fn score_all(ctx: &Ctx, set: &[TrainSeq], adapters: bool) -> Result<Vec<Vec<f32>>> {
    let model = &ctx.policy.model;
    model.set_adapters_enabled(adapters);
    let result = (|| {
        let mut out = Vec::with_capacity(set.len());
        for chunk in set.chunks(ctx.cfg.micro_batch) {
            let refs: Vec<&TrainSeq> = chunk.iter().collect();
            let lp = token_logps(model, &refs, ctx.cfg.temperature, false)?;
            let logp = lp.logp.detach();
            for (i, s) in chunk.iter().enumerate() {
                out.push(row(&logp, i, s.resp_len())?);
            }
        }
        Ok(out)
    })();
    model.set_adapters_enabled(true);
    result
}

fn accumulate(model: &Qwen3, loss: &Tensor, grads: &mut HashMap<String, Tensor>) -> Result<()> {
    let gs = loss.backward()?;
    for (name, var) in model.trainable_vars() {
        if let Some(g) = gs.get(var.as_tensor()) {
            let g = g.to_dtype(DType::F32)?;
            let acc = match grads.remove(&name) {
                Some(prev) => (prev + g)?,
                None => g,
            };
            grads.insert(name, acc);
        }
    }
    Ok(())
}

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar::<f64>()?)
}

/// Builds the RL and salvage sequences and runs the mini-batch updates.
fn update(
    ctx: &Ctx,
    groups: &[Group],
    opt: &mut AdamW,
    step: usize,
    total_updates: usize,
    warmup: usize,
) -> Result<UpdateStats> {
    let cfg = ctx.cfg;
    let loss_cfg = cfg.loss();
    let tok = &ctx.policy.tokenizer;
    // RL groups: each rollout with its group-relative advantage.
    let mut rl_groups: Vec<Vec<(TrainSeq, f32)>> = Vec::new();
    for g in groups.iter().filter(|g| g.routed == Routed::Rl) {
        let adv = advantages(&g.rewards, &g.stats);
        let prompt = &ctx.prompt_ids[g.prompt];
        rl_groups.push(
            g.rollouts
                .iter()
                .zip(adv)
                .filter(|(r, _)| !r.ids.is_empty())
                .map(|(r, a)| (TrainSeq::rl(prompt, &r.ids), a as f32))
                .collect(),
        );
    }
    // Salvage groups: own reasoning + ground-truth action, action-only mask.
    let mut sv_groups: Vec<Vec<TrainSeq>> = Vec::new();
    for g in groups.iter().filter(|g| g.routed == Routed::Salvage) {
        let prompt = &ctx.prompt_ids[g.prompt];
        let targets = &ctx.prompts[g.prompt].targets;
        let mut v = Vec::new();
        for t in &g.texts {
            let (s, _) = seqs::salvage(tok, prompt, t, targets)?;
            if s.masked() > 0 {
                v.push(s);
            }
        }
        sv_groups.push(v);
    }
    let mut st = UpdateStats::default();
    let updates = rl_groups
        .len()
        .div_ceil(cfg.mini_batch)
        .max(sv_groups.len().div_ceil(cfg.mini_batch));
    if updates == 0 {
        return Ok(st);
    }
    // Old (sampling policy) and reference log-probs, once, before any update.
    let flat: Vec<TrainSeq> = rl_groups
        .iter()
        .flat_map(|g| g.iter().map(|(s, _)| s.clone()))
        .collect();
    let old = score_all(ctx, &flat, true)?;
    let reference = score_all(ctx, &flat, false)?;
    let mut items = flat
        .into_iter()
        .zip(old)
        .zip(reference)
        .map(|((seq, old), reference)| (seq, old, reference));
    let rl_items: Vec<Vec<RlItem>> = rl_groups
        .iter()
        .map(|g| {
            g.iter()
                .filter_map(|(_, adv)| {
                    items.next().map(|(seq, old, reference)| RlItem {
                        seq,
                        adv: *adv,
                        old,
                        reference,
                    })
                })
                .collect()
        })
        .collect();
    let model = &ctx.policy.model;
    for u in 0..updates {
        let rl: Vec<&RlItem> = rl_items
            .iter()
            .skip(u * cfg.mini_batch)
            .take(cfg.mini_batch)
            .flatten()
            .collect();
        let sv: Vec<&TrainSeq> = sv_groups
            .iter()
            .enumerate()
            .filter(|(i, _)| i % updates == u)
            .flat_map(|(_, g)| g.iter())
            .collect();
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let (n_rl, n_sv) = (rl.len(), sv.len());
        let (mut pg_sum, mut kl_sum, mut nll_sum) = (0.0, 0.0, 0.0);
        for chunk in rl.chunks(cfg.micro_batch) {
            let seqs_: Vec<&TrainSeq> = chunk.iter().map(|x| &x.seq).collect();
            let lp = token_logps(model, &seqs_, cfg.temperature, true)?;
            let width = lp.logp.dim(1)?;
            let old = padded(
                &chunk.iter().map(|x| x.old.as_slice()).collect::<Vec<_>>(),
                width,
                &lp.logp,
            )?;
            let refp = padded(
                &chunk
                    .iter()
                    .map(|x| x.reference.as_slice())
                    .collect::<Vec<_>>(),
                width,
                &lp.logp,
            )?;
            let adv = Tensor::from_vec(
                chunk.iter().map(|x| x.adv).collect::<Vec<f32>>(),
                chunk.len(),
                lp.logp.device(),
            )?
            .to_dtype(lp.logp.dtype())?;
            let pl = policy_loss(&lp.logp, &old, &adv, &lp.mask, &loss_cfg)?;
            let w = chunk.len() as f64 / n_rl as f64;
            let pg = seq_mean_token_mean(&pl.per_token, &lp.mask)?;
            let kl = seq_mean_token_mean(&low_var_kl(&lp.logp, &refp)?, &lp.mask)?;
            let loss = total(&pg, &kl, None, &loss_cfg)?.affine(w, 0.0)?;
            pg_sum += scalar(&pg)? * w;
            kl_sum += scalar(&kl)? * w;
            let ntok: f64 = chunk.iter().map(|x| x.seq.masked() as f64).sum();
            st.clipfrac += pl.clipfrac * ntok;
            st.clipfrac_lower += pl.clipfrac_lower * ntok;
            st.ppo_kl += pl.ppo_kl * ntok;
            if let Some(e) = &lp.entropy {
                st.entropy += super::loss::token_mean(e, &lp.mask)? * ntok;
            }
            st.rl_tokens += ntok;
            st.trained_tokens += chunk.iter().map(|x| x.seq.ids.len()).sum::<usize>();
            accumulate(model, &loss, &mut grads)?;
        }
        if loss_cfg.salvage_coef != 0.0 {
            for chunk in sv.chunks(cfg.micro_batch) {
                let lp = token_logps(model, chunk, cfg.temperature, false)?;
                let w = chunk.len() as f64 / n_sv as f64;
                let nll = salvage_nll(&lp.logp, &lp.mask)?;
                nll_sum += scalar(&nll)? * w;
                st.trained_tokens += chunk.iter().map(|s| s.ids.len()).sum::<usize>();
                let loss = nll.affine(loss_cfg.salvage_coef * w, 0.0)?;
                accumulate(model, &loss, &mut grads)?;
            }
        }
        anyhow::ensure!(
            pg_sum.is_finite() && kl_sum.is_finite() && nll_sum.is_finite(),
            "loss is not finite at step {}",
            step + 1
        );
        if grads.is_empty() {
            continue;
        }
        let grad_norm = clip_grad_norm(&mut grads, cfg.max_grad_norm)?;
        let k = step * cfg.updates_per_step() + u;
        let lr = match cfg.lr_schedule.as_str() {
            "cosine" => cosine_with_warmup(cfg.lr, k, total_updates, warmup),
            _ => cfg.lr,
        };
        opt.step(&grads, lr)?;
        st.updates += 1;
        st.pg_loss += pg_sum;
        st.kl_loss += kl_sum;
        if n_sv > 0 && loss_cfg.salvage_coef != 0.0 {
            st.salvage_nll += nll_sum;
            st.salvage_updates += 1;
        }
        st.grad_norm += grad_norm;
        st.lr = lr;
    }
    let u = st.updates.max(1) as f64;
    st.pg_loss /= u;
    st.kl_loss /= u;
    st.grad_norm /= u;
    st.salvage_nll /= st.salvage_updates.max(1) as f64;
    let t = st.rl_tokens.max(1.0);
    st.entropy /= t;
    st.clipfrac /= t;
    st.clipfrac_lower /= t;
    st.ppo_kl /= t;
    Ok(st)
}

fn mean(v: impl IntoIterator<Item = f64>) -> f64 {
    let (s, n) = v
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// Every metric of the step (FORMATS.md's keys plus a few extras).
#[allow(clippy::too_many_arguments)]
fn step_metrics(
    ctx: &Ctx,
    groups: &[Group],
    gen_batches: usize,
    surplus: usize,
    probe: &Probe,
    upd: &UpdateStats,
    step_s: f64,
    gen_s: f64,
) -> Map<String, Value> {
    let all_r: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.rewards.iter().copied())
        .collect();
    let lens: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.rollouts.iter().map(|r| r.ids.len() as f64))
        .collect();
    let log_ppl = mean(groups.iter().flat_map(|g| {
        g.rollouts
            .iter()
            .filter(|r| !r.logps.is_empty())
            .map(|r| -r.logps.iter().map(|&x| f64::from(x)).sum::<f64>() / r.logps.len() as f64)
    }));
    let n = groups.len().max(1) as f64;
    let count = |f: &dyn Fn(&Group) -> bool| groups.iter().filter(|g| f(g)).count();
    let gen_tokens: f64 = lens.iter().sum();
    let lc = ctx.cfg.loss();
    let mut m = Map::new();
    let mut put = |k: &str, v: f64| {
        m.insert(k.to_string(), json!(if v.is_finite() { v } else { 0.0 }));
    };
    put("actor/pg_loss", upd.pg_loss);
    put("actor/kl_loss", upd.kl_loss);
    put("actor/entropy", upd.entropy);
    put("actor/grad_norm", upd.grad_norm);
    put("actor/lr", if upd.updates > 0 { upd.lr } else { 0.0 });
    put("actor/pg_clipfrac", upd.clipfrac);
    put("actor/pg_clipfrac_lower", upd.clipfrac_lower);
    put("actor/ppo_kl", upd.ppo_kl);
    put("rollout_corr/rollout_log_ppl", log_ppl);
    put("critic/score/mean", mean(all_r.iter().copied()));
    put(
        "critic/score/max",
        all_r.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    put("response_length/mean", mean(lens.iter().copied()));
    put("train/num_gen_batches", gen_batches as f64);
    put("train/updates", upd.updates as f64);
    put(
        "salvage/std_gate_reject_share",
        count(&|g| g.gate == GateDecision::StdGate) as f64 / n,
    );
    put(
        "salvage/competence_gate_reject_share",
        count(&|g| g.gate == GateDecision::CompetenceGate) as f64 / n,
    );
    put(
        "salvage/accepted_groups",
        count(&|g| g.routed == Routed::Rl) as f64,
    );
    put(
        "salvage/salvage_groups",
        count(&|g| g.routed == Routed::Salvage) as f64,
    );
    put("salvage/surplus_groups", surplus as f64);
    put("salvage/sampled_groups", groups.len() as f64);
    put(
        "salvage/nll",
        if lc.salvage_coef != 0.0 {
            upd.salvage_nll
        } else {
            0.0
        },
    );
    put(
        "salvage/best_of_n_reward",
        mean(groups.iter().map(|g| g.stats.max)),
    );
    put(
        "salvage/within_group_std",
        mean(groups.iter().map(|g| g.stats.std)),
    );
    put(
        "salvage/logprob_correct",
        Probe::mean(&probe.correct).unwrap_or(0.0),
    );
    put(
        "salvage/logprob_wrong",
        Probe::mean(&probe.wrong).unwrap_or(0.0),
    );
    put("salvage/logprob_gap", probe.gap().unwrap_or(0.0));
    put(
        "perf/tokens_per_s",
        (gen_tokens + upd.trained_tokens as f64) / step_s.max(1e-9),
    );
    put("perf/step_s", step_s);
    put("perf/gen_s", gen_s);
    m
}

/// Appends every sampled group of the step to `rollouts.jsonl`.
fn write_rollouts(run: &RunDir, ctx: &Ctx, step: u64, groups: &[Group]) -> Result<()> {
    let records: Vec<Value> = groups
        .iter()
        .map(|g| {
            let samples: Vec<Value> = (0..g.texts.len())
                .map(|i| {
                    json!({
                        "text": g.texts[i],
                        "action": g.actions[i],
                        "reward": g.rewards[i],
                        "rule": g.decisions[i].rule,
                    })
                })
                .collect();
            json!({
                "step": step,
                "prompt_id": ctx.prompts[g.prompt].id,
                "gen_batch": g.gen_batch,
                "samples": samples,
                "gate": g.gate,
                "routed": g.routed,
                "mean": g.stats.mean,
                "std": g.stats.std,
            })
        })
        .collect();
    crate::trajectory::jsonl::append(&run.root().join("rollouts.jsonl"), &records)?;
    Ok(())
}

/// Drops lines of a `{"step": N, ...}` JSONL file after `step` (and a torn tail).
fn truncate_jsonl_after(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let mut keep = String::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            break;
        };
        if v.get("step")
            .and_then(Value::as_u64)
            .is_some_and(|s| s <= step)
        {
            keep.push_str(line);
            keep.push('\n');
        }
    }
    crate::trajectory::jsonl::write_atomic(path, keep.as_bytes())
}

/// Detector inputs of the steps already logged (for a resumed run).
fn past_signals(run: &RunDir) -> Result<Vec<Signals>> {
    let Ok(text) = std::fs::read_to_string(run.root().join("metrics.jsonl")) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let d = &v["data"];
        let f = |k: &str| d.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        let wrong_seen = f("salvage/logprob_wrong") != 0.0;
        out.push(Signals {
            logprob_gap: if wrong_seen {
                f("salvage/logprob_gap")
            } else {
                f64::NAN
            },
            ppo_kl: f("actor/ppo_kl"),
            clipfrac: f("actor/pg_clipfrac"),
            rollout_log_ppl: f("rollout_corr/rollout_log_ppl"),
            reward: f("critic/score/mean"),
        });
    }
    Ok(out)
}

/// The base weights with every adapter folded in (`W + scale·B·A`), by HF name.
fn merged_weights(model: &Qwen3, scale: f64) -> Result<HashMap<String, Tensor>> {
    let params: HashMap<String, Tensor> = model
        .named_params()
        .into_iter()
        .map(|(n, p)| (n, p.tensor().clone()))
        .collect();
    let mut out = HashMap::new();
    for (name, t) in &params {
        if name.contains(".lora_") {
            continue;
        }
        let stem = name.trim_end_matches(".weight");
        let merged = match (
            params.get(&format!("{stem}.lora_A.weight")),
            params.get(&format!("{stem}.lora_B.weight")),
        ) {
            (Some(a), Some(b)) => {
                let delta = (b.matmul(a)? * scale)?.to_dtype(t.dtype())?;
                (t + delta)?
            }
            _ => t.clone(),
        };
        out.insert(name.clone(), merged);
    }
    Ok(out)
}

fn save_checkpoint(
    cfg: &RlConfig,
    run: &RunDir,
    policy: &Policy,
    opt: &AdamW,
    st: &TrainerState,
) -> Result<PathBuf> {
    let model = &policy.model;
    write_checkpoint(run, st.step, |dir| {
        let trainable: HashMap<String, Tensor> = model
            .trainable_vars()
            .into_iter()
            .map(|(n, v)| (n, v.as_tensor().clone()))
            .collect();
        weights::save_file(&trainable, &dir.join("trainable.safetensors"))?;
        weights::save_file(&opt.state_tensors(), &dir.join("optimizer.safetensors"))?;
        let init = std::fs::canonicalize(&policy.init_checkpoint)
            .unwrap_or_else(|_| policy.init_checkpoint.clone());
        // The RL adapter alone, on top of the SFT checkpoint it was trained from.
        crate::model::peft::export(
            model,
            &cfg.lora,
            &init.to_string_lossy(),
            &dir.join("adapter"),
        )?;
        if policy.full_model_init {
            // A loadable model folder holding the RL policy (tiny models).
            model.config.save(dir)?;
            weights::save_file(
                &merged_weights(model, cfg.lora.scale())?,
                &dir.join("model.safetensors"),
            )?;
            let tok = policy.init_checkpoint.join("tokenizer.json");
            if tok.exists() {
                std::fs::copy(&tok, dir.join("tokenizer.json"))?;
            }
            let tc = policy.init_checkpoint.join("tokenizer_config.json");
            if tc.exists() {
                std::fs::copy(&tc, dir.join("tokenizer_config.json"))?;
            }
        }
        crate::trajectory::jsonl::write_atomic(
            &dir.join("trainer_state.json"),
            serde_json::to_string_pretty(st)?.as_bytes(),
        )
    })
}
