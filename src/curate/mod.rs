//! Quality filter, flattening into per-step SFT samples, exports.

pub mod export;
pub mod filter;
pub mod flatten;

use crate::trajectory::Dataset;
use filter::{FilterConfig, Rejection};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The outcome of filtering a dataset (`sft/filter.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FilterReport {
    pub config: FilterConfig,
    pub trajectories: usize,
    pub kept: Vec<Kept>,
    pub rejected: Vec<Rejected>,
    /// Rejections by rule.
    pub counts: BTreeMap<String, usize>,
}

/// A kept trajectory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub id: String,
    pub effective_steps: usize,
}

/// A rejected trajectory and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rejected {
    pub id: String,
    /// 1-based line in trajectories.jsonl.
    pub line: usize,
    #[serde(flatten)]
    pub why: Rejection,
}

/// A trajectory's id with its effective length, or with why it was rejected.
type Verdict = Result<(String, usize), (String, Rejection)>;

/// Filters every trajectory of the dataset (in parallel, output in file order).
/// Unreadable records are rejected with rule `unreadable`.
pub fn filter_dataset(ds: &Dataset, cfg: &FilterConfig) -> FilterReport {
    let results: Vec<(usize, Verdict)> = (0..ds.trajectory_count())
        .into_par_iter()
        .map(|i| {
            let line = ds
                .trajectories_file()
                .span(i)
                .map_or(0, |s| s.line as usize);
            let r = match ds.trajectory(i) {
                Err(e) => Err((
                    String::new(),
                    Rejection {
                        rule: "unreadable".into(),
                        reason: e.to_string(),
                    },
                )),
                Ok(t) => match filter::check(&t, cfg) {
                    Ok(n) => Ok((t.id, n)),
                    Err(r) => Err((t.id, r)),
                },
            };
            (line, r)
        })
        .collect();
    let mut report = FilterReport {
        config: *cfg,
        trajectories: results.len(),
        kept: Vec::new(),
        rejected: Vec::new(),
        counts: BTreeMap::new(),
    };
    for (line, r) in results {
        match r {
            Ok((id, effective_steps)) => report.kept.push(Kept {
                id,
                effective_steps,
            }),
            Err((id, why)) => {
                *report.counts.entry(why.rule.clone()).or_insert(0) += 1;
                report.rejected.push(Rejected { id, line, why });
            }
        }
    }
    report
}

/// Where the filter report is written, relative to the dataset root.
pub const FILTER_FILE: &str = "sft/filter.json";

/// Whether `derived` exists and is at least as new as the dataset's tasks and
/// trajectories (and as each of `also`, where those exist).
pub fn is_fresh(ds: &Dataset, derived: &std::path::Path, also: &[&std::path::Path]) -> bool {
    let mtime = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(d) = mtime(derived) else {
        return false;
    };
    let inputs = [
        ds.root().join("trajectories.jsonl"),
        ds.root().join("tasks.jsonl"),
    ];
    inputs
        .iter()
        .map(|p| p.as_path())
        .chain(also.iter().copied())
        .filter_map(mtime)
        .all(|t| d >= t)
}

/// The filter report of the dataset: `sft/filter.json` when it is fresh, otherwise a
/// new run with the default thresholds, written there when `write` is set.
/// The flag says whether the filter ran.
pub fn current_filter(ds: &Dataset, write: bool) -> anyhow::Result<(FilterReport, bool)> {
    let path = ds.root().join(FILTER_FILE);
    if is_fresh(ds, &path, &[]) {
        let text = std::fs::read_to_string(&path)?;
        if let Ok(r) = serde_json::from_str::<FilterReport>(&text) {
            return Ok((r, false));
        }
        tracing::warn!(
            "{}: unreadable filter report; filtering again",
            path.display()
        );
    }
    let report = filter_dataset(ds, &FilterConfig::default());
    if write {
        crate::util::fs::write_atomic(&path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    Ok((report, true))
}

/// Flattens the trajectories kept by the filter report (budgets measured by `counter`).
pub fn flatten_kept(
    ds: &Dataset,
    filter: &FilterReport,
    opts: &flatten::FlattenOptions,
    counter: &(dyn crate::policy::prompt::TokenCounter + Sync),
) -> anyhow::Result<(Vec<flatten::Sample>, flatten::FlattenReport)> {
    let ids: Vec<String> = filter.kept.iter().map(|k| k.id.clone()).collect();
    flatten::flatten_ids(ds, &ids, opts, counter)
}

/// The SFT samples of a dataset: `sft/samples.jsonl` when it is at least as new as the
/// tasks, trajectories and filter report, otherwise the kept trajectories flattened in
/// memory with default options, one token per 4 characters (nothing written).
pub fn current_samples(ds: &Dataset) -> anyhow::Result<Vec<flatten::Sample>> {
    let path = flatten::samples_path(ds);
    if is_fresh(ds, &path, &[&ds.root().join(FILTER_FILE)]) {
        return flatten::read_samples(&path);
    }
    let (filter, _) = current_filter(ds, false)?;
    Ok(flatten_kept(
        ds,
        &filter,
        &flatten::FlattenOptions::default(),
        &crate::policy::prompt::CharApprox,
    )?
    .0)
}
