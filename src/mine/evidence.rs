//! Evidence (ALGORITHMS.md §4.5): category-specific rules over a ±window around the
//! candidate that show the loc side exhibits the failure mode and the success side
//! avoids it. The rule score (0..=1) is multiplied by the label confidence.

use super::heuristic::{
    action_at, find_loop, is_constraint_action, same_control_other_value, step_obstructed,
};
use super::label::LabelInput;
use std::ops::RangeInclusive;

/// Evidence for a candidate: the value in 0..=1 and the findings behind it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evidence {
    /// Rule score × label confidence.
    pub value: f64,
    /// The rule score alone.
    pub rule_score: f64,
    pub findings: Vec<String>,
}

fn window(center: usize, w: usize, len: usize) -> RangeInclusive<usize> {
    center.saturating_sub(w)..=(center + w).min(len.saturating_sub(1))
}

/// Scores the evidence that `category` happened at loc step `j` against success step `i`.
// Kept whole: the eight categories' rules side by side, in ALGORITHMS.md §4.5's order,
// so their conditions and weights are compared at a glance.
pub fn evidence(
    category: &str,
    confidence: f64,
    input: &LabelInput,
    i: usize,
    j: usize,
    w: usize,
) -> Evidence {
    let (s, l) = (input.success, input.loc);
    let sw = window(i, w, s.steps.len());
    let lw = window(j, w, l.steps.len());
    let sa = action_at(s, i);
    let la = action_at(l, j);
    let mut score = 0.0;
    let mut f = Vec::new();
    let mut hit = |cond: bool, weight: f64, msg: String, f: &mut Vec<String>| {
        if cond {
            score += weight;
            f.push(msg);
        }
    };
    match category {
        "wrong_element" => {
            let sid = sa
                .and_then(|a| a.target_index())
                .and_then(|x| input.success_views[i].element(x));
            let lid = la
                .and_then(|a| a.target_index())
                .and_then(|x| input.loc_views[j].element(x));
            let differs = match (sid, lid) {
                (Some(a), Some(b)) => a.1 != b.1,
                (Some(_), None) => la.is_some(),
                _ => false,
            };
            hit(
                differs,
                0.5,
                "loc acts on another element than the success".into(),
                &mut f,
            );
            let available = sid.is_some_and(|(sig, _)| input.loc_views[j].dom.contains(&sig));
            hit(
                available,
                0.5,
                "the success's element was on the loc page too".into(),
                &mut f,
            );
        }
        "wrong_input_value" => {
            if same_control_other_value(input, i, j) {
                hit(true, 1.0, "same control, other value".into(), &mut f);
            } else {
                let typed = |a: Option<&crate::action::Action>| {
                    a.is_some_and(|a| matches!(a.name.as_str(), "input" | "select_dropdown"))
                };
                hit(
                    typed(sa) && typed(la),
                    0.5,
                    "both sides type a value".into(),
                    &mut f,
                );
            }
        }
        "missed_constraint" => {
            hit(
                sa.is_some_and(|a| is_constraint_action(a, s, i)),
                0.5,
                "the success sets a filter/sort/date/option control".into(),
                &mut f,
            );
            let sid = sa
                .and_then(|a| a.target_index())
                .and_then(|x| input.success_views[i].element(x))
                .map(|e| e.1);
            let loc_sets_it = lw.clone().any(|k| {
                action_at(l, k)
                    .and_then(|a| a.target_index())
                    .and_then(|x| input.loc_views[k].element(x))
                    .is_some_and(|e| Some(e.1) == sid)
            });
            hit(
                sid.is_some() && !loc_sets_it,
                0.5,
                "loc never sets that control nearby".into(),
                &mut f,
            );
        }
        "premature_done" => {
            hit(
                la.is_some_and(|a| a.name == "done"),
                0.6,
                "loc declares done here".into(),
                &mut f,
            );
            hit(
                !sw.clone()
                    .filter(|&k| k >= i)
                    .any(|k| action_at(s, k).is_some_and(|a| a.name == "done")),
                0.4,
                "the success still has work to do".into(),
                &mut f,
            );
        }
        "navigation_detour" => {
            let s_urls: Vec<&str> = sw
                .clone()
                .map(|k| input.success_views[k].url.full.as_str())
                .collect();
            hit(
                lw.clone()
                    .filter(|&k| k >= j)
                    .any(|k| !s_urls.contains(&input.loc_views[k].url.full.as_str())),
                0.5,
                "loc visits pages the success does not".into(),
                &mut f,
            );
            hit(
                l.steps.len() > s.steps.len(),
                0.5,
                format!(
                    "loc is longer ({} vs {} steps)",
                    l.steps.len(),
                    s.steps.len()
                ),
                &mut f,
            );
        }
        "loop_stall" => {
            let lr = *lw.start()..*lw.end() + 1;
            let sr = *sw.start()..*sw.end() + 1;
            hit(
                find_loop(l, input.loc_views, lr).is_some(),
                0.6,
                "loc repeats itself around this step".into(),
                &mut f,
            );
            hit(
                find_loop(s, input.success_views, sr).is_none(),
                0.4,
                "the success does not".into(),
                &mut f,
            );
        }
        "extraction_error" => {
            let answers = |a: Option<&crate::action::Action>| {
                a.is_some_and(|a| matches!(a.name.as_str(), "extract" | "done"))
            };
            hit(
                answers(la) && la != sa,
                0.5,
                "loc extracts or answers differently".into(),
                &mut f,
            );
            hit(
                sw.clone().any(|k| answers(action_at(s, k))),
                0.5,
                "the success extracts or answers nearby".into(),
                &mut f,
            );
        }
        "technical_obstruction" => {
            hit(
                lw.clone().any(|k| step_obstructed(l, k)),
                0.6,
                "loc meets an error, block page or timeout nearby".into(),
                &mut f,
            );
            hit(
                !sw.clone().any(|k| step_obstructed(s, k)),
                0.4,
                "the success does not".into(),
                &mut f,
            );
        }
        other => f.push(format!("no evidence rule for category `{other}`")),
    }
    let rule_score: f64 = score.min(1.0);
    Evidence {
        value: (rule_score * confidence).clamp(0.0, 1.0),
        rule_score,
        findings: f,
    }
}
