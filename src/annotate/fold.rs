//! Folding the event log into each pair's current state.
//!
//! Rules: events apply in log order. `undo` by annotator A on pair P deactivates A's
//! latest still-active non-undo event on P, so repeated undos walk further back;
//! an undo with nothing left to revert does nothing. The state of P is then the
//! active events applied in order:
//! - `accept` / `reject` set the decision (the last one wins);
//! - `relabel` sets the category and is a decision too: the annotator says the pair
//!   is a real critical step of that category, so it counts as an accept (a later
//!   reject still wins);
//! - `edit_target` sets the corrected target action, `note` adds a note;
//! - each annotator's latest active decision is kept: when one stands by a reject
//!   and another by an accept or relabel, the pair is in conflict — neither wins
//!   silently — until a `settle` (`"accept"` or `"reject"`) decides it;
//! - status: conflict while unsettled; else rejected if the decision is reject;
//!   otherwise edited if the target was corrected; otherwise accepted if accepted;
//!   otherwise pending.

use super::event::{AnnotationEvent, Op};
use crate::action::Action;
use std::collections::{BTreeMap, HashMap};

/// Where a pair stands in review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    #[default]
    Pending,
    Accepted,
    Rejected,
    Edited,
    /// Annotators disagree (an accept or relabel against a reject) and no reviewer
    /// has settled it.
    Conflict,
}

impl Status {
    /// Lower-case name (`pending`, `accepted`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Accepted => "accepted",
            Status::Rejected => "rejected",
            Status::Edited => "edited",
            Status::Conflict => "conflict",
        }
    }
}

/// The current state of one pair after its events.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PairState {
    pub status: Status,
    /// The category set by the latest active relabel (None: as mined).
    pub category: Option<String>,
    /// The corrected target action (None: as mined).
    pub target: Option<Action>,
    pub notes: Vec<String>,
    /// Annotator of the latest active event.
    pub last_annotator: Option<String>,
    /// Each annotator's standing decision (accept, reject or relabel).
    pub decisions: BTreeMap<String, Op>,
    /// Who settled a conflict on this pair, and how (`accept` or `reject`).
    pub settled: Option<(String, Op)>,
}

/// The whole log folded: events plus the state of every pair they touch.
#[derive(Debug, Clone, Default)]
pub struct Folded {
    events: Vec<AnnotationEvent>,
    active: Vec<bool>,
    by_pair: HashMap<String, Vec<usize>>,
    states: HashMap<String, PairState>,
    /// Events that could not be applied (bad value), as `event N: message`.
    problems: BTreeMap<usize, String>,
}

impl Folded {
    /// Folds events given in log order.
    pub fn new(events: Vec<AnnotationEvent>) -> Self {
        let mut f = Folded::default();
        for e in events {
            f.push(e);
        }
        f
    }

    /// Adds one event (already appended to the log) and updates its pair's state.
    pub fn push(&mut self, event: AnnotationEvent) {
        let i = self.events.len();
        let pair = event.pair_id.clone();
        if event.op == Op::Undo
            && let Some(j) = self.last_active_index(&pair, &event.annotator)
        {
            self.active[j] = false;
        }
        self.events.push(event);
        self.active.push(true);
        self.by_pair.entry(pair.clone()).or_default().push(i);
        self.recompute(&pair);
    }

    fn last_active_index(&self, pair: &str, annotator: &str) -> Option<usize> {
        self.by_pair.get(pair)?.iter().rev().copied().find(|&j| {
            self.active[j] && self.events[j].op != Op::Undo && self.events[j].annotator == annotator
        })
    }

    /// The latest still-active non-undo event of `annotator` on `pair`: what `undo`
    /// would revert.
    pub fn last_active(&self, pair: &str, annotator: &str) -> Option<&AnnotationEvent> {
        self.last_active_index(pair, annotator)
            .map(|j| &self.events[j])
    }

    fn recompute(&mut self, pair: &str) {
        let mut st = PairState::default();
        let mut decision = None;
        for &j in self
            .by_pair
            .get(pair)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if !self.active[j] || self.events[j].op == Op::Undo {
                continue;
            }
            let e = &self.events[j];
            match e.op {
                Op::Accept | Op::Reject => {
                    decision = Some(e.op);
                    st.decisions.insert(e.annotator.clone(), e.op);
                }
                Op::Settle => match e.value.as_str() {
                    Some("accept") => st.settled = Some((e.annotator.clone(), Op::Accept)),
                    Some("reject") => st.settled = Some((e.annotator.clone(), Op::Reject)),
                    _ => {
                        self.problems.insert(
                            j,
                            format!(
                                "event {} (pair {pair}): settle value is not \"accept\" or \"reject\"",
                                j + 1
                            ),
                        );
                    }
                },
                Op::Relabel => match e.value.as_str() {
                    Some(c) if !c.trim().is_empty() => {
                        st.category = Some(c.to_string());
                        decision = Some(Op::Accept);
                        st.decisions.insert(e.annotator.clone(), Op::Relabel);
                    }
                    _ => {
                        self.problems.insert(
                            j,
                            format!(
                                "event {} (pair {pair}): relabel value is not a category name",
                                j + 1
                            ),
                        );
                    }
                },
                Op::EditTarget => match edited_target(&e.value) {
                    Ok(a) => st.target = Some(a),
                    Err(why) => {
                        self.problems
                            .insert(j, format!("event {} (pair {pair}): {why}", j + 1));
                    }
                },
                Op::Note => st.notes.push(match &e.value {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
                Op::Undo => {}
            }
            st.last_annotator = Some(e.annotator.clone());
        }
        st.status = status_of(&st, decision);
        self.states.insert(pair.to_string(), st);
    }

    /// The decision `annotator` stands by on `pair`: the op of their latest active
    /// accept, reject or (applicable) relabel, as folded into the pair's state
    /// (None: they have not decided it).
    pub fn decision_of(&self, pair: &str, annotator: &str) -> Option<Op> {
        self.states.get(pair)?.decisions.get(annotator).copied()
    }

    /// The current state of a pair (pending when it has no events).
    pub fn state(&self, pair: &str) -> PairState {
        self.states.get(pair).cloned().unwrap_or_default()
    }

    /// How many pairs are in conflict now, and how many conflicts a reviewer settled.
    pub fn conflicts(&self) -> (usize, usize) {
        let open = self
            .states
            .values()
            .filter(|s| s.status == Status::Conflict)
            .count();
        let settled = self.states.values().filter(|s| s.settled.is_some()).count();
        (open, settled)
    }

    /// The current status of a pair.
    pub fn status(&self, pair: &str) -> Status {
        self.states.get(pair).map(|s| s.status).unwrap_or_default()
    }

    /// Every event, in log order.
    pub fn events(&self) -> &[AnnotationEvent] {
        &self.events
    }

    /// Events whose value could not be applied.
    pub fn problems(&self) -> Vec<&str> {
        self.problems.values().map(String::as_str).collect()
    }

    /// Events whose value could not be applied, with their position in the log (0-based).
    pub fn problem_events(&self) -> Vec<(usize, String)> {
        self.problems.iter().map(|(k, m)| (*k, m.clone())).collect()
    }
}

/// The action an `edit_target` event sets, checked; or why it sets none.
fn edited_target(value: &serde_json::Value) -> Result<Action, String> {
    let a = serde_json::from_value::<Action>(value.clone())
        .map_err(|err| format!("edit_target value is not an action: {err}"))?;
    crate::action::check::check_params(&a)
        .map_err(|bad| format!("edit_target `{}`: {}: {}", a.name, bad.key, bad.message))?;
    Ok(a)
}

/// A pair's status from its folded decisions: a conflict until settled, else the
/// settled or latest decision, an edited target counting as accepted.
fn status_of(st: &PairState, latest: Option<Op>) -> Status {
    let rejects = st.decisions.values().filter(|&&o| o == Op::Reject).count();
    let conflict = rejects > 0 && rejects < st.decisions.len();
    let decision = match &st.settled {
        Some((_, op)) => Some(*op),
        None => latest,
    };
    match (decision, st.target.is_some()) {
        _ if conflict && st.settled.is_none() => Status::Conflict,
        (Some(Op::Reject), _) => Status::Rejected,
        (_, true) => Status::Edited,
        (Some(Op::Accept), false) => Status::Accepted,
        _ => Status::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ev(who: &str, pair: &str, op: Op, value: Value) -> AnnotationEvent {
        AnnotationEvent::now(who, pair, op, value, Value::Null)
    }

    #[test]
    fn decisions_edits_and_labels_fold_in_order() {
        let f = Folded::new(vec![
            ev("ann", "p1", Op::Accept, Value::Null),
            ev("ann", "p2", Op::Reject, Value::Null),
            ev("ann", "p3", Op::Relabel, json!("premature_done")),
            ev(
                "ann",
                "p4",
                Op::EditTarget,
                json!({"name": "click", "params": {"index": 3}}),
            ),
            ev("ann", "p4", Op::Note, json!("index 3 is the real button")),
        ]);
        assert_eq!(f.status("p1"), Status::Accepted);
        assert_eq!(f.status("p2"), Status::Rejected);
        assert_eq!(f.status("p3"), Status::Accepted, "a relabel is a decision");
        assert_eq!(f.state("p3").category.as_deref(), Some("premature_done"));
        let p4 = f.state("p4");
        assert_eq!(p4.status, Status::Edited);
        assert_eq!(p4.target.unwrap().int_param("index"), Some(3));
        assert_eq!(p4.notes, vec!["index 3 is the real button".to_string()]);
        assert_eq!(f.status("unseen"), Status::Pending);
    }

    #[test]
    fn repeated_undo_walks_back_only_the_annotators_own_events() {
        let mut f = Folded::new(vec![
            ev("a", "p", Op::Relabel, json!("loop_stall")),
            ev("b", "p", Op::Note, json!("b's note")),
            ev("a", "p", Op::Accept, Value::Null),
            ev("a", "p", Op::Reject, Value::Null),
        ]);
        assert_eq!(f.status("p"), Status::Rejected);
        f.push(ev("a", "p", Op::Undo, Value::Null));
        assert_eq!(f.status("p"), Status::Accepted);
        f.push(ev("a", "p", Op::Undo, Value::Null));
        // The relabel left is a's decision still.
        assert_eq!(f.status("p"), Status::Accepted);
        assert_eq!(f.state("p").category.as_deref(), Some("loop_stall"));
        f.push(ev("a", "p", Op::Undo, Value::Null));
        let s = f.state("p");
        assert_eq!(s.status, Status::Pending);
        assert_eq!(s.category, None);
        assert_eq!(
            s.notes,
            vec!["b's note".to_string()],
            "b's event is not a's to undo"
        );
        // Nothing of a's left: a further undo changes nothing.
        f.push(ev("a", "p", Op::Undo, Value::Null));
        assert_eq!(f.state("p").notes.len(), 1);
    }

    #[test]
    fn a_relabel_accepts_until_a_later_reject_and_each_annotator_has_a_decision() {
        let mut f = Folded::new(vec![
            ev("a", "p", Op::Reject, Value::Null),
            ev("a", "p", Op::Relabel, json!("loop_stall")),
        ]);
        assert_eq!(f.status("p"), Status::Accepted);
        assert_eq!(f.decision_of("p", "a"), Some(Op::Relabel));
        assert_eq!(f.decision_of("p", "b"), None);
        f.push(ev("b", "p", Op::Reject, Value::Null));
        assert_eq!(
            f.status("p"),
            Status::Conflict,
            "a's relabel against b's reject"
        );
        assert_eq!(f.decision_of("p", "b"), Some(Op::Reject));
        f.push(ev("b", "p", Op::Undo, Value::Null));
        assert_eq!(f.decision_of("p", "b"), None);
        assert_eq!(f.status("p"), Status::Accepted);
    }

    #[test]
    fn disagreeing_annotators_conflict_until_a_reviewer_settles() {
        let mut f = Folded::new(vec![
            ev("alice", "p", Op::Accept, Value::Null),
            ev("bob", "p", Op::Reject, Value::Null),
        ]);
        assert_eq!(f.status("p"), Status::Conflict, "bob's reject does not win");
        assert_eq!(f.conflicts(), (1, 0));
        // Bob takes his reject back: alice's accept stands alone.
        f.push(ev("bob", "p", Op::Undo, Value::Null));
        assert_eq!(f.status("p"), Status::Accepted);
        // A relabel against a reject is a conflict too.
        f.push(ev("bob", "p", Op::Reject, Value::Null));
        f.push(ev("alice", "p", Op::Relabel, json!("loop_stall")));
        assert_eq!(f.status("p"), Status::Conflict);
        f.push(ev("carol", "p", Op::Settle, json!("reject")));
        let s = f.state("p");
        assert_eq!(s.status, Status::Rejected);
        assert_eq!(s.settled, Some(("carol".to_string(), Op::Reject)));
        assert_eq!(f.conflicts(), (0, 1));
        f.push(ev("carol", "p", Op::Undo, Value::Null));
        assert_eq!(f.status("p"), Status::Conflict);
        // Agreeing annotators are no conflict.
        let f = Folded::new(vec![
            ev("alice", "q", Op::Reject, Value::Null),
            ev("bob", "q", Op::Reject, Value::Null),
        ]);
        assert_eq!(f.status("q"), Status::Rejected);
        let f = Folded::new(vec![ev("carol", "r", Op::Settle, json!("maybe"))]);
        assert!(f.problems().iter().any(|p| p.contains("settle value")));
    }

    #[test]
    fn bad_values_are_reported_not_applied() {
        let f = Folded::new(vec![
            ev("a", "p", Op::EditTarget, json!("click 3")),
            ev("a", "p", Op::Relabel, json!(5)),
        ]);
        assert_eq!(f.status("p"), Status::Pending);
        assert!(f.problems().iter().any(|p| p.contains("edit_target")));
        assert!(f.problems().iter().any(|p| p.contains("relabel")));
    }
}
