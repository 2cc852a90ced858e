//! Contrast between the two sides of a candidate (ALGORITHMS.md §4.4): one minus the
//! reward the loc action would earn against the verified success action in the
//! success-side state, through [`crate::reward::score_action`].

use super::align::StateView;
use crate::action::Action;
use crate::reward::{Decision, RewardConfig, score_action};
use crate::trajectory::Element;
use serde_json::Value;

/// The contrast of a candidate and the rubric decision behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Contrast {
    /// `1 − reward`, in 0..=1.
    pub value: f64,
    pub decision: Decision,
}

/// Rewrites the element index of a loc action into the success state's numbering:
/// element indices are per page render, so the loc element is looked up by its
/// signature in the success state. When the success state has no such element the
/// action is left as it is (it names another element, which is the contrast).
pub fn translate_index(loc_action: &Action, loc: &StateView, success: &StateView) -> Action {
    let Some(idx) = loc_action.target_index() else {
        return loc_action.clone();
    };
    let Some((sig, _)) = loc.element(idx) else {
        return loc_action.clone();
    };
    match success.index_of_signature(sig) {
        Some(mapped) if i64::from(mapped) != idx => {
            let mut a = loc_action.clone();
            a.params.insert("index".into(), Value::from(mapped));
            a
        }
        _ => loc_action.clone(),
    }
}

/// Scores the (translated) loc action against the target in the success state.
pub fn contrast(
    target: &Action,
    loc_action: &Action,
    success_elements: &[Element],
    loc: &StateView,
    success: &StateView,
    cfg: &RewardConfig,
) -> Contrast {
    let cand = translate_index(loc_action, loc, success);
    let decision = score_action(&cand, target, success_elements, cfg);
    Contrast {
        value: (1.0 - decision.score).clamp(0.0, 1.0),
        decision,
    }
}

/// Why a candidate with a positive contrast is still not a failure-mode divergence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uninformative {
    /// Both sides search and only the query wording differs.
    SearchWordingOnly,
    /// One side is a wait, scroll or go_back.
    TrivialAction,
}

/// Flags differences that teach nothing: search wording, or a wait/scroll/go_back on
/// either side (ALGORITHMS.md §4.4).
pub fn uninformative(target: &Action, loc_action: &Action) -> Option<Uninformative> {
    if target.name == "search" && loc_action.name == "search" {
        Some(Uninformative::SearchWordingOnly)
    } else if target.is_trivial() || loc_action.is_trivial() {
        Some(Uninformative::TrivialAction)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::State;
    use serde_json::json;

    fn state(els: &[(u32, &str)]) -> State {
        State {
            elements: els
                .iter()
                .map(|(i, t)| Element {
                    index: *i,
                    tag: "button".into(),
                    text: (*t).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn identical_action_has_no_contrast_and_other_type_full() {
        let s = state(&[(1, "ok")]);
        let v = StateView::new(&s, 0.0);
        let cfg = RewardConfig::default();
        let click = Action::new("click", json!({"index": 1}));
        assert_eq!(
            contrast(&click, &click, &s.elements, &v, &v, &cfg).value,
            0.0
        );
        let done = Action::new("done", json!({"text": "x", "success": true}));
        assert_eq!(
            contrast(&click, &done, &s.elements, &v, &v, &cfg).value,
            1.0
        );
    }

    #[test]
    fn same_element_under_another_index_is_no_contrast() {
        let succ = state(&[(1, "ok"), (2, "cancel")]);
        let loc = state(&[(41, "cancel"), (42, "ok")]);
        let (sv, lv) = (StateView::new(&succ, 0.0), StateView::new(&loc, 0.0));
        let cfg = RewardConfig::default();
        let target = Action::new("click", json!({"index": 1}));
        let same = Action::new("click", json!({"index": 42}));
        assert_eq!(
            contrast(&target, &same, &succ.elements, &lv, &sv, &cfg).value,
            0.0
        );
        let other = Action::new("click", json!({"index": 41}));
        assert!(contrast(&target, &other, &succ.elements, &lv, &sv, &cfg).value > 0.0);
    }

    #[test]
    fn search_and_trivial_are_uninformative() {
        let s1 = Action::new("search", json!({"query": "cheap flights"}));
        let s2 = Action::new("search", json!({"query": "flights cheap today"}));
        assert_eq!(
            uninformative(&s1, &s2),
            Some(Uninformative::SearchWordingOnly)
        );
        let w = Action::new("wait", json!({"seconds": 2}));
        let c = Action::new("click", json!({"index": 2}));
        assert_eq!(uninformative(&c, &w), Some(Uninformative::TrivialAction));
        assert_eq!(uninformative(&c, &s1), None);
    }
}
