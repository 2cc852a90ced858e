//! Reflection-conditioned multi-round collection and its yield report
//! (ALGORITHMS.md §1).
//!
//! For each (task, seed): attempt 1 runs the teacher with no reflection. When an
//! attempt fails, or succeeds in more than `detour_factor` × the shortest success
//! known for that task instance (the same task id: page and seed — from earlier
//! collections in the dataset, [`known_shortest`], or this run), a [`Reflector`] distils a short reflection
//! from it and the next attempt's prompt carries it ([`PolicyInput::reflection`](crate::policy::PolicyInput::reflection)), up
//! to `rounds` attempts. Every attempt is stored (`attempt` = `round` = its number
//! for that seed, `reflection`, source [`COLLECT_SOURCE`]); failures feed the miner.
//!
//! Episodes are run by the evaluation's [`run_episode`], so collection and evaluation
//! see the same observation, actions and outcome. Each attempt re-seeds the policy
//! with `seed + 1_000_003 × (attempt − 1)` ([`run_episode`] applies
//! [`AttemptSeeded`](crate::policy::attempt::AttemptSeeded)) while the page keeps the
//! episode seed: the task instance is the same, the teacher's sampling is fresh, as
//! an LLM teacher sampled at temperature would be. Without this, a
//! retry of a deterministic policy would replay the failed attempt exactly.
//!
//! With `reflection` off ([`CollectConfig::reflection`] false) the same retries
//! happen with no reflection, which is the baseline of the yield comparison.

pub mod parallel;
pub mod reflect;
pub mod report;

pub use reflect::{HeuristicReflector, LlmReflector, Reflection, Reflector, RetryCause};
pub use report::{AttemptRecord, CollectReport, RoundStats, compare_table, summarize, table};

use crate::env::miniwob::task_name;
use crate::eval::judged::{JudgeHandle, judge_episode};
use crate::eval::{EpisodeEnv, EpisodeOptions, prepare_dataset, run_episode};
use crate::policy::Policy;
use crate::trajectory::Dataset;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::time::Instant;

/// The `source` of trajectories written by collection.
pub const COLLECT_SOURCE: &str = "rmsweb-collect";

/// What to collect.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    /// Task names (`click-button` or `miniwob:click-button`).
    pub tasks: Vec<String>,
    /// Seeds per task: `seed_start`, `seed_start + 1`, ...
    pub seeds: usize,
    pub seed_start: u64,
    /// Attempts per (task, seed), at least 1.
    pub rounds: usize,
    /// Retry a success longer than this × the shortest known success of its task
    /// instance.
    pub detour_factor: f64,
    /// Shortest known success (steps) per task id before this run starts, usually
    /// [`known_shortest`] of the dataset. Instances of one task type differ (one
    /// `click-checkboxes` seed needs one click, another five), so a success is only
    /// called a detour against a success of the same instance.
    pub known_shortest: BTreeMap<String, usize>,
    /// Give retries a reflection (false: plain retries, the comparison baseline).
    pub reflection: bool,
    pub max_steps: usize,
    /// Judges the attempts whose pages do not score themselves (live-web tasks)
    /// before the retry is decided; the verdicts go to the dataset.
    pub judge: Option<JudgeHandle>,
}

impl Default for CollectConfig {
    fn default() -> Self {
        CollectConfig {
            tasks: Vec::new(),
            seeds: 10,
            seed_start: 0,
            rounds: 3,
            detour_factor: 1.5,
            known_shortest: BTreeMap::new(),
            reflection: true,
            max_steps: 10,
            judge: None,
        }
    }
}

/// Whether an attempt is retried, and why: failures always; successes longer than
/// `factor × shortest` (when a shortest success is known).
pub fn retry_cause(
    success: bool,
    steps: usize,
    shortest: Option<usize>,
    factor: f64,
) -> Option<RetryCause> {
    if !success {
        return Some(RetryCause::Failed);
    }
    match shortest {
        Some(s) if steps as f64 > factor * s as f64 => {
            Some(RetryCause::Detour { steps, shortest: s })
        }
        _ => None,
    }
}

/// The shortest successful trajectory (steps) of every task id in the dataset.
pub fn known_shortest(dataset: &Dataset) -> Result<BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    for s in dataset.summaries() {
        let s = s.map_err(|e| anyhow::anyhow!("{e}"))?;
        if s.outcome.success {
            let v = out.entry(s.task_id).or_insert(s.step_count);
            *v = (*v).min(s.step_count);
        }
    }
    Ok(out)
}

/// The id of one collection run (in every trajectory id it writes).
fn run_id(cfg: &CollectConfig) -> String {
    format!(
        "collect-{}-{}{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S"),
        std::process::id(),
        if cfg.reflection { "" } else { "-norefl" }
    )
}

/// One attempt as played: its task, trajectory and record.
pub(crate) type Attempt = (
    crate::trajectory::Task,
    crate::trajectory::Trajectory,
    AttemptRecord,
);

/// Plays the attempts of one (task, seed) instance in order, `on_attempt` after
/// each: a retry follows a failure or a detour (against the shortest success of
/// this instance known before or found by an earlier round), with a reflection when
/// `cfg.reflection` is on.
#[allow(clippy::too_many_arguments)]
pub(crate) fn play_instance(
    env: &mut dyn EpisodeEnv,
    policy: &mut dyn Policy,
    reflector: &mut dyn Reflector,
    cfg: &CollectConfig,
    run_id: &str,
    name: &str,
    seed: u64,
    sink: Option<&crate::eval::ScreenshotSink>,
    on_attempt: &mut dyn FnMut(Attempt) -> Result<()>,
) -> Result<()> {
    let judged = judge_dataset(cfg, sink)?;
    let mut reflection: Option<Reflection> = None;
    // The shortest success of this instance found by this run's rounds.
    let mut found: Option<usize> = None;
    for round in 1..=cfg.rounds as u32 {
        let opts = EpisodeOptions {
            max_steps: cfg.max_steps,
            reflection: reflection.as_ref().map(|r| r.text.as_str()),
            trajectory_id: format!("{run_id}-{name}-s{seed}-a{round}"),
            attempt: round,
            screenshots: sink,
        };
        let (t, mut traj, mut ep) = run_episode(env, policy, name, seed, &opts)
            .map_err(crate::eval::stop::blame_stop)
            .with_context(|| format!("{name} seed {seed} attempt {round}"))?;
        traj.round = round;
        traj.source = COLLECT_SOURCE.into();
        if let (Some(judge), Some(ds)) = (&cfg.judge, &judged) {
            judge_episode(judge.0.as_ref(), ds, &t, &mut traj, &mut ep)?;
        }
        if let Some(note) = reflection.as_ref().and_then(|r| r.note.as_ref())
            && let Some(reason) = traj.outcome.reason.as_mut()
        {
            reason.push_str(&format!("; reflection note: {note}"));
        }
        let best = match (cfg.known_shortest.get(&t.task_id).copied(), found) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if ep.success {
            found = Some(found.map_or(ep.steps, |f| f.min(ep.steps)));
        }
        let cause = retry_cause(ep.success, ep.steps, best, cfg.detour_factor);
        let rec = AttemptRecord {
            task: name.to_string(),
            seed,
            round,
            success: ep.success,
            steps: ep.steps,
            reason: ep.reason.clone(),
            detour: matches!(cause, Some(RetryCause::Detour { .. })),
            reflection: reflection.as_ref().map(|r| r.text.clone()),
            reflector: reflection.as_ref().map(|r| r.reflector.clone()),
            trajectory_id: traj.id.clone(),
            seconds: ep.seconds,
        };
        let next = cause
            .filter(|_| (round as usize) < cfg.rounds)
            .map(|c| cfg.reflection.then(|| reflector.reflect(&t, &traj, &c)));
        on_attempt((t, traj, rec))?;
        match next {
            Some(r) => reflection = r,
            None => break,
        }
    }
    Ok(())
}

/// The dataset a judge reads screenshots from and stores verdicts in (a handle of
/// its own: the writer's is busy appending attempts); `None` without a judge.
fn judge_dataset(
    cfg: &CollectConfig,
    sink: Option<&crate::eval::ScreenshotSink>,
) -> Result<Option<Dataset>> {
    match (&cfg.judge, sink) {
        (None, _) => Ok(None),
        (Some(_), Some(s)) => Ok(Some(Dataset::open(&s.root)?)),
        (Some(_), None) => anyhow::bail!("a judged collection needs a dataset for its verdicts"),
    }
}

/// Appends an attempt (and its task, the first time) to the dataset.
pub(crate) fn write_attempt(
    dataset: Option<&mut Dataset>,
    known: &mut std::collections::BTreeSet<String>,
    a: &Attempt,
) -> Result<()> {
    if let Some(ds) = dataset {
        if known.insert(a.0.task_id.clone()) {
            ds.append_tasks(std::slice::from_ref(&a.0))?;
        }
        ds.append_trajectories(std::slice::from_ref(&a.1))?;
    }
    Ok(())
}

/// Runs the collection. With a dataset, each attempt (and its task, once) is appended
/// as it finishes, screenshots included. `on_attempt` is called after each attempt.
pub fn collect(
    env: &mut dyn EpisodeEnv,
    policy: &mut dyn Policy,
    reflector: &mut dyn Reflector,
    cfg: &CollectConfig,
    mut dataset: Option<&mut Dataset>,
    on_attempt: &mut dyn FnMut(&AttemptRecord),
) -> Result<CollectReport> {
    anyhow::ensure!(cfg.rounds >= 1, "rounds must be at least 1");
    let run_id = run_id(cfg);
    let (mut known, sink) = prepare_dataset(env, dataset.as_deref())?;
    let started = Instant::now();
    let mut records = Vec::new();
    for task in &cfg.tasks {
        let name = task_name(task).to_string();
        for i in 0..cfg.seeds {
            let seed = cfg.seed_start + i as u64;
            play_instance(
                env,
                policy,
                reflector,
                cfg,
                &run_id,
                &name,
                seed,
                sink.as_ref(),
                &mut |a| {
                    write_attempt(dataset.as_deref_mut(), &mut known, &a)?;
                    on_attempt(&a.2);
                    records.push(a.2);
                    Ok(())
                },
            )?;
        }
    }
    Ok(summarize(
        &policy.name(),
        cfg,
        records,
        started.elapsed().as_secs_f64(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_detours_are_retried() {
        assert_eq!(
            retry_cause(false, 3, Some(2), 1.5),
            Some(RetryCause::Failed)
        );
        assert_eq!(retry_cause(true, 3, Some(2), 1.5), None);
        assert_eq!(
            retry_cause(true, 4, Some(2), 1.5),
            Some(RetryCause::Detour {
                steps: 4,
                shortest: 2
            })
        );
        assert_eq!(retry_cause(true, 9, None, 1.5), None);
    }
}
