//! Mining a whole dataset: trajectories are grouped by task from their summaries,
//! then tasks are processed in parallel, each parsing only its own trajectories, so
//! memory stays bounded by the largest task. Results are collected in task order,
//! so the output is the same whatever the number of threads.

use super::align::{Side, StateView};
use super::config::MineConfig;
use super::gates::VisualGate;
use super::label::Judge;
use super::pair::MinedPair;
use super::pairs::{TrajMeta, TrajPair, build_pairs};
use super::qc::QcDrop;
use super::qc::quality_control;
use super::report::{Report, kind_name};
use super::select::{PairContext, TaskInfo, evaluate_pair, route_choice_sides, views_of};
use crate::reward::RewardConfig;
use crate::trajectory::{Dataset, Task, Trajectory};
use anyhow::Result;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};

/// How many read errors the report lists.
const MAX_LISTED_ERRORS: usize = 20;

/// Pairs and report of a mining run.
#[derive(Debug, Clone)]
pub struct MineOutput {
    pub pairs: Vec<MinedPair>,
    pub report: Report,
    /// The pairs quality control dropped, with why (`mined/dropped.jsonl`).
    pub dropped: Vec<QcDrop>,
}

#[derive(Default)]
struct TaskResult {
    mined: Vec<MinedPair>,
    pairs_by_kind: BTreeMap<String, u64>,
    rejections: BTreeMap<String, u64>,
    /// The first detail seen for each rejection reason that has one.
    rejection_examples: BTreeMap<String, String>,
    candidates: BTreeMap<String, u64>,
    label_notes: BTreeMap<String, u64>,
    errors: Vec<String>,
}

fn add(into: &mut BTreeMap<String, u64>, from: BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// A judge note reduced to a countable key (the failure detail is dropped).
fn note_key(note: &str) -> Option<String> {
    if note.starts_with("judge failed") {
        Some("judge_failed_fallback_heuristic".into())
    } else if note.starts_with("judge answer rejected") {
        Some("judge_answer_rejected_fallback_heuristic".into())
    } else {
        None
    }
}

/// The task table: id → task (tasks missing from `tasks.jsonl` get an empty one).
pub fn task_table(ds: &Dataset) -> Result<HashMap<String, Task>> {
    let tasks = ds.tasks().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect())
}

/// What the miner knows of a task id.
pub fn task_info(tasks: &HashMap<String, Task>, task_id: &str) -> TaskInfo {
    match tasks.get(task_id) {
        Some(t) => TaskInfo {
            task_id: task_id.to_string(),
            domain: if t.domain.is_empty() {
                "unknown".into()
            } else {
                t.domain.clone()
            },
            instruction: t.instruction.clone(),
        },
        None => TaskInfo {
            task_id: task_id.to_string(),
            domain: "unknown".into(),
            instruction: String::new(),
        },
    }
}

/// A trajectory read for mining, with its state views.
type Loaded = (Trajectory, Vec<StateView>);

/// Loads both sides of every pair, and every success (for route choices), each with
/// its state views; what cannot be read is listed in `errors`. Returns the indices
/// needed (sorted) and what loaded.
fn load_needed(
    ds: &Dataset,
    metas: &[TrajMeta],
    pairs: &[TrajPair],
    errors: &mut Vec<String>,
) -> (Vec<usize>, HashMap<usize, Loaded>) {
    // Both sides of every pair, and every success (for route choices).
    let mut needed: Vec<usize> = pairs.iter().flat_map(|p| [p.success, p.loc]).collect();
    needed.extend((0..metas.len()).filter(|&k| metas[k].success && metas[k].steps > 0));
    needed.sort_unstable();
    needed.dedup();
    let mut loaded = HashMap::new();
    for &k in &needed {
        match ds.trajectory(metas[k].record) {
            Ok(t) => {
                let views = views_of(&t);
                loaded.insert(k, (t, views));
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    (needed, loaded)
}

fn mine_task(
    ds: &Dataset,
    info: &TaskInfo,
    metas: &[TrajMeta],
    cfg: &MineConfig,
    reward: &RewardConfig,
    judge: &dyn Judge,
) -> TaskResult {
    let mut out = TaskResult::default();
    let pairs = build_pairs(metas, cfg);
    if pairs.is_empty() {
        return out;
    }
    let (needed, loaded) = load_needed(ds, metas, &pairs, &mut out.errors);
    let ctx = PairContext {
        task: info,
        cfg,
        reward,
        judge,
    };
    let mut visual = VisualGate::new(ds.root());
    let successes: Vec<Side> = needed
        .iter()
        .filter(|k| metas[**k].success)
        .filter_map(|k| loaded.get(k))
        .map(|(t, v)| Side { traj: t, views: v })
        .collect();
    for p in pairs {
        *out.pairs_by_kind
            .entry(kind_name(p.kind).into())
            .or_default() += 1;
        let (Some(s), Some(l)) = (loaded.get(&p.success), loaded.get(&p.loc)) else {
            *out.rejections
                .entry("unreadable_trajectory".into())
                .or_default() += 1;
            continue;
        };
        let others = route_choice_sides(p.kind, &s.0, &l.0, &successes, cfg);
        let r = evaluate_pair(
            &ctx,
            p.kind,
            Side {
                traj: &s.0,
                views: &s.1,
            },
            Side {
                traj: &l.0,
                views: &l.1,
            },
            &others,
            &mut visual,
            false,
        );
        add(&mut out.candidates, r.candidate_counts);
        for n in &r.label.notes {
            if let Some(k) = note_key(n) {
                *out.label_notes.entry(k).or_default() += 1;
            }
        }
        match r.mined {
            Some(m) => out.mined.push(m),
            None => {
                let reason = r.rejection.unwrap_or_else(|| "no_candidates".into());
                if let Some(d) = r.rejection_detail {
                    out.rejection_examples.entry(reason.clone()).or_insert(d);
                }
                *out.rejections.entry(reason).or_default() += 1;
            }
        }
    }
    out
}

/// Mines a dataset. `tick(total_tasks)` is called once per finished task (for a
/// progress bar).
pub fn mine_dataset(
    ds: &Dataset,
    cfg: &MineConfig,
    judge: &dyn Judge,
    tick: &(dyn Fn(usize) + Sync),
) -> Result<MineOutput> {
    cfg.validate()?;
    let reward = RewardConfig::default();
    let tasks = task_table(ds)?;
    let mut report = Report {
        schema: 1,
        ..Default::default()
    };
    let mut by_task: BTreeMap<String, Vec<TrajMeta>> = BTreeMap::new();
    for s in ds.summaries() {
        match s {
            Ok(s) => by_task
                .entry(s.task_id.clone())
                .or_default()
                .push((&s).into()),
            Err(e) => {
                report.unreadable_records += 1;
                if report.errors.len() < MAX_LISTED_ERRORS {
                    report.errors.push(e.to_string());
                }
            }
        }
        report.trajectories += 1;
    }
    report.tasks = by_task.len() as u64;
    let groups: Vec<(String, Vec<TrajMeta>)> = by_task.into_iter().collect();
    let total = groups.len();
    let results: Vec<TaskResult> = groups
        .par_iter()
        .map(|(task_id, metas)| {
            let info = task_info(&tasks, task_id);
            let r = mine_task(ds, &info, metas, cfg, &reward, judge);
            tick(total);
            r
        })
        .collect();
    let mut mined = Vec::new();
    for r in results {
        mined.extend(r.mined);
        add(&mut report.trajectory_pairs, r.pairs_by_kind);
        add(&mut report.rejections, r.rejections);
        for (k, d) in r.rejection_examples {
            report.rejection_examples.entry(k).or_insert(d);
        }
        add(&mut report.candidates, r.candidates);
        add(&mut report.label_notes, r.label_notes);
        for e in r.errors {
            report.unreadable_records += 1;
            if report.errors.len() < MAX_LISTED_ERRORS {
                report.errors.push(e);
            }
        }
    }
    report.mined_before_qc = mined.len() as u64;
    let qc = quality_control(mined, cfg);
    add(&mut report.rejections, qc.rejections);
    report.balance = qc.balance;
    report.count_kept(&qc.kept);
    Ok(MineOutput {
        pairs: qc.kept,
        report,
        dropped: qc.dropped,
    })
}

fn jsonl<T: serde::Serialize>(items: &[T], bytes_each: usize) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(items.len() * bytes_each);
    for p in items {
        serde_json::to_writer(&mut buf, p)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

/// Writes `pairs.jsonl`, `dropped.jsonl` (the pairs quality control dropped, each
/// with its reason) and `report.json` into `dir`, each atomically.
pub fn write_output(dir: &std::path::Path, out: &MineOutput) -> Result<()> {
    let write = crate::util::fs::write_atomic;
    write(&dir.join("pairs.jsonl"), &jsonl(&out.pairs, 1024)?)?;
    write(&dir.join("dropped.jsonl"), &jsonl(&out.dropped, 256)?)?;
    let report = serde_json::to_vec_pretty(&out.report)?;
    crate::util::fs::write_atomic(&dir.join("report.json"), &report)?;
    Ok(())
}
