//! Failure-mode labels (ALGORITHMS.md §4.2): a category and a confidence for each
//! trajectory pair, from a [`Judge`]. The label is only a prior: evidence rules
//! (`evidence.rs`) check it at the chosen step.
//!
//! [`HeuristicJudge`] applies rules over the two trajectories; [`LlmJudge`] asks a
//! chat model through any completion function (the caller owns the transport) and
//! must answer `{"category": .., "confidence": ..}`. [`label_pair`] falls back to the
//! heuristic, with a note, when a judge fails or answers outside the contract.

use super::align::StateView;
use super::config::MineConfig;
use super::contrast::translate_index;
use super::pair::{LabelSource, PairKind};
use crate::action::Action;
use crate::trajectory::Trajectory;
use anyhow::{Result, anyhow, bail};
use serde_json::Value;

/// What a judge sees of a trajectory pair.
pub struct LabelInput<'a> {
    pub instruction: &'a str,
    pub kind: PairKind,
    pub success: &'a Trajectory,
    pub loc: &'a Trajectory,
    /// Precomputed views of the success steps (same order as its steps).
    pub success_views: &'a [StateView],
    pub loc_views: &'a [StateView],
}

/// A failure-mode label.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub category: String,
    pub confidence: f64,
    pub source: LabelSource,
    /// Why this label (rule fired, or a judge failure that caused the fallback).
    pub notes: Vec<String>,
}

/// Anything that can label a trajectory pair.
pub trait Judge: Send + Sync {
    /// Labels a pair; an error means "no usable answer".
    fn label(&self, input: &LabelInput, cfg: &MineConfig) -> Result<Label>;
}

/// Labels with the judge, falling back to the heuristic (with a note saying why)
/// when the judge fails or answers outside the taxonomy.
pub fn label_pair(judge: &dyn Judge, input: &LabelInput, cfg: &MineConfig) -> Label {
    match judge.label(input, cfg) {
        Ok(l) if cfg.knows(&l.category) && (0.0..=1.0).contains(&l.confidence) => l,
        Ok(l) => {
            let mut h = heuristic_label(input, cfg);
            h.notes.insert(
                0,
                format!(
                    "judge answer rejected (category `{}`, confidence {}); heuristic used",
                    l.category, l.confidence
                ),
            );
            h
        }
        Err(e) => {
            let mut h = heuristic_label(input, cfg);
            h.notes
                .insert(0, format!("judge failed ({e:#}); heuristic used"));
            h
        }
    }
}

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

const CONSTRAINT_WORDS: &[&str] = &[
    "filter",
    "filters",
    "sort",
    "date",
    "option",
    "options",
    "minimum",
    "maximum",
    "price",
    "range",
    "checkbox",
    "radio",
    "newest",
    "oldest",
    "lowest",
    "highest",
    "ascending",
    "descending",
];

/// Whether a text mentions a technical obstruction.
pub fn mentions_obstruction(text: &str) -> bool {
    let t = text.to_lowercase();
    OBSTRUCTION_WORDS.iter().any(|w| t.contains(w))
}

/// Whether a step of the trajectory shows an obstruction: an action error, or a
/// title/URL naming a block page, captcha, crash or timeout.
pub fn step_obstructed(t: &Trajectory, k: usize) -> bool {
    let Some(s) = t.steps.get(k) else {
        return false;
    };
    s.result
        .iter()
        .any(|r| r.error.as_deref().is_some_and(|e| !e.trim().is_empty()))
        || mentions_obstruction(&s.state.title)
        || mentions_obstruction(&s.state.url)
}

/// The first action of step `k`.
pub fn action_at(t: &Trajectory, k: usize) -> Option<&Action> {
    t.steps.get(k).and_then(|s| s.output.actions.first())
}

/// Whether two steps do the same thing on the same page (element references are
/// compared through signatures, not indices).
pub fn same_move(a: Option<&Action>, av: &StateView, b: Option<&Action>, bv: &StateView) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => av.url.full == bv.url.full && translate_index(b, bv, av) == *a,
        _ => false,
    }
}

/// The first step at which the two trajectories stop doing the same thing.
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

/// A stalled loop in steps `range`: the same action on the same page three times in a
/// row, or an A-B-A-B cycle. Returns the step where it starts.
pub fn find_loop(
    t: &Trajectory,
    views: &[StateView],
    range: std::ops::Range<usize>,
) -> Option<usize> {
    let key = |k: usize| -> Option<(String, &Action)> {
        Some((views.get(k)?.url.full.clone(), action_at(t, k)?))
    };
    let end = range.end.min(t.steps.len());
    for k in range.start..end {
        if k + 2 < end {
            let (a, b, c) = (key(k), key(k + 1), key(k + 2));
            if a.is_some() && a == b && b == c {
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

/// Whether the element an action targets looks like a constraint control (filter,
/// sort, date, option, checkbox...), or the action picks an option.
pub fn is_constraint_action(a: &Action, t: &Trajectory, k: usize) -> bool {
    if a.name == "select_dropdown" {
        return true;
    }
    let Some(idx) = a.target_index() else {
        return false;
    };
    let Some(e) = t.steps.get(k).and_then(|s| s.state.element(idx)) else {
        return false;
    };
    let mut hay = format!("{} {}", e.text, e.role).to_lowercase();
    for k in ["type", "name", "id", "aria-label", "placeholder"] {
        if let Some(v) = e.attrs.get(k) {
            hay.push(' ');
            hay.push_str(&v.to_lowercase());
        }
    }
    hay.split(|c: char| !c.is_alphanumeric())
        .any(|w| CONSTRAINT_WORDS.contains(&w))
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

fn label(category: &str, confidence: f64, note: String) -> Label {
    Label {
        category: category.into(),
        confidence,
        source: LabelSource::Heuristic,
        notes: vec![note],
    }
}

/// The heuristic rules, most specific first.
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
    if let Some(k) = find_loop(l, input.loc_views, 0..l.steps.len())
        && find_loop(s, input.success_views, 0..s.steps.len()).is_none()
    {
        return label(
            "loop_stall",
            0.85,
            format!("loc repeats the same action on the same page from step {k}"),
        );
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
    let k = first_divergence(input);
    let (sa, la) = (action_at(s, k), action_at(l, k));
    match (sa, la) {
        (Some(sa), Some(la)) if la.name == "done" && sa.name != "done" => label(
            "premature_done",
            0.8,
            format!(
                "loc ends with done at step {k} where the success goes on with {}",
                sa.short()
            ),
        ),
        (Some(_), Some(_)) if same_control_other_value(input, k, k) => label(
            "wrong_input_value",
            0.8,
            format!("step {k}: same control, other value"),
        ),
        (Some(sa), Some(_)) if is_constraint_action(sa, s, k) => label(
            "missed_constraint",
            0.65,
            format!("step {k}: the success sets a filter/sort/date/option control that loc skips"),
        ),
        (Some(sa), Some(la))
            if matches!(la.name.as_str(), "navigate" | "go_back")
                && !matches!(sa.name.as_str(), "navigate" | "go_back") =>
        {
            label(
                "navigation_detour",
                0.6,
                format!("step {k}: loc navigates away instead of acting on the page"),
            )
        }
        (Some(sa), Some(la)) if sa.name == "extract" || la.name == "extract" => label(
            "extraction_error",
            0.6,
            format!("step {k}: the two sides extract differently"),
        ),
        (Some(sa), Some(la)) if sa.target_index().is_some() && la.target_index().is_some() => {
            label(
                "wrong_element",
                0.7,
                format!("step {k}: loc acts on another element"),
            )
        }
        (None, None) if k >= s.steps.len() && k >= l.steps.len() => label(
            "extraction_error",
            0.5,
            "same actions throughout; the final answer differs".into(),
        ),
        _ => label(
            "wrong_element",
            0.4,
            format!("step {k}: the actions differ (no more specific rule)"),
        ),
    }
}

/// A completion function: prompt in, model text out. The caller chooses the
/// transport (an OpenAI-compatible chat client, a test double...).
pub type CompletionFn = Box<dyn Fn(&str) -> Result<String> + Send + Sync>;

/// An LLM judge over a completion function.
pub struct LlmJudge {
    complete: CompletionFn,
}

impl LlmJudge {
    /// A judge that sends its prompt to `complete`.
    pub fn new(complete: CompletionFn) -> Self {
        LlmJudge { complete }
    }
}

const MAX_PROMPT_STEPS: usize = 40;

fn describe(t: &Trajectory) -> String {
    let mut out = String::new();
    for (k, s) in t.steps.iter().enumerate().take(MAX_PROMPT_STEPS) {
        let acts: Vec<String> = s.output.actions.iter().map(Action::short).collect();
        out.push_str(&format!("  {k}. [{}] {}\n", s.state.url, acts.join("; ")));
    }
    if t.steps.len() > MAX_PROMPT_STEPS {
        out.push_str(&format!(
            "  ... {} more steps\n",
            t.steps.len() - MAX_PROMPT_STEPS
        ));
    }
    let o = &t.outcome;
    out.push_str(&format!(
        "  end: success={} reason={:?} final_answer={:?}\n",
        o.success,
        o.reason.as_deref().unwrap_or(""),
        o.final_answer.as_deref().unwrap_or("")
    ));
    out
}

/// The judge prompt: task, both action lists and both terminal summaries.
pub fn judge_prompt(input: &LabelInput, cfg: &MineConfig) -> String {
    let other = match input.kind {
        PairKind::FailContrast => "Failed attempt",
        PairKind::Detour => "Longer successful attempt (a detour)",
    };
    format!(
        "You label why a web agent's attempt went wrong, by contrast with a successful attempt \
         of the same task.\nTask: {}\n\nSuccessful attempt:\n{}\n{other}:\n{}\n\
         Categories: {}\nAnswer with one JSON object only: \
         {{\"category\": \"<one of the categories>\", \"confidence\": <number from 0 to 1>}}",
        input.instruction,
        describe(input.success),
        describe(input.loc),
        cfg.taxonomy.join(", ")
    )
}

/// Reads `{"category": .., "confidence": ..}` from a model answer (text around the
/// object and a code fence are tolerated).
pub fn parse_judge_answer(text: &str, cfg: &MineConfig) -> Result<(String, f64)> {
    let start = text
        .find('{')
        .ok_or_else(|| anyhow!("no JSON object in the answer"))?;
    let end = text
        .rfind('}')
        .ok_or_else(|| anyhow!("no JSON object in the answer"))?;
    if end < start {
        bail!("no JSON object in the answer");
    }
    let v: Value = serde_json::from_str(&text[start..=end])
        .map_err(|e| anyhow!("answer is not valid JSON: {e}"))?;
    let category = v
        .get("category")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("answer has no string `category`"))?
        .trim()
        .to_string();
    if !cfg.knows(&category) {
        bail!("category `{category}` is not in the taxonomy");
    }
    let confidence = v
        .get("confidence")
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("answer has no numeric `confidence`"))?;
    if !(0.0..=1.0).contains(&confidence) {
        bail!("confidence {confidence} is outside 0..=1");
    }
    Ok((category, confidence))
}

impl Judge for LlmJudge {
    fn label(&self, input: &LabelInput, cfg: &MineConfig) -> Result<Label> {
        let answer = (self.complete)(&judge_prompt(input, cfg))?;
        let (category, confidence) = parse_judge_answer(&answer, cfg)?;
        Ok(Label {
            category,
            confidence,
            source: LabelSource::Judge,
            notes: vec!["labelled by the LLM judge".into()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_answers_are_checked() {
        let cfg = MineConfig::default();
        assert_eq!(
            parse_judge_answer(
                "```json\n{\"category\": \"loop_stall\", \"confidence\": 0.9}\n```",
                &cfg
            )
            .unwrap(),
            ("loop_stall".to_string(), 0.9)
        );
        assert!(
            parse_judge_answer("{\"category\": \"bad_luck\", \"confidence\": 0.9}", &cfg).is_err()
        );
        assert!(
            parse_judge_answer("{\"category\": \"loop_stall\", \"confidence\": 2}", &cfg).is_err()
        );
        assert!(parse_judge_answer("I think it is a loop", &cfg).is_err());
    }
}
