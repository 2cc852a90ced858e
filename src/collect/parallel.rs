//! [`super::collect`] with several instances played side by side: one worker per
//! (tab, policy, reflector), each taking the next (task, seed) instance and playing
//! its rounds in order. Instances are independent (a detour is judged against the
//! same instance's successes), so the attempts are those of one at a time; they are
//! written as they finish, and the report is built from them in plan order, so it
//! reads as the sequential one's.

use super::{
    Attempt, AttemptRecord, CollectConfig, CollectReport, Reflector, play_instance, run_id,
    summarize, write_attempt,
};
use crate::env::miniwob::task_name;
use crate::eval::{EpisodeEnv, prepare_dataset};
use crate::policy::Policy;
use crate::trajectory::Dataset;
use anyhow::Result;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// A worker's tools: its tab, its policy (a client of a shared engine, for a local
/// model) and its reflector.
pub struct Worker<'a> {
    pub env: &'a mut (dyn EpisodeEnv + Send),
    pub policy: &'a mut (dyn Policy + Send),
    pub reflector: &'a mut (dyn Reflector + Send),
}

/// Every (task, seed) instance to play, in plan order.
fn instances(cfg: &CollectConfig) -> Vec<(String, u64)> {
    cfg.tasks
        .iter()
        .flat_map(|t| {
            let name = task_name(t).to_string();
            (0..cfg.seeds).map(move |i| (name.clone(), cfg.seed_start + i as u64))
        })
        .collect()
}

/// Runs the collection with one worker per entry of `workers` (see the module
/// docs). The first failing attempt stops the others after the instance each is
/// playing, and is returned.
// Kept whole: the workers and the loop that writes what they send share one thread
// scope and its borrows (the instance counter, the stop flag, the dataset).
pub fn collect_parallel(
    mut workers: Vec<Worker<'_>>,
    cfg: &CollectConfig,
    mut dataset: Option<&mut Dataset>,
    on_attempt: &mut dyn FnMut(&AttemptRecord),
) -> Result<CollectReport> {
    anyhow::ensure!(cfg.rounds >= 1, "rounds must be at least 1");
    anyhow::ensure!(!workers.is_empty(), "no worker to collect with");
    let run_id = run_id(cfg);
    let (mut known, sink) = prepare_dataset(workers[0].env, dataset.as_deref())?;
    for w in &mut workers[1..] {
        w.env.set_screenshots(sink.is_some());
    }
    let name = workers[0].policy.name();
    let instances = instances(cfg);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut records: Vec<(usize, AttemptRecord)> = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(usize, Result<Attempt>)>();
        for w in workers.iter_mut() {
            let (tx, instances, next, stop, sink, run_id) =
                (tx.clone(), &instances, &next, &stop, &sink, &run_id);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((task, seed)) = instances.get(i) else {
                        break;
                    };
                    let played = play_instance(
                        w.env,
                        &mut *w.policy,
                        &mut *w.reflector,
                        cfg,
                        run_id,
                        task,
                        *seed,
                        sink.as_ref(),
                        &mut |a| {
                            tx.send((i, Ok(a)))
                                .map_err(|_| anyhow::anyhow!("the collection ended"))
                        },
                    );
                    if let Err(e) = played {
                        let _ = tx.send((i, Err(e)));
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, a) in rx {
            let written = a.and_then(|a| {
                write_attempt(dataset.as_deref_mut(), &mut known, &a)?;
                Ok(a.2)
            });
            match written {
                Ok(rec) => {
                    on_attempt(&rec);
                    records.push((i, rec));
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failed.get_or_insert(e);
                }
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // Plan order: by instance, then round (a worker sends an instance's rounds in order).
    records.sort_by_key(|(i, r)| (*i, r.round));
    Ok(summarize(
        &name,
        cfg,
        records.into_iter().map(|(_, r)| r).collect(),
        started.elapsed().as_secs_f64(),
    ))
}
