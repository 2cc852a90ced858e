//! Quality control of mined pairs (ALGORITHMS.md §4.7): minimum score (stricter for
//! runtime and evaluation failures), trivial targets, dedupe by (task, success step),
//! then balance ([`super::balance`]): the largest subset meeting the category, domain
//! and `technical_obstruction` caps. Every drop is counted by reason and recorded
//! with its detail ([`QcDrop`], written to `mined/dropped.jsonl`), so `mine explain`
//! can say why a pair is not in the output. The result does not depend on input order.

use super::balance::{BalanceDrop, CapKind, Shares, balance};
use super::config::MineConfig;
use super::pair::{FailureKind, MinedPair};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub use super::balance::{OBSTRUCTION, effective_share};

/// What quality control kept and why it dropped the rest.
#[derive(Debug, Clone, Default)]
pub struct QcOutcome {
    pub kept: Vec<MinedPair>,
    pub rejections: BTreeMap<String, u64>,
    pub balance: BalanceNote,
    /// Every dropped pair with its reason, in input order of the reasons' stages.
    pub dropped: Vec<QcDrop>,
}

/// The caps that were in force, and whether they were relaxed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BalanceNote {
    pub category_share: f64,
    pub category_relaxed: bool,
    pub domain_share: f64,
    pub domain_relaxed: bool,
    /// `technical_obstruction`'s cap (1 when off).
    #[serde(default)]
    pub obstruction_share: f64,
    /// Pairs that entered balance (after min score, trivial targets and dedupe).
    #[serde(default)]
    pub input: u64,
    /// Pairs balance kept: the largest subset meeting every cap.
    #[serde(default)]
    pub kept: u64,
}

/// A cap that made balance drop a pair: the group was full.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapNote {
    /// `category`, `domain` or `technical_obstruction`.
    pub cap: String,
    /// The category or domain.
    pub group: String,
    /// Pairs of the group kept (its cap).
    pub kept: u64,
    /// Pairs of the group that entered balance.
    pub before: u64,
    /// The share in force.
    pub share: f64,
}

/// One pair quality control dropped (`mined/dropped.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QcDrop {
    pub id: String,
    /// The counted reason (a key of the report's `rejections`).
    pub reason: String,
    /// The reason in words.
    pub detail: String,
    pub score: f64,
    /// For balance drops: every full group the pair belongs to (the first is counted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<CapNote>,
}

/// Drop order among equals: lowest score first, then the larger id.
fn weakest_first(a: &MinedPair, b: &MinedPair) -> std::cmp::Ordering {
    a.scores
        .total
        .total_cmp(&b.scores.total)
        .then_with(|| b.id.cmp(&a.id))
}

fn cap_name(k: CapKind) -> &'static str {
    match k {
        CapKind::Obstruction => OBSTRUCTION,
        CapKind::Category => "category",
        CapKind::Domain => "domain",
    }
}

fn balance_drop(p: &MinedPair, d: &BalanceDrop, kept_total: usize) -> QcDrop {
    let caps: Vec<CapNote> = d
        .caps
        .iter()
        .map(|c| CapNote {
            cap: cap_name(c.kind).into(),
            group: c.group.clone(),
            kept: c.kept as u64,
            before: c.before as u64,
            share: c.share,
        })
        .collect();
    let words: Vec<String> = d
        .caps
        .iter()
        .map(|c| {
            format!(
                "{} `{}` is full: {} of its {} pairs kept = {:.1}% of the {} kept (cap {:.0}%)",
                cap_name(c.kind),
                c.group,
                c.kept,
                c.before,
                100.0 * c.kept as f64 / kept_total.max(1) as f64,
                kept_total,
                100.0 * c.share
            )
        })
        .collect();
    QcDrop {
        id: p.id.clone(),
        reason: d
            .caps
            .first()
            .map_or("balance", |c| c.kind.reason())
            .to_string(),
        detail: if words.is_empty() {
            "dropped by balance".into()
        } else {
            format!(
                "{}; its score {:.3} is below the kept ones it competes with",
                words.join("; "),
                p.scores.total
            )
        },
        score: p.scores.total,
        caps,
    }
}

/// Runs every quality-control step.
pub fn quality_control(pairs: Vec<MinedPair>, cfg: &MineConfig) -> QcOutcome {
    let mut drops = Drops::default();
    let survivors = score_gate(pairs, cfg, &mut drops);
    let unique = dedupe(&survivors, &mut drops);
    let b = balance(
        &unique,
        Shares {
            category: cfg.max_category_share,
            domain: cfg.max_domain_share,
            obstruction: cfg.obstruction_cap,
        },
    );
    for d in &b.drops {
        let q = balance_drop(&unique[d.index], d, b.kept);
        *drops.counts.entry(q.reason.clone()).or_default() += 1;
        drops.dropped.push(q);
    }
    let note = BalanceNote {
        category_share: b.category_share,
        category_relaxed: b.category_relaxed,
        domain_share: b.domain_share,
        domain_relaxed: b.domain_relaxed,
        obstruction_share: b.obstruction_share,
        input: unique.len() as u64,
        kept: b.kept as u64,
    };
    let kept: Vec<MinedPair> = unique
        .into_iter()
        .zip(&b.keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect();
    QcOutcome {
        kept,
        rejections: drops.counts,
        balance: note,
        dropped: drops.dropped,
    }
}

/// The pairs quality control dropped, and their count per reason.
#[derive(Default)]
struct Drops {
    counts: BTreeMap<String, u64>,
    dropped: Vec<QcDrop>,
}

impl Drops {
    fn reject(&mut self, p: &MinedPair, reason: &str, detail: String) {
        *self.counts.entry(reason.to_string()).or_default() += 1;
        self.dropped.push(QcDrop {
            id: p.id.clone(),
            reason: reason.into(),
            detail,
            score: p.scores.total,
            caps: Vec::new(),
        });
    }
}

/// Drops the pairs under the minimum score (raised by `strict_factor` when the loc
/// attempt failed at runtime or evaluation) and those whose target is trivial.
fn score_gate(pairs: Vec<MinedPair>, cfg: &MineConfig, drops: &mut Drops) -> Vec<MinedPair> {
    let mut survivors = Vec::with_capacity(pairs.len());
    for p in pairs {
        let strict = matches!(
            p.loc_failure,
            Some(FailureKind::Runtime | FailureKind::Evaluation)
        );
        let min = if strict {
            cfg.min_score * cfg.strict_factor
        } else {
            cfg.min_score
        };
        if p.scores.total + 1e-12 < min {
            let (reason, why) = if strict {
                (
                    "below_min_score_strict",
                    " (strict: a runtime or evaluation failure)",
                )
            } else {
                ("below_min_score", "")
            };
            let detail = format!("score {:.3} is below {min:.3}{why}", p.scores.total);
            drops.reject(&p, reason, detail);
        } else if p.target_action.is_trivial() {
            let detail = format!(
                "the target `{}` is a wait, scroll or go_back",
                p.target_action.name
            );
            drops.reject(&p, "trivial_target", detail);
        } else {
            survivors.push(p);
        }
    }
    survivors
}

/// Dedupes by (task, success step): keeps the best-scoring pair of each.
fn dedupe(survivors: &[MinedPair], drops: &mut Drops) -> Vec<MinedPair> {
    fn key(p: &MinedPair) -> (&str, &str, u32) {
        (
            p.task_id.as_str(),
            p.success.trajectory.as_str(),
            p.success.step,
        )
    }
    let mut best: HashMap<(&str, &str, u32), usize> = HashMap::new();
    for (k, p) in survivors.iter().enumerate() {
        match best.get(&key(p)) {
            Some(&b) if weakest_first(p, &survivors[b]).is_le() => {}
            _ => {
                best.insert(key(p), k);
            }
        }
    }
    let mut unique = Vec::with_capacity(survivors.len());
    for (k, p) in survivors.iter().enumerate() {
        match best.get(&key(p)).copied().filter(|&b| b != k) {
            Some(b) => {
                let detail = format!(
                    "same task and success step as `{}`, which scores {:.3}",
                    survivors[b].id, survivors[b].scores.total
                );
                drops.reject(p, "duplicate_success_step", detail);
            }
            None => unique.push(p.clone()),
        }
    }
    unique
}
