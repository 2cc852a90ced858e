//! Failure-mode labels (ALGORITHMS.md §4.2): a category and a confidence for each
//! trajectory pair, from a [`Judge`]. The label is only a prior: evidence rules
//! (`evidence.rs`) check it at the chosen step.
//!
//! [`HeuristicJudge`] applies rules over the two trajectories (`heuristic.rs`);
//! [`LlmJudge`] asks a chat model through any completion function (the caller owns
//! the transport) and must answer `{"category": .., "confidence": ..}`. [`label_pair`] falls back to the
//! heuristic, with a note, when a judge fails or answers outside the contract.

use super::align::StateView;
use super::config::MineConfig;
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

pub use super::heuristic::{HeuristicJudge, heuristic_label};

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

/// What each default category means, as the judge is told.
pub const CATEGORY_DEFINITIONS: &[(&str, &str)] = &[
    (
        "wrong_element",
        "acted on another element than the right one (a misclick, a similar item, the wrong button, checkbox or radio)",
    ),
    (
        "wrong_input_value",
        "the right field or dropdown with a wrong value (typed text, date, number, chosen option)",
    ),
    (
        "missed_constraint",
        "skipped a filter, sort, date or range the task asks for and went on, or answered, without it",
    ),
    (
        "premature_done",
        "declared the task done, or gave up, while steps remained",
    ),
    (
        "navigation_detour",
        "left the route (navigated elsewhere, went back, wandered off) and did not come back; for a longer success, the extra steps",
    ),
    (
        "loop_stall",
        "repeated the same action in the same state without progress",
    ),
    (
        "extraction_error",
        "reached the right place but extracted or reported the wrong content",
    ),
    (
        "technical_obstruction",
        "the site or browser failed it: captcha, block page, error page, timeout, crash",
    ),
];

/// One line of text, at most `max` characters (whitespace collapsed).
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// An action with the element it targets, e.g. `click(8) on <a> "Reviews"`.
fn action_with_target(a: &Action, state: &crate::trajectory::State) -> String {
    let mut out = a.short();
    if let Some(e) = a.target_index().and_then(|i| state.element(i)) {
        let mut what = format!(" on <{}", e.tag);
        for k in [
            "type",
            "name",
            "aria-label",
            "placeholder",
            "value",
            "checked",
            "selected",
        ] {
            if let Some(v) = e.attrs.get(k) {
                what.push_str(&format!(" {k}={:?}", one_line(v, 40)));
            }
        }
        what.push('>');
        if !e.text.trim().is_empty() {
            what.push_str(&format!(" {:?}", one_line(&e.text, 60)));
        }
        out.push_str(&what);
    }
    out
}

fn describe(t: &Trajectory) -> String {
    let mut out = String::new();
    for (k, s) in t.steps.iter().enumerate().take(MAX_PROMPT_STEPS) {
        let acts: Vec<String> = s
            .output
            .actions
            .iter()
            .map(|a| action_with_target(a, &s.state))
            .collect();
        out.push_str(&format!(
            "  {k}. [{}] {}\n",
            one_line(&s.state.url, 120),
            acts.join("; ")
        ));
        for r in &s.result {
            if let Some(e) = r.error.as_deref().filter(|e| !e.trim().is_empty()) {
                out.push_str(&format!("     error: {}\n", one_line(e, 160)));
            }
        }
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
        one_line(o.reason.as_deref().unwrap_or(""), 200),
        one_line(o.final_answer.as_deref().unwrap_or(""), 200)
    ));
    out
}

/// The judge prompt: task, both attempts step by step (each action with the element
/// it targets, and errors), both outcomes, and the categories with what they mean.
// Kept whole: it is one prompt's text, read as the judge reads it.
pub fn judge_prompt(input: &LabelInput, cfg: &MineConfig) -> String {
    let other = match input.kind {
        PairKind::FailContrast => "Failed attempt",
        PairKind::Detour => "Longer successful attempt (a detour)",
    };
    let categories: Vec<String> = cfg
        .taxonomy
        .iter()
        .map(
            |c| match CATEGORY_DEFINITIONS.iter().find(|(n, _)| n == c) {
                Some((_, d)) => format!("- {c}: {d}"),
                None => format!("- {c}"),
            },
        )
        .collect();
    format!(
        "You label why a web agent's attempt at a task went wrong, by contrast with a successful \
         attempt of the same task.\nTask: {}\n\nSuccessful attempt ({} steps):\n{}\n{other} ({} steps):\n{}\n\
         Categories (pick the one that explains the decisive failure: the last point where the \
         {} attempt stood where the successful one stood and did something else):\n{}\n\
         Answer with one JSON object only: \
         {{\"category\": \"<one of the categories>\", \"confidence\": <number from 0 to 1>}}",
        one_line(input.instruction, 600),
        input.success.steps.len(),
        describe(input.success),
        input.loc.steps.len(),
        describe(input.loc),
        match input.kind {
            PairKind::FailContrast => "failed",
            PairKind::Detour => "longer",
        },
        categories.join("\n")
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
