//! Quality filter, flattening into per-step SFT samples, exports.

pub mod filter;

use crate::trajectory::Dataset;
use filter::{FilterConfig, Rejection};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// The outcome of filtering a dataset (`sft/filter.json`).
#[derive(Debug, Clone, Serialize)]
pub struct FilterReport {
    pub config: FilterConfig,
    pub trajectories: usize,
    pub kept: Vec<Kept>,
    pub rejected: Vec<Rejected>,
    /// Rejections by rule.
    pub counts: BTreeMap<String, usize>,
}

/// A kept trajectory.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    pub id: String,
    pub effective_steps: usize,
}

/// A rejected trajectory and why.
#[derive(Debug, Clone, Serialize)]
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
