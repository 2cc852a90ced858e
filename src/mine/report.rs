//! `mined/report.json`: what the miner saw, kept and dropped, and why.

use super::pair::{MinedPair, PairKind};
use super::qc::BalanceNote;
use crate::util::sanitize::clean_line;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Distribution of the kept pairs' total scores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreStats {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    /// Ten bins over 0..=1: `histogram[k]` counts scores in `[k/10, (k+1)/10)`
    /// (1.0 falls in the last bin).
    pub histogram: Vec<u64>,
}

impl ScoreStats {
    /// Statistics of `scores`.
    pub fn of(scores: &[f64]) -> Self {
        let mut histogram = vec![0u64; 10];
        if scores.is_empty() {
            return ScoreStats {
                histogram,
                ..Default::default()
            };
        }
        let mut v = scores.to_vec();
        v.sort_by(f64::total_cmp);
        for s in &v {
            let b = ((s * 10.0).floor() as i64).clamp(0, 9) as usize;
            histogram[b] += 1;
        }
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        ScoreStats {
            count: v.len() as u64,
            min: v[0],
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p10: q(0.1),
            p50: q(0.5),
            p90: q(0.9),
            histogram,
        }
    }
}

/// The mining report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub tasks: u64,
    pub trajectories: u64,
    /// Trajectory pairs contrasted, by kind.
    pub trajectory_pairs: BTreeMap<String, u64>,
    /// Pairs that yielded a candidate, before quality control.
    pub mined_before_qc: u64,
    pub kept: u64,
    pub by_kind: BTreeMap<String, u64>,
    pub by_category: BTreeMap<String, u64>,
    pub by_domain: BTreeMap<String, u64>,
    pub by_label_source: BTreeMap<String, u64>,
    /// Every reason a trajectory pair or a mined pair was dropped, with its count.
    pub rejections: BTreeMap<String, u64>,
    /// For a rejection reason with details (a failed gate), the first one met: the
    /// reason behind a count, e.g. every screenshot unreadable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rejection_examples: BTreeMap<String, String>,
    /// Candidate step pairs by verdict.
    pub candidates: BTreeMap<String, u64>,
    /// Notes from labelling (judge fallbacks), with counts.
    pub label_notes: BTreeMap<String, u64>,
    pub scores: ScoreStats,
    pub balance: BalanceNote,
    /// Records that could not be read (they are skipped, never silently).
    pub unreadable_records: u64,
    /// The first few read errors, with file, line and field.
    pub errors: Vec<String>,
}

impl BalanceNote {
    fn is_default(&self) -> bool {
        *self == BalanceNote::default()
    }
}

/// Name of a kind as written in files.
pub fn kind_name(k: PairKind) -> &'static str {
    match k {
        PairKind::FailContrast => "fail_contrast",
        PairKind::Detour => "detour",
    }
}

impl Report {
    /// Fills the counts of the kept pairs.
    pub fn count_kept(&mut self, kept: &[MinedPair]) {
        self.kept = kept.len() as u64;
        for p in kept {
            *self.by_kind.entry(kind_name(p.kind).into()).or_default() += 1;
            *self
                .by_category
                .entry(p.failure_mode.category.clone())
                .or_default() += 1;
            *self.by_domain.entry(p.domain.clone()).or_default() += 1;
            let src = serde_json::to_value(p.failure_mode.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            *self.by_label_source.entry(src).or_default() += 1;
        }
        let scores: Vec<f64> = kept.iter().map(|p| p.scores.total).collect();
        self.scores = ScoreStats::of(&scores);
    }

    /// A plain-text summary table for the terminal (untrusted names sanitized).
    pub fn summary_table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "tasks {}  trajectories {}  pairs contrasted {}  mined {}  kept {}\n",
            self.tasks,
            self.trajectories,
            self.trajectory_pairs.values().sum::<u64>(),
            self.mined_before_qc,
            self.kept
        ));
        let section = |out: &mut String, title: &str, m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                return;
            }
            out.push_str(&format!("\n{title}\n"));
            let width = m
                .keys()
                .map(|k| k.chars().count())
                .max()
                .unwrap_or(0)
                .min(40);
            for (k, v) in m {
                out.push_str(&format!("  {:<width$}  {v:>8}\n", clean_line(k)));
            }
        };
        section(&mut out, "by kind", &self.by_kind);
        section(&mut out, "by category", &self.by_category);
        section(&mut out, "by domain", &self.by_domain);
        section(&mut out, "rejections", &self.rejections);
        for (k, d) in &self.rejection_examples {
            let d: String = clean_line(d).chars().take(240).collect();
            out.push_str(&format!("  {}, e.g.: {d}\n", clean_line(k)));
        }
        let s = &self.scores;
        out.push_str(&format!(
            "\nscore  min {:.3}  p10 {:.3}  median {:.3}  p90 {:.3}  max {:.3}  mean {:.3}\n",
            s.min, s.p10, s.p50, s.p90, s.max, s.mean
        ));
        if self.unreadable_records > 0 {
            out.push_str(&format!(
                "\n{} unreadable records were skipped (see report.json `errors`)\n",
                self.unreadable_records
            ));
        }
        if !self.balance.is_default() {
            let b = &self.balance;
            let relaxed = |r: bool| if r { " (relaxed: too few groups)" } else { "" };
            out.push_str(&format!(
                "balance: kept {} of {} valid pairs; caps category {:.0}%{}, domain {:.0}%{}, \
                 technical_obstruction {:.0}%\n",
                b.kept,
                b.input,
                100.0 * b.category_share,
                relaxed(b.category_relaxed),
                100.0 * b.domain_share,
                relaxed(b.domain_relaxed),
                100.0 * b.obstruction_share
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_stats_bins_and_quantiles() {
        let s = ScoreStats::of(&[0.05, 0.15, 0.5, 1.0, 0.95]);
        assert_eq!(s.count, 5);
        assert_eq!(s.histogram[0], 1);
        assert_eq!(s.histogram[1], 1);
        assert_eq!(s.histogram[5], 1);
        assert_eq!(s.histogram[9], 2);
        assert_eq!(s.p50, 0.5);
        assert_eq!(s.min, 0.05);
        assert_eq!(s.max, 1.0);
    }
}
