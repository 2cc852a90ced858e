//! The figures of the report computed from its inputs: pass@1 of each policy with
//! its Wilson interval, per task type and per RL seed; the reflection comparison;
//! the training dynamics of each RL run.

use super::data::{Inputs, MetricsLine};
use super::stats::{Z95, mean, wilson};
use crate::eval::EvalReport;
use crate::eval::compare::compare;
use crate::recipe::layout::{BASE_EVAL, sft_run_name};
use crate::recipe::plan::Arm;
use crate::train::metric_keys as keys;
use std::collections::BTreeMap;

/// One evaluated policy (an RL variant pools its seeds' episodes).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyResult {
    /// `sft`, `sft-baseline`, or the RL variant (`salvage-ds`, `dapo+full-corpus`).
    pub name: String,
    pub successes: usize,
    pub episodes: usize,
    pub pass1: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub steps_solved: Option<f64>,
    /// The checkpoint evaluated (the first seed's for an RL variant).
    pub checkpoint: Option<String>,
    /// Task type → (successes, episodes).
    pub per_task: BTreeMap<String, (usize, usize)>,
    /// RL seed → (successes, episodes); empty for SFT.
    pub per_seed: Vec<(u64, usize, usize)>,
    /// Against the SFT policy's evaluation, episodes paired by task and seed and
    /// summed over RL seeds: (solved by SFT only, solved by this policy only). `None`
    /// for SFT itself or without an SFT evaluation.
    pub vs_sft: Option<(usize, usize)>,
}

impl PolicyResult {
    fn from_reports(
        name: &str,
        reports: &[(u64, &EvalReport)],
        checkpoint: Option<String>,
    ) -> Self {
        let mut per_task: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        let mut per_seed = Vec::new();
        let mut solved_steps = Vec::new();
        let (mut s, mut n) = (0, 0);
        for (seed, r) in reports {
            let (mut rs, mut rn) = (0, 0);
            for e in &r.episodes {
                let t = per_task.entry(e.task.clone()).or_default();
                t.1 += 1;
                rn += 1;
                if e.success {
                    t.0 += 1;
                    rs += 1;
                    solved_steps.push(e.steps as f64);
                }
            }
            per_seed.push((*seed, rs, rn));
            s += rs;
            n += rn;
        }
        PolicyResult {
            name: name.to_string(),
            successes: s,
            episodes: n,
            pass1: (n > 0).then(|| s as f64 / n as f64),
            ci: wilson(s, n, Z95),
            steps_solved: mean(&solved_steps),
            checkpoint,
            per_task,
            per_seed,
            vs_sft: None,
        }
    }

    /// pass@1 of one task type.
    pub fn task_pass1(&self, task: &str) -> Option<f64> {
        let (s, n) = self.per_task.get(task)?;
        (*n > 0).then(|| *s as f64 / *n as f64)
    }
}

/// The reflection comparison at one level.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReflectionArm {
    /// Teacher: seeds solved / seeds. Policy: pass@1 on the held-out seeds.
    pub rate: Option<f64>,
    pub solved: usize,
    pub total: usize,
    /// Teacher: mean steps of the kept success per seed. Policy: on solved episodes.
    pub steps: Option<f64>,
}

/// Mean over the first and the last quarter of a run's steps of one key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    pub first: f64,
    pub last: f64,
}

/// The keys of the training-dynamics table and figure (FORMATS.md), with labels.
pub const DYNAMICS: [(&str, &str); 11] = [
    (keys::CRITIC_SCORE_MEAN, "reward"),
    (keys::SALVAGE_STD_GATE_REJECT_SHARE, "std-gate share"),
    (
        keys::SALVAGE_COMPETENCE_GATE_REJECT_SHARE,
        "competence-gate share",
    ),
    (keys::SALVAGE_BEST_OF_N_REWARD, "best-of-n"),
    (keys::SALVAGE_WITHIN_GROUP_STD, "within-group std"),
    (keys::SALVAGE_LOGPROB_CORRECT, "log-prob correct"),
    (keys::SALVAGE_LOGPROB_WRONG, "log-prob wrong"),
    (keys::SALVAGE_LOGPROB_GAP, "log-prob gap"),
    (keys::ACTOR_PPO_KL, "KL (ppo_kl)"),
    (keys::ACTOR_PG_CLIPFRAC, "clip fraction"),
    (keys::ROLLOUT_CORR_ROLLOUT_LOG_PPL, "rollout log-ppl"),
];

/// A key's trend over a run (None when the run never logged it).
pub fn trend(metrics: &[MetricsLine], key: &str) -> Option<Trend> {
    let v: Vec<f64> = metrics
        .iter()
        .filter_map(|(_, d)| d.get(key).copied())
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    let q = v.len().div_ceil(4);
    Some(Trend {
        first: mean(&v[..q])?,
        last: mean(&v[v.len() - q..])?,
    })
}

/// Everything the report shows, computed.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub tasks: Vec<String>,
    /// First held-out seed and episodes per task type.
    pub eval_seeds: (u64, usize),
    /// The SFT policy of the reflection collection (RL starts from it).
    pub sft: PolicyResult,
    /// The SFT policy of the collection without reflection.
    pub sft_baseline: PolicyResult,
    /// The pretrained base model zero-shot (`[model]`), when evaluated.
    pub base: Option<PolicyResult>,
    /// Each RL variant, in config order.
    pub rl: Vec<PolicyResult>,
    pub teacher_with: ReflectionArm,
    pub teacher_without: ReflectionArm,
}

fn teacher_arm(inputs: &Inputs, name: &str) -> ReflectionArm {
    match inputs.collections.get(name) {
        Some(r) => ReflectionArm {
            rate: (r.seeds_total > 0).then_some(r.yield_rate),
            solved: r.seeds_solved,
            total: r.seeds_total,
            steps: r.mean_steps_kept,
        },
        None => ReflectionArm::default(),
    }
}

/// The policy level of the reflection comparison.
pub fn policy_arm(p: &PolicyResult) -> ReflectionArm {
    ReflectionArm {
        rate: p.pass1,
        solved: p.successes,
        total: p.episodes,
        steps: p.steps_solved,
    }
}

/// Computes the report's figures.
pub fn analyse(inputs: &Inputs) -> anyhow::Result<Analysis> {
    let one = |arm: Arm, name: &str| {
        let run = sft_run_name(arm);
        let reports: Vec<(u64, &EvalReport)> =
            inputs.evals.get(&run).map(|r| (0, r)).into_iter().collect();
        let mut p =
            PolicyResult::from_reports(name, &reports, inputs.checkpoints.get(&run).cloned());
        p.per_seed.clear();
        p
    };
    let sft_eval = inputs.evals.get(&sft_run_name(Arm::Reflection));
    let mut rl = Vec::new();
    for v in inputs.cfg.variants()? {
        let mut reports = Vec::new();
        let mut checkpoint = None;
        for &seed in &inputs.cfg.rl.seeds {
            let run = crate::recipe::plan::rl_run_name(&v, seed);
            if let Some(r) = inputs.evals.get(&run) {
                reports.push((seed, r));
                if checkpoint.is_none() {
                    checkpoint = inputs.checkpoints.get(&run).cloned();
                }
            }
        }
        let mut p = PolicyResult::from_reports(&v.name(), &reports, checkpoint);
        p.vs_sft = sft_eval.filter(|_| !reports.is_empty()).map(|base| {
            reports.iter().fold((0, 0), |(l, g), (_, r)| {
                let t = compare(base, r).total;
                (l + t.lost, g + t.gained)
            })
        });
        rl.push(p);
    }
    Ok(Analysis {
        tasks: inputs.cfg.task_names(),
        eval_seeds: (inputs.cfg.eval.seed_start, inputs.cfg.eval.episodes),
        sft: one(Arm::Reflection, "sft"),
        sft_baseline: one(Arm::Baseline, "sft-baseline"),
        base: inputs.evals.get(BASE_EVAL).map(|r| {
            let mut p = PolicyResult::from_reports(
                "base",
                &[(0, r)],
                inputs.checkpoints.get(BASE_EVAL).cloned(),
            );
            p.per_seed.clear();
            p.vs_sft = sft_eval.map(|s| {
                let t = compare(s, r).total;
                (t.lost, t.gained)
            });
            p
        }),
        rl,
        teacher_with: teacher_arm(inputs, "reflection"),
        teacher_without: teacher_arm(inputs, "baseline"),
    })
}
