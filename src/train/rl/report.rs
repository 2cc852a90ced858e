//! What a step writes: the metrics line (every FORMATS.md key), the groups of
//! `rollouts.jsonl`, and the readers a resumed run needs.
use super::probe::Probe;
use super::sharpening::Signals;
use super::step::{Ctx, Group, Routed};
use super::update::UpdateStats;
use crate::train::metric_keys as keys;
use crate::train::rl::groups::GateDecision;
use crate::train::run::RunDir;
use anyhow::Result;
use serde_json::{Map, Value, json};

fn mean(v: impl IntoIterator<Item = f64>) -> f64 {
    let (s, n) = v
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// How a step's sampling went: the generation batches drawn and the accepted groups
/// beyond `train_batch`.
pub(crate) struct Sampled {
    pub gen_batches: usize,
    pub surplus: usize,
}

/// A step's wall-clock seconds: in all, sampling, and the log-prob probe.
pub(crate) struct StepTimes {
    pub step_s: f64,
    pub gen_s: f64,
    pub probe_s: f64,
}

/// Every metric of the step (FORMATS.md's keys plus a few extras).
// Kept whole: one line per metric key, in FORMATS.md's order, so a key is found and
// checked against the format where it is written.
pub(crate) fn step_metrics(
    ctx: &Ctx,
    groups: &[Group],
    sampled: Sampled,
    probe: &Probe,
    upd: &UpdateStats,
    times: StepTimes,
) -> Map<String, Value> {
    let Sampled {
        gen_batches,
        surplus,
    } = sampled;
    let StepTimes {
        step_s,
        gen_s,
        probe_s,
    } = times;
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
    put(keys::ACTOR_PG_LOSS, upd.pg_loss);
    put(keys::ACTOR_KL_LOSS, upd.kl_loss);
    put(keys::ACTOR_ENTROPY, upd.entropy);
    put(keys::ACTOR_GRAD_NORM, upd.grad_norm);
    put(keys::ACTOR_LR, if upd.updates > 0 { upd.lr } else { 0.0 });
    put(keys::ACTOR_PG_CLIPFRAC, upd.clipfrac);
    put(keys::ACTOR_PG_CLIPFRAC_LOWER, upd.clipfrac_lower);
    put(keys::ACTOR_PPO_KL, upd.ppo_kl);
    put(keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL, log_ppl);
    put(keys::CRITIC_SCORE_MEAN, mean(all_r.iter().copied()));
    put(
        keys::CRITIC_SCORE_MAX,
        all_r.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    put(keys::RESPONSE_LENGTH_MEAN, mean(lens.iter().copied()));
    put(keys::TRAIN_NUM_GEN_BATCHES, gen_batches as f64);
    put(keys::TRAIN_UPDATES, upd.updates as f64);
    put(
        keys::SALVAGE_STD_GATE_REJECT_SHARE,
        count(&|g| g.gate == GateDecision::StdGate) as f64 / n,
    );
    put(
        keys::SALVAGE_COMPETENCE_GATE_REJECT_SHARE,
        count(&|g| g.gate == GateDecision::CompetenceGate) as f64 / n,
    );
    put(
        keys::SALVAGE_ACCEPTED_GROUPS,
        count(&|g| g.routed == Routed::Rl) as f64,
    );
    put(
        keys::SALVAGE_SALVAGE_GROUPS,
        count(&|g| g.routed == Routed::Salvage) as f64,
    );
    put(keys::SALVAGE_SURPLUS_GROUPS, surplus as f64);
    put(keys::SALVAGE_SAMPLED_GROUPS, groups.len() as f64);
    put(
        keys::SALVAGE_NLL,
        if lc.salvage_coef != 0.0 {
            upd.salvage_nll
        } else {
            0.0
        },
    );
    put(
        keys::SALVAGE_BEST_OF_N_REWARD,
        mean(groups.iter().map(|g| g.stats.max)),
    );
    put(
        keys::SALVAGE_WITHIN_GROUP_STD,
        mean(groups.iter().map(|g| g.stats.std)),
    );
    put(
        keys::SALVAGE_LOGPROB_CORRECT,
        Probe::mean(&probe.correct).unwrap_or(0.0),
    );
    put(
        keys::SALVAGE_LOGPROB_WRONG,
        Probe::mean(&probe.wrong).unwrap_or(0.0),
    );
    put(keys::SALVAGE_LOGPROB_GAP, probe.gap().unwrap_or(0.0));
    put(
        keys::PERF_TOKENS_PER_S,
        (gen_tokens + upd.trained_tokens as f64) / step_s.max(1e-9),
    );
    put(keys::PERF_STEP_S, step_s);
    put(keys::PERF_GEN_S, gen_s);
    // verl's timing keys, so both trainers' runs read alike.
    put(keys::TIMING_S_STEP, step_s);
    put(keys::TIMING_S_GEN, gen_s);
    put(keys::TIMING_S_PROBE, probe_s);
    put(keys::TIMING_S_REF, upd.ref_s);
    put(keys::TIMING_S_UPDATE_ACTOR, upd.update_s);
    m
}

/// Appends every sampled group of the step to `rollouts.jsonl`.
pub(crate) fn write_rollouts(run: &RunDir, ctx: &Ctx, step: u64, groups: &[Group]) -> Result<()> {
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

/// Detector inputs of the steps already logged (for a resumed run).
pub fn past_signals(run: &RunDir) -> Result<Vec<Signals>> {
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
        let wrong_seen = f(keys::SALVAGE_LOGPROB_WRONG) != 0.0;
        out.push(Signals {
            logprob_gap: if wrong_seen {
                f(keys::SALVAGE_LOGPROB_GAP)
            } else {
                f64::NAN
            },
            ppo_kl: f(keys::ACTOR_PPO_KL),
            clipfrac: f(keys::ACTOR_PG_CLIPFRAC),
            rollout_log_ppl: f(keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL),
            reward: f(keys::CRITIC_SCORE_MEAN),
        });
    }
    Ok(out)
}
