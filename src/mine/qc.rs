//! Quality control of mined pairs (ALGORITHMS.md §4.7): minimum score (stricter for
//! runtime and evaluation failures), trivial targets, dedupe by (task, success step),
//! the `technical_obstruction` cap, and category and domain balance. Every drop is
//! counted by reason; lowest scores go first, ties broken by id so the result does not
//! depend on input order.
//!
//! Balance is a hard cap on the *output*: with three or more categories none may pass
//! 35%, so a rare category bounds the common ones (skewed input shrinks the output,
//! visible as `category_balance` drops in the report). Caps that interact (dropping
//! for one raises another's share) are re-applied until none is exceeded.

use super::config::MineConfig;
use super::pair::{FailureKind, MinedPair};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The obstruction category.
pub const OBSTRUCTION: &str = "technical_obstruction";

/// What quality control kept and why it dropped the rest.
#[derive(Debug, Clone, Default)]
pub struct QcOutcome {
    pub kept: Vec<MinedPair>,
    pub rejections: BTreeMap<String, u64>,
    pub balance: BalanceNote,
}

/// The caps that were in force at the end, and whether they were relaxed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BalanceNote {
    pub category_share: f64,
    pub category_relaxed: bool,
    pub domain_share: f64,
    pub domain_relaxed: bool,
}

/// The share cap in force for `groups` distinct groups: `share`, or an even split
/// `1/groups` when fewer than ⌈1/share⌉ groups are present.
pub fn effective_share(share: f64, groups: usize) -> (f64, bool) {
    let needed = (1.0 / share - 1e-9).ceil() as usize;
    if groups > 0 && groups < needed {
        (1.0 / groups as f64, true)
    } else {
        (share, false)
    }
}

/// Drop order: lowest score first, then the larger id.
fn weakest_first(a: &MinedPair, b: &MinedPair) -> std::cmp::Ordering {
    a.scores
        .total
        .total_cmp(&b.scores.total)
        .then_with(|| b.id.cmp(&a.id))
}

/// Removes `n` weakest pairs among those `pick` selects.
fn drop_weakest(
    pairs: &mut Vec<MinedPair>,
    pick: impl Fn(&MinedPair) -> bool,
    n: usize,
    reason: &str,
    rej: &mut BTreeMap<String, u64>,
) {
    if n == 0 {
        return;
    }
    let mut cand: Vec<&MinedPair> = pairs.iter().filter(|p| pick(p)).collect();
    cand.sort_by(|a, b| weakest_first(a, b));
    let gone: std::collections::HashSet<String> =
        cand.iter().take(n).map(|p| p.id.clone()).collect();
    let before = pairs.len();
    pairs.retain(|p| !gone.contains(&p.id));
    *rej.entry(reason.to_string()).or_default() += (before - pairs.len()) as u64;
}

/// Enforces a share cap on the groups `key` gives, one violation at a time (the
/// cap depends on the total, which shrinks as pairs are dropped). Returns whether
/// anything was dropped, and the share in force.
fn cap_groups(
    pairs: &mut Vec<MinedPair>,
    key: fn(&MinedPair) -> &str,
    share: f64,
    reason: &str,
    rej: &mut BTreeMap<String, u64>,
) -> (bool, f64, bool) {
    let mut changed = false;
    loop {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in pairs.iter() {
            *counts.entry(key(p)).or_default() += 1;
        }
        let (eff, relaxed) = effective_share(share, counts.len());
        let cap = (eff * pairs.len() as f64 + 1e-9).floor() as usize;
        let worst = counts
            .iter()
            .filter(|(_, c)| **c > cap)
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(g, c)| (g.to_string(), *c));
        let Some((group, count)) = worst else {
            return (changed, eff, relaxed);
        };
        drop_weakest(pairs, |p| key(p) == group, count - cap, reason, rej);
        changed = true;
    }
}

/// Runs every quality-control step.
pub fn quality_control(mut pairs: Vec<MinedPair>, cfg: &MineConfig) -> QcOutcome {
    let mut rej: BTreeMap<String, u64> = BTreeMap::new();
    let count = |r: &str, rej: &mut BTreeMap<String, u64>| {
        *rej.entry(r.to_string()).or_default() += 1;
    };
    pairs.retain(|p| {
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
            count(
                if strict {
                    "below_min_score_strict"
                } else {
                    "below_min_score"
                },
                &mut rej,
            );
            return false;
        }
        if p.target_action.is_trivial() {
            count("trivial_target", &mut rej);
            return false;
        }
        true
    });
    // Dedupe by (task, success step): keep the best-scoring pair.
    let mut best: HashMap<(String, String, u32), &MinedPair> = HashMap::new();
    for p in &pairs {
        let k = (
            p.task_id.clone(),
            p.success.trajectory.clone(),
            p.success.step,
        );
        match best.get(&k) {
            Some(b) if weakest_first(p, b).is_le() => {}
            _ => {
                best.insert(k, p);
            }
        }
    }
    let keep: std::collections::HashSet<String> = best.values().map(|p| p.id.clone()).collect();
    let before = pairs.len();
    pairs.retain(|p| keep.contains(&p.id));
    if before > pairs.len() {
        *rej.entry("duplicate_success_step".into()).or_default() += (before - pairs.len()) as u64;
    }
    let mut note = BalanceNote::default();
    loop {
        let mut changed = false;
        if cfg.obstruction_cap < 1.0 {
            let obs = pairs
                .iter()
                .filter(|p| p.failure_mode.category == OBSTRUCTION)
                .count();
            let others = (pairs.len() - obs) as f64;
            let allowed = (cfg.obstruction_cap / (1.0 - cfg.obstruction_cap) * others + 1e-9)
                .floor() as usize;
            if obs > allowed {
                drop_weakest(
                    &mut pairs,
                    |p| p.failure_mode.category == OBSTRUCTION,
                    obs - allowed,
                    "technical_obstruction_cap",
                    &mut rej,
                );
                changed = true;
            }
        }
        let (c, share, relaxed) = cap_groups(
            &mut pairs,
            |p| p.failure_mode.category.as_str(),
            cfg.max_category_share,
            "category_balance",
            &mut rej,
        );
        note.category_share = share;
        note.category_relaxed = relaxed;
        let (d, share, relaxed) = cap_groups(
            &mut pairs,
            |p| p.domain.as_str(),
            cfg.max_domain_share,
            "domain_balance",
            &mut rej,
        );
        note.domain_share = share;
        note.domain_relaxed = relaxed;
        if !(changed || c || d) {
            break;
        }
    }
    QcOutcome {
        kept: pairs,
        rejections: rej,
        balance: note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxation_applies_below_the_needed_group_count() {
        assert_eq!(effective_share(0.35, 3), (0.35, false));
        assert_eq!(effective_share(0.35, 2), (0.5, true));
        assert_eq!(effective_share(0.25, 3), (1.0 / 3.0, true));
        assert_eq!(effective_share(0.25, 4), (0.25, false));
    }
}
