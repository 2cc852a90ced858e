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
//! 4. **Score** reference log-probs (the frozen SFT policy = the model with the RL
//!    adapter switched off) once; the old log-probs are the sampling policy's, recorded
//!    with each rollout token as it was drawn (same model, same temperature).
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

use super::checkpoint::{TrainerState, load_adapters, save_checkpoint};
use super::config::RlConfig;
use super::groups::{GateDecision, salvage_mix_for};
use super::policy::{Policy, encode_prompt, load_policy, resolve_init};
use super::probe::probe_logprobs;
use super::prompts::{self, RlPrompt};
use super::report::{Sampled, StepTimes, past_signals, step_metrics, write_rollouts};
use super::sampling::sample_and_gate;
use super::sharpening::{Monitor, Signals};
use super::step::{Ctx, Grounding, Group, Routed};
use super::update::update;
use crate::model::prefix::shared_prefix_len;
use crate::reward::RewardConfig;
use crate::train::lifecycle::{self, Outcome};
use crate::train::metric_keys as keys;
use crate::train::optim::AdamW;
use crate::train::run::{
    Alert, RunDir, RunState, load_trainable_and_optimizer, read_trainer_state, truncate_steps_after,
};
use crate::train::schedule::warmup_steps;
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

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

/// Runs (or, with `resume`, continues from the latest checkpoint) an RL run.
pub fn train(
    cfg: &RlConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
) -> Result<Outcome> {
    cfg.validate()?;
    lifecycle::run(run, cfg, resume, &mut Vec::new(), |alerts| {
        train_inner(cfg, run, resume, stop, on_step, alerts)
    })
}

/// Continues the RL run in `run_dir` from its `run.toml` and latest checkpoint.
pub fn resume(
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
) -> Result<Outcome> {
    let (run, cfg) = lifecycle::reopen(run_dir, RlConfig::from_toml)?;
    train(&cfg, &run, true, stop, on_step)
}

fn train_inner(
    cfg: &RlConfig,
    run: &RunDir,
    resume: bool,
    stop: Arc<AtomicBool>,
    on_step: &mut dyn FnMut(&RlStepReport),
    alerts: &mut Vec<Alert>,
) -> Result<Outcome> {
    // Fail fast on a wrong --init, before prompts are built.
    resolve_init(&cfg.init)?;
    let (prompts, skipped) = load_prompts(cfg, run)?;
    let policy = load_policy(cfg)?;
    let prompt_ids = encode_prompts(cfg, &policy, &prompts)?;
    log_policy(cfg, run, &policy, &prompts, skipped)?;
    let total_updates = cfg.steps * cfg.updates_per_step();
    let mut state = LoopState {
        opt: AdamW::for_training(policy.model().trainable_vars(), cfg.lr, cfg.weight_decay)?,
        monitor: Monitor::new(cfg.sharpening),
        cursor: 0,
        total_updates,
        warmup: warmup_steps(cfg.warmup_ratio, total_updates),
    };
    let start = if resume {
        state.restore(run, &policy, alerts)?
    } else {
        0
    };
    let ctx = step_context(cfg, run, &policy, &prompts, &prompt_ids)?;
    let total = cfg.steps as u64;
    run.set_total_steps(total);
    for step in start..total {
        let report = state.step(&ctx, run, step, alerts)?;
        let (done, reward_mean) = (report.step, report.reward_mean);
        on_step(&report);
        let step_done = lifecycle::StepDone {
            done,
            total,
            checkpoint_every: cfg.checkpoint_every,
            stop: &stop,
            alerts,
        };
        if let Some(out) = step_done.checkpoint(run, || {
            let st = TrainerState {
                step: done,
                optimizer_t: state.opt.t,
                cursor: state.cursor,
                alerts: alerts.clone(),
            };
            save_checkpoint(cfg, run, &policy, &state.opt, &st)
        })? {
            return Ok(out);
        }
        run.set_status_with_alerts(
            RunState::Running,
            done,
            &format!("step {done}/{total} reward {reward_mean:.3}"),
            alerts,
        )?;
    }
    lifecycle::finish(run, total, alerts)
}

/// The run's prompts and how many were skipped (the first 20 reasons go to the log);
/// an error when none is usable.
fn load_prompts(cfg: &RlConfig, run: &RunDir) -> Result<(Vec<RlPrompt>, usize)> {
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
    Ok((prompts, skipped.0.len()))
}

/// Each prompt's tokens, cut to leave room for the response within the model's
/// positions.
fn encode_prompts(cfg: &RlConfig, policy: &Policy, prompts: &[RlPrompt]) -> Result<Vec<Vec<u32>>> {
    let max_pos = policy.model().config.max_position_embeddings;
    let prompt_budget = cfg
        .max_prompt_tokens
        .min(max_pos.saturating_sub(cfg.max_new_tokens + 1))
        .max(1);
    prompts
        .iter()
        .map(|p| encode_prompt(policy, p, prompt_budget))
        .collect()
}

/// Logs what the run trains: prompts, init, mode, parameters, and whether a VL policy
/// sees screenshots.
fn log_policy(
    cfg: &RlConfig,
    run: &RunDir,
    policy: &Policy,
    prompts: &[RlPrompt],
    skipped: usize,
) -> Result<()> {
    let trainable: usize = policy
        .model()
        .trainable_vars()
        .iter()
        .map(|(_, v)| v.elem_count())
        .sum();
    run.log(&format!(
        "{} prompts ({} skipped), init {}, mode {:?}; {} parameters, {} trainable (RL LoRA r {} on {:?})",
        prompts.len(),
        skipped,
        policy.init_checkpoint.display(),
        cfg.mode,
        policy.model().config.num_params(),
        trainable,
        cfg.lora.r,
        cfg.lora.target_modules
    ))?;
    if policy.vl().is_some() {
        let seen = prompts.iter().filter(|p| p.screenshot.is_some()).count();
        run.log(&format!(
            "a Qwen3-VL policy: {seen} of {} prompts show it their screenshot (tower frozen)",
            prompts.len()
        ))?;
    }
    Ok(())
}

/// What every step shares: grounding (when asked for) and the prompts' common prefix.
fn step_context<'a>(
    cfg: &'a RlConfig,
    run: &RunDir,
    policy: &'a Policy,
    prompts: &'a [RlPrompt],
    prompt_ids: &'a [Vec<u32>],
) -> Result<Ctx<'a>> {
    let grounding = if cfg.grounded {
        run.log("rollouts decode grounded (shown indices, the instruction's values)")?;
        Some(Grounding::new(prompts)?)
    } else {
        None
    };
    let shared_prefix =
        shared_prefix_len(&prompt_ids.iter().map(Vec::as_slice).collect::<Vec<_>>());
    run.log(&format!(
        "every prompt starts with the same {shared_prefix} tokens: encoded once per step"
    ))?;
    Ok(Ctx {
        cfg,
        policy,
        prompts,
        prompt_ids,
        reward: RewardConfig::default(),
        grounding,
        shared_prefix,
    })
}

/// What the step loop carries from one step to the next.
struct LoopState {
    opt: AdamW,
    monitor: Monitor,
    /// How many prompts were drawn so far (the prompt stream's position).
    cursor: u64,
    total_updates: usize,
    warmup: usize,
}

impl LoopState {
    /// Takes the run up again from its latest checkpoint (adapters, optimizer, prompt
    /// cursor, alerts, the monitor's history) and drops what was logged after it.
    /// Returns the step to start from.
    fn restore(&mut self, run: &RunDir, policy: &Policy, alerts: &mut Vec<Alert>) -> Result<u64> {
        let Some((step, dir)) = run.latest_checkpoint() else {
            // No checkpoint yet: start over, dropping what the interrupted attempt logged.
            run.truncate_metrics_after(0)?;
            truncate_steps_after(&run.root().join("rollouts.jsonl"), 0)?;
            run.log("no checkpoint to resume from; starting from step 0")?;
            return Ok(0);
        };
        let st: TrainerState = read_trainer_state(&dir)?;
        let device = policy.model().device().clone();
        let params = load_trainable_and_optimizer(&dir, &device, &mut self.opt, st.optimizer_t)?;
        load_adapters(policy.model(), &params)?;
        self.cursor = st.cursor;
        *alerts = st.alerts;
        run.truncate_metrics_after(step)?;
        truncate_steps_after(&run.root().join("rollouts.jsonl"), step)?;
        for s in past_signals(run)? {
            self.monitor.replay(s);
        }
        run.log(&format!("resumed from checkpoint step {step}"))?;
        Ok(step)
    }

    /// One step (zero-based `step`): sample and gate, probe, update; then the metrics,
    /// the self-sharpening monitor, the rollouts and the log line.
    // Kept whole: one RL step in the module docs' order (sample and gate, probe,
    // update, metrics, the self-sharpening monitor, rollouts, log line).
    fn step(
        &mut self,
        ctx: &Ctx,
        run: &RunDir,
        step: u64,
        alerts: &mut Vec<Alert>,
    ) -> Result<RlStepReport> {
        let cfg = ctx.cfg;
        let (done, total) = (step + 1, cfg.steps as u64);
        let t0 = Instant::now();
        // 1–3: sample, gate, refill, salvage selection.
        let (mut groups, gen_batches, surplus) = sample_and_gate(ctx, &mut self.cursor)?;
        route_salvage(cfg, &mut groups);
        let gen_s = t0.elapsed().as_secs_f64();
        // Diagnostics of the sampling policy: log-prob of correct vs wrong actions.
        let t_probe = Instant::now();
        let probe = probe_logprobs(ctx, &groups)?;
        let probe_s = t_probe.elapsed().as_secs_f64();
        // 4–5: score and update.
        let upd = update(
            ctx,
            &groups,
            &mut self.opt,
            step as usize,
            self.total_updates,
            self.warmup,
        )?;
        let dt = t0.elapsed().as_secs_f64();
        let mut m = step_metrics(
            ctx,
            &groups,
            Sampled {
                gen_batches,
                surplus,
            },
            &probe,
            &upd,
            StepTimes {
                step_s: dt,
                gen_s,
                probe_s,
            },
        );
        let reward_mean = m
            .get(keys::CRITIC_SCORE_MEAN)
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let signals = Signals {
            logprob_gap: probe.gap().unwrap_or(f64::NAN),
            ppo_kl: upd.ppo_kl,
            clipfrac: upd.clipfrac,
            rollout_log_ppl: m
                .get(keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL)
                .and_then(Value::as_f64)
                .unwrap_or(f64::NAN),
            reward: reward_mean,
        };
        let (now_flagged, alert) = self.monitor.observe(done, signals);
        if let Some(a) = alert {
            run.log(&format!("ALERT step {done}: {}", a.message))?;
            alerts.push(a);
        }
        m.insert(
            keys::ALERTS_SELF_SHARPENING.into(),
            u8::from(now_flagged).into(),
        );
        write_rollouts(run, ctx, done, &groups)?;
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
        Ok(RlStepReport {
            step: done,
            total,
            reward_mean,
            accepted_groups: accepted,
            salvage_groups: salvaged,
            num_gen_batches: gen_batches,
            step_s: dt,
        })
    }
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
