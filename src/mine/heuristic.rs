//! The heuristic failure-mode labeller (ALGORITHMS.md §4.2, used when no LLM judge
//! is configured or the judge fails), and the trajectory helpers the evidence rules
//! share.
//!
//! The rules look at the *decisive divergence* ([`decisive_divergence`]): walking the
//! failed attempt from its start, the last step at which it stands in a state the
//! success passes through (same URL, nearly the same elements) and does something
//! the success does not do there. Harmless detours (a scroll, a wait, a misclick that
//! leaves the page as it was) do not end the walk, so a loc that scrolls first and
//! then declares done with the right option selected is a `premature_done`, not a
//! `missed_constraint` (the index-by-index comparison this replaces compared the
//! scroll with the success's first action). A divergence that leaves the success's
//! states for good is the last one the walk sees, so a wrong password stays a
//! `wrong_input_value` even when the attempt declares done later.
//!
//! The rules in order: an obstruction (captcha, block page, timeout, crash) the
//! success does not meet; a stalled loop at a state on the success's route; a detour
//! pair; then the divergence: `done` against more work (a `missed_constraint` when the
//! skipped step sets a filter/sort/date control the loc never sets, else
//! `premature_done`), the same control with another value, an extraction, leaving
//! the route (`navigate`, `go_back`), skipping a constraint control, another element.
//! Without a divergence in aligned states the first index-wise difference is used.

use super::align::{StateView, jaccard};
use super::config::MineConfig;
use super::contrast::translate_index;
use super::label::{Judge, Label, LabelInput};
use super::pair::{LabelSource, PairKind};
use crate::action::Action;
use crate::trajectory::{Element, Trajectory};
use anyhow::Result;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Rule-based labels over the two trajectories.
pub struct HeuristicJudge;

impl Judge for HeuristicJudge {
    fn label(&self, input: &LabelInput, cfg: &MineConfig) -> Result<Label> {
        Ok(heuristic_label(input, cfg))
    }
}

const OBSTRUCTION_WORDS: &[&str] = &[
    "captcha",
    "access denied",
    "blocked",
    "403 forbidden",
    "too many requests",
    "verify you are human",
    "timeout",
    "timed out",
    "crash",
    "net::err",
];

/// Words that make a control a constraint (a filter, sort, date or range the task
/// asks for). Plain checkboxes, radios and options are not: they are often the task
/// itself (pick this item), where another pick is a wrong element.
const CONSTRAINT_WORDS: &[&str] = &[
    "filter",
    "filters",
    "sort",
    "sorted",
    "date",
    "minimum",
    "maximum",
    "min",
    "max",
    "price",
    "range",
    "newest",
    "oldest",
    "latest",
    "lowest",
    "highest",
    "cheapest",
    "ascending",
    "descending",
    "nonstop",
    "labels",
];

/// Whether a text mentions a technical obstruction.
pub fn mentions_obstruction(text: &str) -> bool {
    let t = text.to_lowercase();
    OBSTRUCTION_WORDS.iter().any(|w| t.contains(w))
}

/// Whether a step of the trajectory shows an obstruction: an action error, title or
/// URL naming a block page, captcha, crash or timeout. (An error such as "element
/// not clickable" is the agent's, not the site's.)
pub fn step_obstructed(t: &Trajectory, k: usize) -> bool {
    let Some(s) = t.steps.get(k) else {
        return false;
    };
    s.result
        .iter()
        .any(|r| r.error.as_deref().is_some_and(mentions_obstruction))
        || mentions_obstruction(&s.state.title)
        || mentions_obstruction(&s.state.url)
}

/// The first action of step `k`.
pub fn action_at(t: &Trajectory, k: usize) -> Option<&Action> {
    t.steps.get(k).and_then(|s| s.output.actions.first())
}

/// Whether two steps do the same thing on the same page (element references are
/// compared through signatures, not indices; two `done`s with the same text are the
/// same move whatever success they claim).
pub fn same_move(a: Option<&Action>, av: &StateView, b: Option<&Action>, bv: &StateView) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a.name == "done" && b.name == "done" => {
            av.url.full == bv.url.full && a.str_param("text") == b.str_param("text")
        }
        (Some(a), Some(b)) => av.url.full == bv.url.full && translate_index(b, bv, av) == *a,
        _ => false,
    }
}

/// Two states are the same state: same normalized URL and (nearly) the same
/// elements, values and check marks included. One changed element in 33 is a
/// different state; one in 66 or more passes (pages with a live element).
pub fn same_state(a: &StateView, b: &StateView) -> bool {
    a.url.full == b.url.full && jaccard(&a.dom, &b.dom) >= 0.97
}

/// A hash of a state (URL and element signatures), for loop detection.
pub fn state_key(v: &StateView) -> u64 {
    let mut h = DefaultHasher::new();
    v.url.full.hash(&mut h);
    v.dom.hash(&mut h);
    h.finish()
}

/// The first step at which the two trajectories stop doing the same thing,
/// comparing step k with step k.
pub fn first_divergence(input: &LabelInput) -> usize {
    let n = input.success.steps.len().min(input.loc.steps.len());
    (0..n)
        .find(|&k| {
            !same_move(
                action_at(input.success, k),
                &input.success_views[k],
                action_at(input.loc, k),
                &input.loc_views[k],
            )
        })
        .unwrap_or(n)
}

/// A step of each side where they part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divergence {
    pub success_step: usize,
    pub loc_step: usize,
}

/// The decisive divergence (see the module docs): the last loc step in a state the
/// success passes through (at or after the success step the loc has reached) whose
/// action differs from the success's next non-trivial action there. Trivial loc
/// actions (scroll, wait, go_back) in such a state are not divergences. A final
/// answer that differs (both sides `done`) is decisive only when nothing diverged
/// before it: after an earlier divergence a different answer is its consequence.
///
/// Pages do not always show what was typed or clicked, so the success may pass
/// through one state for several steps; the loc is taken to be at the step of that
/// run whose action it repeats, or failing that whose action type it takes.
pub fn decisive_divergence(input: &LabelInput) -> Option<Divergence> {
    let (s, l) = (input.success, input.loc);
    let (sv, lv) = (input.success_views, input.loc_views);
    let n = s.steps.len().min(sv.len());
    let mut at = 0usize;
    let mut found: Vec<Divergence> = Vec::new();
    for (j, lvj) in lv.iter().enumerate().take(l.steps.len()) {
        let Some(la) = action_at(l, j) else { continue };
        let Some(mut i) = (at..n).find(|&i| same_state(&sv[i], lvj)) else {
            continue; // off the success's route here
        };
        // Skip the success's own scrolls and waits in this state.
        while action_at(s, i).is_some_and(Action::is_trivial)
            && i + 1 < n
            && same_state(&sv[i + 1], lvj)
        {
            i += 1;
        }
        let run: Vec<usize> = (i + 1..n)
            .take_while(|&k| same_state(&sv[k], lvj))
            .collect();
        if same_move(action_at(s, i), &sv[i], Some(la), lvj) {
            at = i + 1;
        } else if let Some(&k) = run
            .iter()
            .find(|&&k| same_move(action_at(s, k), &sv[k], Some(la), lvj))
        {
            at = k + 1;
        } else {
            let same_kind = |k: &usize| action_at(s, *k).is_some_and(|a| a.name == la.name);
            let k = if action_at(s, i).is_some_and(|a| a.name == la.name) {
                i
            } else {
                run.iter().copied().find(same_kind).unwrap_or(i)
            };
            at = k;
            if !la.is_trivial() {
                found.push(Divergence {
                    success_step: k,
                    loc_step: j,
                });
            }
        }
    }
    let answers = |d: &Divergence| {
        action_at(s, d.success_step).is_some_and(|a| a.name == "done")
            && action_at(l, d.loc_step).is_some_and(|a| a.name == "done")
    };
    match found.as_slice() {
        [.., before, last] if answers(last) => Some(*before),
        [.., last] => Some(*last),
        [] => None,
    }
}

/// A stalled loop in steps `range`: the same action in the same state three times
/// within five steps (waits or other tries in between), or an A-B-A-B cycle of
/// states and actions. Returns the step where it starts.
pub fn find_loop(
    t: &Trajectory,
    views: &[StateView],
    range: std::ops::Range<usize>,
) -> Option<usize> {
    let key =
        |k: usize| -> Option<(u64, &Action)> { Some((state_key(views.get(k)?), action_at(t, k)?)) };
    let end = range.end.min(t.steps.len());
    for k in range.start..end {
        if let Some(a) = key(k) {
            let repeats = (k..(k + 5).min(end))
                .filter(|&m| key(m).as_ref() == Some(&a))
                .count();
            if repeats >= 3 {
                return Some(k);
            }
        }
        if k + 3 < end {
            let (a, b, c, d) = (key(k), key(k + 1), key(k + 2), key(k + 3));
            if a.is_some() && a != b && a == c && b == d {
                return Some(k);
            }
        }
    }
    None
}

fn element_words(e: &Element) -> String {
    let mut hay = format!("{} {}", e.text, e.role).to_lowercase();
    for k in ["type", "name", "id", "aria-label", "placeholder"] {
        if let Some(v) = e.attrs.get(k) {
            hay.push(' ');
            hay.push_str(&v.to_lowercase());
        }
    }
    hay
}

/// Whether an element looks like a constraint control: its text or key attributes
/// name a filter, sort, date, price, range... (see `CONSTRAINT_WORDS`).
pub fn is_constraint_element(e: &Element) -> bool {
    element_words(e)
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| CONSTRAINT_WORDS.contains(&w))
}

/// The element action `a` targets at step `k` of `t`.
pub fn target_element<'a>(a: &Action, t: &'a Trajectory, k: usize) -> Option<&'a Element> {
    t.steps.get(k)?.state.element(a.target_index()?)
}

/// Whether the element an action targets is a constraint control (or the action
/// picks a sort or filter option by name).
pub fn is_constraint_action(a: &Action, t: &Trajectory, k: usize) -> bool {
    target_element(a, t, k).is_some_and(is_constraint_element)
}

/// Whether both actions type into (or pick from) the same control with other text.
pub fn same_control_other_value(input: &LabelInput, i: usize, j: usize) -> bool {
    let (Some(sa), Some(la)) = (action_at(input.success, i), action_at(input.loc, j)) else {
        return false;
    };
    let typed = |a: &Action| matches!(a.name.as_str(), "input" | "select_dropdown");
    if !typed(sa) || sa.name != la.name || sa.str_param("text") == la.str_param("text") {
        return false;
    }
    let sid = sa
        .target_index()
        .and_then(|x| input.success_views.get(i)?.element(x));
    let lid = la
        .target_index()
        .and_then(|x| input.loc_views.get(j)?.element(x));
    match (sid, lid) {
        (Some((_, a)), Some((_, b))) => a == b,
        _ => sa.target_index() == la.target_index(),
    }
}

/// Whether the loc ever acts on the control (same identity, whatever its value)
/// that success step `i` acts on.
pub fn loc_sets_control(input: &LabelInput, i: usize) -> bool {
    let Some(id) = action_at(input.success, i)
        .and_then(|a| a.target_index())
        .and_then(|x| input.success_views.get(i)?.element(x))
        .map(|e| e.1)
    else {
        return false;
    };
    (0..input.loc.steps.len()).any(|k| {
        action_at(input.loc, k)
            .and_then(|a| a.target_index())
            .and_then(|x| input.loc_views.get(k)?.element(x))
            .is_some_and(|e| e.1 == id)
    })
}

fn label(category: &str, confidence: f64, note: String) -> Label {
    Label {
        category: category.into(),
        confidence,
        source: LabelSource::Heuristic,
        notes: vec![note],
    }
}

/// The heuristic rules (see the module docs).
pub fn heuristic_label(input: &LabelInput, cfg: &MineConfig) -> Label {
    let l = heuristic_rules(input);
    if cfg.knows(&l.category) {
        return l;
    }
    let mut fallback = label(
        &cfg.taxonomy[0],
        0.3,
        format!("rule said `{}`, which the taxonomy lacks", l.category),
    );
    fallback.notes.extend(l.notes);
    fallback
}

fn heuristic_rules(input: &LabelInput) -> Label {
    let (s, l) = (input.success, input.loc);
    if let Some(k) = (0..l.steps.len()).find(|&k| step_obstructed(l, k))
        && !(0..s.steps.len()).any(|k| step_obstructed(s, k))
    {
        return label(
            "technical_obstruction",
            0.85,
            format!("loc step {k} shows an error, block page, captcha or timeout"),
        );
    }
    let divergence = decisive_divergence(input);
    if let Some(k) = find_loop(l, input.loc_views, 0..l.steps.len())
        && find_loop(s, input.success_views, 0..s.steps.len()).is_none()
    {
        // A loop where the success also stands is the failure; a loop after the loc
        // has left the route is a consequence of the divergence before it.
        let on_route = (0..s.steps.len().min(input.success_views.len()))
            .any(|i| same_state(&input.success_views[i], &input.loc_views[k]));
        if on_route || divergence.is_none_or(|d| d.loc_step >= k) {
            return label(
                "loop_stall",
                0.85,
                format!("loc repeats the same action in the same state from step {k}"),
            );
        }
    }
    if input.kind == PairKind::Detour {
        return label(
            "navigation_detour",
            0.8,
            format!(
                "the success took {} steps where the shortest took {}",
                l.steps.len(),
                s.steps.len()
            ),
        );
    }
    match divergence {
        Some(d) => classify(input, d),
        None => index_wise(input),
    }
}

/// Labels the decisive divergence.
// Kept whole: the rules are a ladder tried in priority order, the first that fits
// labels; split, the order would no longer read top to bottom.
fn classify(input: &LabelInput, d: Divergence) -> Label {
    let (s, l) = (input.success, input.loc);
    let (i, j) = (d.success_step, d.loc_step);
    let (Some(sa), Some(la)) = (action_at(s, i), action_at(l, j)) else {
        return index_wise(input);
    };
    let at = format!("loc step {j} (success step {i})");
    let constraint = is_constraint_action(sa, s, i) && !loc_sets_control(input, i);
    if la.name == "done" && sa.name == "done" {
        return label(
            "extraction_error",
            0.7,
            format!("{at}: both answer in the same state; the answers differ"),
        );
    }
    if la.name == "done" {
        return if constraint {
            label(
                "missed_constraint",
                0.65,
                format!(
                    "{at}: loc answers where the success still sets a filter/sort/date control ({}) it never sets",
                    sa.short()
                ),
            )
        } else {
            label(
                "premature_done",
                0.8,
                format!(
                    "{at}: loc declares done where the success goes on with {}",
                    sa.short()
                ),
            )
        };
    }
    if same_control_other_value(input, i, j) {
        return label(
            "wrong_input_value",
            0.8,
            format!("{at}: same control, other value"),
        );
    }
    if sa.name == "extract" || la.name == "extract" {
        return label(
            "extraction_error",
            0.6,
            format!("{at}: the two sides extract differently"),
        );
    }
    if matches!(la.name.as_str(), "navigate" | "go_back" | "search")
        && !matches!(sa.name.as_str(), "navigate" | "go_back" | "search")
    {
        return label(
            "navigation_detour",
            0.6,
            format!(
                "{at}: loc leaves the page ({}) instead of acting on it",
                la.name
            ),
        );
    }
    let loc_on_constraint = is_constraint_action(la, l, j);
    if constraint && !loc_on_constraint {
        return label(
            "missed_constraint",
            0.65,
            format!(
                "{at}: the success sets a filter/sort/date control ({}) that loc skips",
                sa.short()
            ),
        );
    }
    if sa.target_index().is_some() && la.target_index().is_some() {
        return label(
            "wrong_element",
            0.7,
            format!("{at}: loc acts on another element"),
        );
    }
    label(
        "wrong_element",
        0.4,
        format!("{at}: the actions differ (no more specific rule)"),
    )
}

/// The rules on the first index-wise difference (no aligned divergence found).
fn index_wise(input: &LabelInput) -> Label {
    let (s, l) = (input.success, input.loc);
    let k = first_divergence(input);
    match (action_at(s, k), action_at(l, k)) {
        (Some(sa), Some(la)) if la.name == "done" && sa.name != "done" => label(
            "premature_done",
            0.6,
            format!(
                "step {k}: loc ends with done where the success goes on with {}",
                sa.short()
            ),
        ),
        (Some(_), Some(_)) if same_control_other_value(input, k, k) => label(
            "wrong_input_value",
            0.6,
            format!("step {k}: same control, other value"),
        ),
        (Some(sa), Some(la))
            if matches!(la.name.as_str(), "navigate" | "go_back")
                && !matches!(sa.name.as_str(), "navigate" | "go_back") =>
        {
            label(
                "navigation_detour",
                0.5,
                format!("step {k}: loc navigates away instead of acting on the page"),
            )
        }
        (Some(sa), Some(la)) if sa.name == "extract" || la.name == "extract" => label(
            "extraction_error",
            0.5,
            format!("step {k}: the two sides extract differently"),
        ),
        (Some(sa), Some(la)) if sa.target_index().is_some() && la.target_index().is_some() => {
            label(
                "wrong_element",
                0.5,
                format!("step {k}: loc acts on another element"),
            )
        }
        (None, None) if k >= s.steps.len() && k >= l.steps.len() => label(
            "extraction_error",
            0.5,
            "same actions throughout; the final answer differs".into(),
        ),
        (Some(sa), None) if sa.name != "done" => label(
            "premature_done",
            0.5,
            format!("loc stops after {k} steps where the success goes on"),
        ),
        _ => label(
            "wrong_element",
            0.4,
            format!("step {k}: the actions differ (no more specific rule)"),
        ),
    }
}
