//! Agreement between annotators, per failure-mode category: how many pairs two or
//! more people decided, how often they agreed, and Cohen's kappa on keep (accept
//! or relabel) against reject — the same line the conflict rule draws.
//!
//! With more than two annotators the kappa is Light's: the mean of Cohen's kappa
//! over every two annotators who decided at least one pair in common.

use super::event::Op;
use super::fold::{Folded, Status};
use crate::util::kappa::cohen_kappa;
use serde::Serialize;
use std::collections::BTreeMap;

/// The name of the row over every category.
pub const ALL: &str = "all";

/// Agreement on the pairs of one category (or [`ALL`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CategoryAgreement {
    /// The category as mined (relabels are decisions, not a new category).
    pub category: String,
    /// Pairs of the category.
    pub pairs: usize,
    /// Pairs at least one annotator decided.
    pub decided: usize,
    /// Pairs two or more annotators decided.
    pub shared: usize,
    /// Shared pairs where every annotator kept it, or every one rejected it.
    pub agreed: usize,
    /// Pairs in conflict that no reviewer has settled.
    pub open_conflicts: usize,
    /// Conflicts a reviewer settled.
    pub settled: usize,
    /// Light's kappa on keep / reject (None: no two annotators share a pair).
    pub kappa: Option<f64>,
    /// Two-annotator combinations the kappa averages.
    pub rater_pairs: usize,
}

#[derive(Default)]
struct Tally {
    row: CategoryAgreement,
    /// (annotator, annotator) → 2×2 table of keep / reject.
    tables: BTreeMap<(String, String), [[usize; 2]; 2]>,
}

impl Tally {
    fn add(&mut self, folded: &Folded, pair: &str) {
        let st = folded.state(pair);
        let r = &mut self.row;
        r.pairs += 1;
        if st.status == Status::Conflict {
            r.open_conflicts += 1;
        }
        if st.settled.is_some() {
            r.settled += 1;
        }
        if st.decisions.is_empty() {
            return;
        }
        r.decided += 1;
        if st.decisions.len() < 2 {
            return;
        }
        r.shared += 1;
        let rejects = st.decisions.values().filter(|&&o| o == Op::Reject).count();
        if rejects == 0 || rejects == st.decisions.len() {
            r.agreed += 1;
        }
        let who: Vec<(&String, bool)> = st
            .decisions
            .iter()
            .map(|(w, o)| (w, *o == Op::Reject))
            .collect();
        for (i, (a, a_rejects)) in who.iter().enumerate() {
            for (b, b_rejects) in &who[i + 1..] {
                let t = self.tables.entry(((*a).clone(), (*b).clone())).or_default();
                t[usize::from(*a_rejects)][usize::from(*b_rejects)] += 1;
            }
        }
    }

    fn finish(mut self, category: &str) -> CategoryAgreement {
        let kappas: Vec<f64> = self
            .tables
            .values()
            .filter_map(|t| cohen_kappa(*t))
            .collect();
        self.row.category = category.to_string();
        self.row.rater_pairs = kappas.len();
        self.row.kappa =
            (!kappas.is_empty()).then(|| kappas.iter().sum::<f64>() / kappas.len() as f64);
        self.row
    }
}

/// One row per category of `pairs` (`(pair id, mined category)`), sorted by
/// category, then the [`ALL`] row.
pub fn by_category<'a>(
    folded: &Folded,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<CategoryAgreement> {
    let mut per: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut all = Tally::default();
    for (id, category) in pairs {
        per.entry(category).or_default().add(folded, id);
        all.add(folded, id);
    }
    let mut rows: Vec<CategoryAgreement> = per.into_iter().map(|(c, t)| t.finish(c)).collect();
    rows.push(all.finish(ALL));
    rows
}

/// [`by_category`] over a dataset's mined pairs and annotation log.
pub fn for_dataset(root: &std::path::Path) -> anyhow::Result<Vec<CategoryAgreement>> {
    let (pairs, folded) = super::export::pairs_and_log(root)?;
    Ok(by_category(
        &folded,
        pairs
            .iter()
            .map(|p| (p.id.as_str(), p.failure_mode.category.as_str())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotate::AnnotationEvent;
    use serde_json::{Value, json};

    fn ev(who: &str, pair: &str, op: Op, value: Value) -> AnnotationEvent {
        AnnotationEvent::now(who, pair, op, value, Value::Null)
    }

    #[test]
    fn counts_and_kappa_per_category_match_a_hand_count() {
        // Category "a": alice and bob share 4 pairs: keep/keep, keep/keep,
        // reject/reject, keep/reject → po 0.75, pe 0.75*0.5 + 0.25*0.5 = 0.5,
        // kappa 0.5. Pair a5 only alice decided; a6 nobody.
        let mut events = Vec::new();
        for (pair, alice, bob) in [
            ("a1", Op::Accept, Op::Accept),
            ("a2", Op::Relabel, Op::Accept),
            ("a3", Op::Reject, Op::Reject),
            ("a4", Op::Accept, Op::Reject),
        ] {
            let value = |op| {
                if op == Op::Relabel {
                    json!("hallucination")
                } else {
                    Value::Null
                }
            };
            events.push(ev("alice", pair, alice, value(alice)));
            events.push(ev("bob", pair, bob, value(bob)));
        }
        events.push(ev("alice", "a5", Op::Accept, Value::Null));
        // Category "b": one conflict, settled by carol.
        events.push(ev("alice", "b1", Op::Reject, Value::Null));
        events.push(ev("bob", "b1", Op::Accept, Value::Null));
        events.push(ev("carol", "b1", Op::Settle, json!("accept")));
        // A decision undone is no decision.
        events.push(ev("bob", "a5", Op::Reject, Value::Null));
        events.push(ev("bob", "a5", Op::Undo, json!("reject")));
        let folded = Folded::new(events);
        let pairs = [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("a4", "a"),
            ("a5", "a"),
            ("a6", "a"),
            ("b1", "b"),
        ];
        let rows = by_category(&folded, pairs);
        assert_eq!(rows.len(), 3);
        let a = &rows[0];
        assert_eq!(
            (a.category.as_str(), a.pairs, a.decided, a.shared, a.agreed),
            ("a", 6, 5, 4, 3)
        );
        assert_eq!((a.open_conflicts, a.settled, a.rater_pairs), (1, 0, 1));
        assert!((a.kappa.unwrap() - 0.5).abs() < 1e-12, "{a:?}");
        let b = &rows[1];
        assert_eq!(
            (b.shared, b.agreed, b.open_conflicts, b.settled),
            (1, 0, 0, 1)
        );
        // One shared pair, both raters constant and different: kappa 0.
        assert_eq!(b.kappa, Some(0.0));
        let all = &rows[2];
        assert_eq!(
            (all.category.as_str(), all.pairs, all.shared, all.agreed),
            (ALL, 7, 5, 3)
        );
        // alice/bob over 5 shared pairs: [[2,1],[1,1]] → po 0.6, pe 0.6*0.6+0.4*0.4 = 0.52.
        assert!((all.kappa.unwrap() - 0.08 / 0.48).abs() < 1e-12, "{all:?}");
    }

    #[test]
    fn three_annotators_average_over_every_two() {
        // p1: all keep; p2: alice and bob reject, carol keeps.
        let events = vec![
            ev("alice", "p1", Op::Accept, Value::Null),
            ev("bob", "p1", Op::Accept, Value::Null),
            ev("carol", "p1", Op::Accept, Value::Null),
            ev("alice", "p2", Op::Reject, Value::Null),
            ev("bob", "p2", Op::Reject, Value::Null),
            ev("carol", "p2", Op::Accept, Value::Null),
        ];
        let rows = by_category(&Folded::new(events), [("p1", "c"), ("p2", "c")]);
        let c = &rows[0];
        assert_eq!((c.shared, c.agreed, c.rater_pairs), (2, 1, 3));
        // alice/bob agree fully (kappa 1); alice/carol and bob/carol: [[1,0],[1,0]]
        // → po 0.5, pe 0.5*1 + 0.5*0 = 0.5, kappa 0. Mean 1/3.
        assert!((c.kappa.unwrap() - 1.0 / 3.0).abs() < 1e-12, "{c:?}");
        let none = by_category(&Folded::default(), [("p1", "c")]);
        assert_eq!((none[0].decided, none[0].kappa), (0, None));
    }
}
