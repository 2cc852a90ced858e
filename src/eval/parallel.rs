//! Episodes played side by side: each worker owns a tab
//! ([`crate::env::MiniwobEnv::open_tab`], [`crate::env::WebEnv::open_tab`]) and a
//! policy (for a local model, a client of one batching engine, so that the workers'
//! steps are decoded together), and takes the next (task, seed, attempt) as it
//! finishes one. Trajectories are written as episodes finish; the report lists the
//! episodes in the order [`super::evaluate`] plays them, with the same ids, so a
//! parallel evaluation compares episode by episode with a sequential one.

use super::{EpisodeEnv, new_run_id, prepare_dataset, run_episode, summarize};
use super::{EpisodeOptions, EpisodeRecord, EvalConfig, EvalReport, ScreenshotSink};
use crate::env::miniwob::task_name;
use crate::policy::Policy;
use crate::trajectory::{Dataset, Task, Trajectory};
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// One episode to play.
pub(super) struct Planned {
    task: String,
    seed: u64,
    attempt: u32,
    trajectory_id: String,
}

/// Every episode of `cfg`, in the sequential evaluation's order and with its ids (one
/// attempt keeps the id it always had; repeated ones are told apart).
pub(super) fn plan(cfg: &EvalConfig, run_id: &str) -> Vec<Planned> {
    let mut out = Vec::new();
    for task in &cfg.tasks {
        let name = task_name(task);
        for e in 0..cfg.episodes {
            let seed = cfg.seed + e as u64;
            for attempt in 1..=cfg.k.max(1) as u32 {
                let trajectory_id = if cfg.k > 1 {
                    format!("{run_id}-{name}-s{seed}-a{attempt}")
                } else {
                    format!("{run_id}-{name}-s{seed}")
                };
                out.push(Planned {
                    task: name.to_string(),
                    seed,
                    attempt,
                    trajectory_id,
                });
            }
        }
    }
    out
}

/// Plays one planned episode.
pub(super) fn play(
    env: &mut dyn EpisodeEnv,
    policy: &mut dyn Policy,
    p: &Planned,
    cfg: &EvalConfig,
    screenshots: Option<&ScreenshotSink>,
) -> Result<(Task, Trajectory, EpisodeRecord)> {
    let opts = EpisodeOptions {
        max_steps: cfg.max_steps,
        reflection: cfg.reflection.as_deref(),
        trajectory_id: p.trajectory_id.clone(),
        attempt: p.attempt,
        screenshots,
    };
    run_episode(env, policy, &p.task, p.seed, &opts)
        .with_context(|| format!("episode {} seed {} attempt {}", p.task, p.seed, p.attempt))
}

/// Has `cfg`'s judge score an episode its page did not ([`super::judged`]); the
/// dataset holds its screenshots and receives the verdict.
pub(super) fn judge(
    cfg: &EvalConfig,
    dataset: Option<&Dataset>,
    t: &Task,
    traj: &mut Trajectory,
    rec: &mut EpisodeRecord,
) -> Result<()> {
    match (&cfg.judge, dataset) {
        (Some(j), Some(ds)) => super::judged::judge_episode(j.0.as_ref(), ds, t, traj, rec),
        (Some(_), None) => anyhow::bail!("a judged evaluation needs a dataset for its verdicts"),
        (None, _) => Ok(()),
    }
}

/// Appends an episode's trajectory (and its task, the first time) to the dataset.
pub(super) fn record(
    dataset: Option<&mut Dataset>,
    known: &mut BTreeSet<String>,
    t: &Task,
    traj: &Trajectory,
) -> Result<()> {
    if let Some(ds) = dataset {
        if known.insert(t.task_id.clone()) {
            ds.append_tasks(std::slice::from_ref(t))?;
        }
        ds.append_trajectories(std::slice::from_ref(traj))?;
    }
    Ok(())
}

/// What a worker sends back per episode.
type Played = (usize, Result<(Task, Trajectory, EpisodeRecord)>);

/// [`super::evaluate`] with one worker per `(env, policy)` pair. The first failing
/// episode stops the others (after the episode each is playing) and is returned
/// (with the report of the episodes done when a stop or a browser gone caused it,
/// as [`super::evaluate`]).
// Kept whole: the workers and the loop that writes what they send share one thread
// scope and its borrows (the instance counter, the stop flag, the dataset).
pub fn evaluate_parallel<E: EpisodeEnv + Send>(
    envs: &mut [E],
    mut policies: Vec<Box<dyn Policy + Send>>,
    cfg: &EvalConfig,
    mut dataset: Option<&mut Dataset>,
    on_episode: &mut dyn FnMut(&EpisodeRecord),
) -> Result<EvalReport> {
    anyhow::ensure!(
        !envs.is_empty() && envs.len() == policies.len(),
        "{} tabs for {} policies",
        envs.len(),
        policies.len()
    );
    let run_id = new_run_id();
    let (mut known, sink) = prepare_dataset(&mut envs[0], dataset.as_deref())?;
    for e in &mut envs[1..] {
        e.set_screenshots(sink.is_some());
    }
    let name = policies[0].name();
    let planned = plan(cfg, &run_id);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut records: Vec<Option<EpisodeRecord>> = vec![None; planned.len()];
    let mut failed: Option<anyhow::Error> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Played>();
        for (env, policy) in envs.iter_mut().zip(policies.iter_mut()) {
            let (tx, planned, next, stop, sink) = (tx.clone(), &planned, &next, &stop, &sink);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = planned.get(i) else { break };
                    let opts = EpisodeOptions {
                        max_steps: cfg.max_steps,
                        reflection: cfg.reflection.as_deref(),
                        trajectory_id: p.trajectory_id.clone(),
                        attempt: p.attempt,
                        screenshots: sink.as_ref(),
                    };
                    let r = run_episode(env, policy.as_mut(), &p.task, p.seed, &opts).with_context(
                        || format!("episode {} seed {} attempt {}", p.task, p.seed, p.attempt),
                    );
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            let written = r.and_then(|(t, mut traj, mut rec)| {
                judge(cfg, dataset.as_deref(), &t, &mut traj, &mut rec)?;
                record(dataset.as_deref_mut(), &mut known, &t, &traj)?;
                Ok(rec)
            });
            match written {
                Ok(rec) => {
                    on_episode(&rec);
                    records[i] = Some(rec);
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failed.get_or_insert(e);
                }
            }
        }
    });
    if let Some(e) = failed {
        let done = records.into_iter().flatten().collect();
        let elapsed = started.elapsed().as_secs_f64();
        return Err(super::cut_short(e, &name, cfg, done, elapsed));
    }
    Ok(summarize(
        &name,
        cfg,
        records.into_iter().flatten().collect(),
        started.elapsed().as_secs_f64(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_the_sequential_order_and_ids() {
        let cfg = EvalConfig {
            tasks: vec!["miniwob:click-button".into(), "enter-text".into()],
            episodes: 2,
            k: 2,
            seed: 10,
            max_steps: 5,
            reflection: None,
            judge: None,
        };
        let p = plan(&cfg, "run");
        let got: Vec<(&str, u64, u32, &str)> = p
            .iter()
            .map(|p| (p.task.as_str(), p.seed, p.attempt, p.trajectory_id.as_str()))
            .collect();
        assert_eq!(got.len(), 8);
        assert_eq!(got[0], ("click-button", 10, 1, "run-click-button-s10-a1"));
        assert_eq!(got[3], ("click-button", 11, 2, "run-click-button-s11-a2"));
        assert_eq!(got[4], ("enter-text", 10, 1, "run-enter-text-s10-a1"));
        let one = plan(&EvalConfig { k: 1, ..cfg }, "run");
        assert_eq!(one[1].trajectory_id, "run-click-button-s11");
    }
}
