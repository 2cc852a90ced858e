//! Evaluation harness: runs a [`Policy`] on live MiniWoB++ episodes in a real
//! browser, takes the outcome from the page's own reward, and reports pass@1 (mean
//! over episodes), pass@k and mean steps on solved episodes. With k > 1 each task
//! instance (task and seed) gets k attempts, the policy re-seeded for each (as a
//! collection retry is, [`AttemptSeeded`]); pass@k is the share of instances one of
//! whose k attempts succeeded (the unbiased estimator with n = k per instance).
//! Every episode can be saved as a trajectory, with its screenshots, into a dataset
//! so it can be browsed and mined.
//!
//! [`AttemptSeeded`]: crate::policy::attempt::AttemptSeeded

pub mod compare;
mod episode;
pub mod episode_env;
pub mod judged;
pub mod parallel;
pub mod stop;

pub use episode::{EpisodeOptions, ScreenshotSink, miniwob_task, run_episode};
pub use episode_env::EpisodeEnv;

use crate::env::is_browser_gone;
use crate::policy::Policy;
use crate::trajectory::Dataset;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

/// The `source` of trajectories written by the evaluation.
pub const EVAL_SOURCE: &str = "rmsweb-eval";

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// Task names (`click-button` or `miniwob:click-button`).
    pub tasks: Vec<String>,
    /// Task instances per task (seeds `seed`, `seed + 1`, ...).
    pub episodes: usize,
    /// The k of pass@k: attempts per instance (at least 1).
    pub k: usize,
    pub seed: u64,
    pub max_steps: usize,
    /// Reflection text given to every attempt, if any.
    pub reflection: Option<String>,
    /// Judges the episodes whose pages do not score themselves (live-web tasks);
    /// their verdicts go to the dataset, which must then be given.
    pub judge: Option<judged::JudgeHandle>,
}

/// One finished episode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EpisodeRecord {
    pub task: String,
    pub seed: u64,
    /// The attempt at this instance, 1..=k (1 in results written before attempts).
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    pub instruction: String,
    pub success: bool,
    /// The page's raw reward (`WOB_RAW_REWARD_GLOBAL`), 0 when the page never finished.
    pub reward: f64,
    pub steps: usize,
    pub reason: String,
    pub trajectory_id: String,
    pub seconds: f64,
}

fn first_attempt() -> u32 {
    1
}

/// Per-task figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskSummary {
    pub task: String,
    /// Episodes run (instances × attempts).
    pub episodes: usize,
    pub successes: usize,
    pub pass_at_1: f64,
    /// Mean over the task's instances (seeds) with at least k attempts of the
    /// unbiased pass@k estimator; `None` when no instance has k attempts.
    pub pass_at_k: Option<f64>,
    pub mean_steps_solved: Option<f64>,
    pub mean_reward: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EvalReport {
    pub policy: String,
    pub k: usize,
    pub seed: u64,
    pub max_steps: usize,
    pub episodes_total: usize,
    /// Mean success over all episodes.
    pub pass_at_1: f64,
    /// Mean over tasks of their pass@k (tasks with an instance of k attempts).
    pub pass_at_k: Option<f64>,
    pub mean_steps_solved: Option<f64>,
    pub elapsed_s: f64,
    pub episodes_per_minute: f64,
    pub tasks: Vec<TaskSummary>,
    pub episodes: Vec<EpisodeRecord>,
    /// Why the evaluation ended before its last episode (a stop asked for, the
    /// browser gone); absent when it ran to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
}

/// The unbiased pass@k estimator for `c` successes among `n` samples:
/// `1 - C(n-c, k) / C(n, k)`; `None` when `k` is 0 or larger than `n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let mut fail = 1.0;
    for i in (n - c + 1)..=n {
        fail *= 1.0 - k as f64 / i as f64;
    }
    Some(1.0 - fail)
}

/// Aggregates episodes into per-task and overall figures.
pub fn summarize(
    policy: &str,
    cfg: &EvalConfig,
    episodes: Vec<EpisodeRecord>,
    elapsed_s: f64,
) -> EvalReport {
    let mut names: Vec<String> = Vec::new();
    for e in &episodes {
        if !names.contains(&e.task) {
            names.push(e.task.clone());
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let tasks: Vec<TaskSummary> = names
        .iter()
        .map(|t| {
            let eps: Vec<&EpisodeRecord> = episodes.iter().filter(|e| &e.task == t).collect();
            let n = eps.len();
            let c = eps.iter().filter(|e| e.success).count();
            let solved: Vec<f64> = eps
                .iter()
                .filter(|e| e.success)
                .map(|e| e.steps as f64)
                .collect();
            let rewards: Vec<f64> = eps.iter().map(|e| e.reward).collect();
            let mut instances: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
            for e in &eps {
                let (tried, ok) = instances.entry(e.seed).or_default();
                *tried += 1;
                *ok += usize::from(e.success);
            }
            let ks: Vec<f64> = instances
                .values()
                .filter_map(|&(tried, ok)| pass_at_k(tried, ok, cfg.k))
                .collect();
            TaskSummary {
                task: t.clone(),
                episodes: n,
                successes: c,
                pass_at_1: c as f64 / n.max(1) as f64,
                pass_at_k: mean(&ks),
                mean_steps_solved: mean(&solved),
                mean_reward: mean(&rewards).unwrap_or(0.0),
            }
        })
        .collect();
    let total = episodes.len();
    let successes = episodes.iter().filter(|e| e.success).count();
    let solved: Vec<f64> = episodes
        .iter()
        .filter(|e| e.success)
        .map(|e| e.steps as f64)
        .collect();
    let ks: Vec<f64> = tasks.iter().filter_map(|t| t.pass_at_k).collect();
    EvalReport {
        policy: policy.to_string(),
        k: cfg.k,
        seed: cfg.seed,
        max_steps: cfg.max_steps,
        episodes_total: total,
        pass_at_1: successes as f64 / total.max(1) as f64,
        pass_at_k: mean(&ks),
        mean_steps_solved: mean(&solved),
        elapsed_s,
        episodes_per_minute: if elapsed_s > 0.0 {
            total as f64 * 60.0 / elapsed_s
        } else {
            0.0
        },
        tasks,
        episodes,
        cut_short: None,
    }
}

/// The task ids a dataset already holds and where episode screenshots go (none
/// without a dataset, and then the environment skips taking them).
pub fn prepare_dataset(
    env: &mut dyn EpisodeEnv,
    dataset: Option<&Dataset>,
) -> Result<(BTreeSet<String>, Option<ScreenshotSink>)> {
    let known = match dataset {
        Some(ds) => ds
            .tasks()
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .into_iter()
            .map(|t| t.task_id)
            .collect(),
        None => BTreeSet::new(),
    };
    let sink = dataset.map(|d| ScreenshotSink {
        root: d.root().to_path_buf(),
    });
    env.set_screenshots(sink.is_some());
    Ok((known, sink))
}

/// A run id unique enough for trajectory ids: `eval-<UTC time>-<pid>`.
pub fn new_run_id() -> String {
    format!(
        "eval-{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S"),
        std::process::id()
    )
}

/// Runs every (task, seed, attempt) and aggregates. With a dataset, each episode is
/// appended as it finishes (its task too, once), screenshots included.
/// `on_episode` is called after each episode (for progress display). A stop asked
/// for or a browser gone ends it with an error carrying [`stop::CutShort`]: the
/// report of the episodes done before.
pub fn evaluate(
    env: &mut dyn EpisodeEnv,
    policy: &mut dyn Policy,
    cfg: &EvalConfig,
    mut dataset: Option<&mut Dataset>,
    on_episode: &mut dyn FnMut(&EpisodeRecord),
) -> Result<EvalReport> {
    let run_id = new_run_id();
    let (mut known, sink) = prepare_dataset(env, dataset.as_deref())?;
    let started = Instant::now();
    let mut records = Vec::new();
    for p in &parallel::plan(cfg, &run_id) {
        let (t, mut traj, mut rec) = match parallel::play(env, policy, p, cfg, sink.as_ref()) {
            Ok(done) => done,
            Err(e) => {
                let elapsed = started.elapsed().as_secs_f64();
                return Err(cut_short(e, &policy.name(), cfg, records, elapsed));
            }
        };
        parallel::judge(cfg, dataset.as_deref(), &t, &mut traj, &mut rec)?;
        parallel::record(dataset.as_deref_mut(), &mut known, &t, &traj)?;
        on_episode(&rec);
        records.push(rec);
    }
    Ok(summarize(
        &policy.name(),
        cfg,
        records,
        started.elapsed().as_secs_f64(),
    ))
}

/// An episode's error `e` as an evaluation returns it: when a stop or a browser
/// gone ended it, with the report of the episodes done before ([`stop::CutShort`],
/// its `cut_short` saying why).
pub(crate) fn cut_short(
    e: anyhow::Error,
    policy: &str,
    cfg: &EvalConfig,
    records: Vec<EpisodeRecord>,
    elapsed_s: f64,
) -> anyhow::Error {
    let e = stop::blame_stop(e);
    if !stop::is_interrupted(&e) && !is_browser_gone(&e) {
        return e;
    }
    let mut report = summarize(policy, cfg, records, elapsed_s);
    report.cut_short = Some(format!("{e:#}"));
    e.context(stop::CutShort(Box::new(report)))
}

/// Writes the report as pretty JSON (atomically).
pub fn write_report(path: &Path, report: &EvalReport) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    crate::util::fs::write_atomic(path, text.as_bytes())
}

/// The per-task table as text (sanitized task names).
pub fn table(report: &EvalReport) -> String {
    let mut s = format!(
        "{:<28} {:>5} {:>7} {:>7} {:>9} {:>8}\n",
        "task",
        "n",
        "pass@1",
        format!("pass@{}", report.k),
        "steps/ok",
        "reward"
    );
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    for t in &report.tasks {
        s.push_str(&format!(
            "{:<28} {:>5} {:>7.2} {:>7} {:>9} {:>8.2}\n",
            crate::util::sanitize::clean_line(&t.task),
            t.episodes,
            t.pass_at_1,
            f(t.pass_at_k),
            f(t.mean_steps_solved),
            t.mean_reward
        ));
    }
    s.push_str(&format!(
        "{:<28} {:>5} {:>7.2} {:>7} {:>9}\n",
        "all",
        report.episodes_total,
        report.pass_at_1,
        f(report.pass_at_k),
        f(report.mean_steps_solved)
    ));
    s.push_str(&format!(
        "{:.1} episodes/min ({:.1} s)\n",
        report.episodes_per_minute, report.elapsed_s
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_matches_the_closed_form() {
        assert_eq!(pass_at_k(10, 0, 1), Some(0.0));
        assert_eq!(pass_at_k(10, 10, 5), Some(1.0));
        assert!((pass_at_k(10, 3, 1).unwrap() - 0.3).abs() < 1e-12);
        // 1 - C(7,2)/C(10,2) = 1 - 21/45
        assert!((pass_at_k(10, 3, 2).unwrap() - (1.0 - 21.0 / 45.0)).abs() < 1e-12);
        assert_eq!(pass_at_k(10, 8, 3), Some(1.0));
        assert_eq!(pass_at_k(2, 1, 3), None);
        assert_eq!(pass_at_k(2, 1, 0), None);
    }

    fn rec(task: &str, success: bool, steps: usize) -> EpisodeRecord {
        EpisodeRecord {
            task: task.into(),
            seed: 0,
            attempt: 1,
            instruction: String::new(),
            success,
            reward: if success { 1.0 } else { -1.0 },
            steps,
            reason: String::new(),
            trajectory_id: String::new(),
            seconds: 0.1,
        }
    }

    #[test]
    fn summary_counts_per_task_and_overall() {
        let cfg = EvalConfig {
            tasks: vec![],
            episodes: 2,
            k: 2,
            seed: 0,
            max_steps: 5,
            reflection: None,
            judge: None,
        };
        let r = summarize(
            "p",
            &cfg,
            vec![
                rec("a", true, 2),
                rec("a", false, 5),
                rec("b", true, 4),
                rec("b", true, 6),
            ],
            60.0,
        );
        assert_eq!(r.tasks.len(), 2);
        assert_eq!(r.tasks[0].pass_at_1, 0.5);
        assert_eq!(r.tasks[0].pass_at_k, Some(1.0));
        assert_eq!(r.tasks[0].mean_steps_solved, Some(2.0));
        assert_eq!(r.tasks[1].mean_steps_solved, Some(5.0));
        assert_eq!(r.pass_at_1, 0.75);
        assert_eq!(r.mean_steps_solved, Some(4.0));
        assert_eq!(r.episodes_per_minute, 4.0);
        assert!(table(&r).contains("pass@2"));
    }

    #[test]
    fn pass_at_k_is_per_instance_not_pooled_over_seeds() {
        let cfg = EvalConfig {
            tasks: vec![],
            episodes: 3,
            k: 2,
            seed: 0,
            max_steps: 5,
            reflection: None,
            judge: None,
        };
        let at = |seed: u64, attempt: u32, success: bool| EpisodeRecord {
            seed,
            attempt,
            ..rec("a", success, 1)
        };
        // Seed 0 is solved twice, seed 1 never: one instance of two is solved within
        // two attempts. Pooling the four episodes as samples of one problem would say
        // 1 - C(2,2)/C(4,2) = 0.83. Seed 2 has one attempt only and is left out.
        let r = summarize(
            "p",
            &cfg,
            vec![
                at(0, 1, true),
                at(0, 2, true),
                at(1, 1, false),
                at(1, 2, false),
                at(2, 1, true),
            ],
            60.0,
        );
        assert_eq!(r.tasks[0].episodes, 5);
        assert_eq!(r.tasks[0].pass_at_1, 0.6);
        assert_eq!(r.tasks[0].pass_at_k, Some(0.5));
        assert_eq!(r.pass_at_k, Some(0.5));
        // Results written before attempts existed read as first attempts.
        let old = r#"{"task":"a","seed":3,"instruction":"","success":true,"reward":1.0,
            "steps":1,"reason":"","trajectory_id":"t","seconds":0.1}"#;
        let e: EpisodeRecord = serde_json::from_str(old).unwrap();
        assert_eq!(e.attempt, 1);
    }
}
