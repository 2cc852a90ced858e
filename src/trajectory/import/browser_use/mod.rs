//! Browser Use agent histories (`{"history": [item]}`) of every layout, read into
//! steps. This module does no I/O: screenshots come back as [`ShotSource`]s that the
//! caller checks, copies and names.
//!
//! Layouts handled: `model_output.current_state{evaluation_previous_goal, memory,
//! next_goal}` (<=0.3.1) and the flat form with `thinking` (>=0.3.2); inline base64
//! `state.screenshot` (<=0.5.7) and `state.screenshot_path`; tabs keyed by `page_id`
//! (<=0.5), `target_id` or `tab_id`; `state_message` (0.8+), whose element list becomes
//! `state.elements` and `state.dom_text`. Elements the agent interacted with
//! (`state.interacted_element`) are added when the element list lacks them, so
//! histories without a state message still know their targets.
//!
//! Browser Use 0.13 (measured on its own histories, see `tests/data/browser_use/`):
//! item 0 is the harness's "Initial Actions" navigation to the task's URL (no state
//! message, no screenshot, next goal "Initial navigation"): it is kept as a
//! [`Step::synthetic`] step, not a model step. `state_message` is kept verbatim and
//! also read for the page text outside elements, the current tab and the scroll
//! position. An `extract` result's `<url>…</url><query>…</query><result>…</result>`
//! wrapper is cut down to the result. Every field with no place in the step
//! (plan fields, `long_term_memory`, result `metadata` and `attachments`, tab
//! `parent_target_id`, `metadata.step_number`, ...) is kept in [`Step::extra`] in the
//! item's own layout; the judge's whole verdict goes to the outcome's `extra`.
//!
//! One item is read in `item`, what it carries besides its step in `extras`.

mod extras;
mod item;

use super::ImportError;
#[cfg(doc)]
use crate::trajectory::Outcome;
use crate::trajectory::Step;
use crate::util::json_kind;
use serde_json::{Map, Value};
use std::path::Path;

pub use super::screenshot::ShotSource;
use item::Item;

/// The final `done` action of a history.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneInfo {
    /// `success` of the done action (or of its result), if either said.
    pub success: Option<bool>,
    /// The done text (the agent's final answer).
    pub text: Option<String>,
}

/// A history read into steps, before screenshots are copied.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedHistory {
    pub steps: Vec<Step>,
    /// One entry per step.
    pub shots: Vec<Option<ShotSource>>,
    /// Set when the last step with actions ends in `done`.
    pub done: Option<DoneInfo>,
    /// The judge's verdict on the run (`result[].judgement`, 0.9+), if it has one.
    pub judgement: Option<Judgement>,
    /// Non-fatal findings (unknown action names, ...), already prefixed with their place.
    pub warnings: Vec<String>,
}

/// Reads a history from its JSON bytes. `file` is only used in messages.
pub fn parse_history_bytes(bytes: &[u8], file: &Path) -> Result<ParsedHistory, ImportError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ImportError {
        file: file.to_path_buf(),
        location: format!("line {} column {}", e.line(), e.column()),
        field: "(json)".into(),
        message: format!("malformed JSON: {e}"),
    })?;
    parse_history(&value, file)
}

/// Reads a history from a parsed JSON value.
pub fn parse_history(value: &Value, file: &Path) -> Result<ParsedHistory, ImportError> {
    let top = |field: &str, message: String| ImportError {
        file: file.to_path_buf(),
        location: "(top level)".into(),
        field: field.into(),
        message,
    };
    let obj = value.as_object().ok_or_else(|| {
        top(
            "(record)",
            format!(
                "expected an object with `history`, found {}",
                json_kind(value)
            ),
        )
    })?;
    let items = match obj.get("history") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(top(
                "history",
                format!("expected a list, found {}", json_kind(other)),
            ));
        }
        None => {
            return Err(top(
                "history",
                "missing field (is this a Browser Use history?)".into(),
            ));
        }
    };
    if items.is_empty() {
        return Err(top("history", "the history has no items".into()));
    }
    let mut out = ParsedHistory {
        steps: Vec::with_capacity(items.len()),
        shots: Vec::with_capacity(items.len()),
        done: None,
        judgement: None,
        warnings: Vec::new(),
    };
    let mut prev_memory = String::new();
    for (i, item) in items.iter().enumerate() {
        let cx = Item { file, index: i };
        let (mut step, shot) = cx.step(item, &mut out.warnings)?;
        step.state.memory = std::mem::take(&mut prev_memory);
        prev_memory = step.output.memory.clone();
        out.steps.push(step);
        out.shots.push(shot);
    }
    out.done = final_done(&out.steps);
    out.judgement = items.last().and_then(judgement_of);
    Ok(out)
}

/// An LLM judge's verdict on a whole run, stored by Browser Use in the final result.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: bool,
    /// `failure_reason`, else `reasoning`.
    pub reason: Option<String>,
    /// The whole `judgement` object as written (`reasoning`, `failure_reason`,
    /// `impossible_task`, `reached_captcha`, ...), for [`Outcome::extra`].
    pub raw: Map<String, Value>,
}

/// The last `judgement` with a boolean `verdict` among an item's results (lenient:
/// anything else is ignored).
fn judgement_of(item: &Value) -> Option<Judgement> {
    let results = item.get("result")?.as_array()?;
    results.iter().rev().find_map(|r| {
        let j = r.get("judgement")?.as_object()?;
        let verdict = j.get("verdict")?.as_bool()?;
        let text = |k: &str| {
            j.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
        };
        Some(Judgement {
            verdict,
            reason: text("failure_reason").or_else(|| text("reasoning")),
            raw: j.clone(),
        })
    })
}

/// The `done` of the last step that has actions, with `success` taken from its params
/// or, failing that, from the step's final result.
fn final_done(steps: &[Step]) -> Option<DoneInfo> {
    let step = steps.iter().rev().find(|s| !s.output.actions.is_empty())?;
    let done = step
        .output
        .actions
        .iter()
        .rev()
        .find(|a| a.name == "done")?;
    let result_success = step
        .result
        .iter()
        .rev()
        .find(|r| r.is_done)
        .and_then(|r| r.success);
    Some(DoneInfo {
        success: done.bool_param("success").or(result_success),
        text: done.str_param("text").map(str::to_owned).or_else(|| {
            step.result
                .iter()
                .rev()
                .find(|r| r.is_done)
                .and_then(|r| r.extracted_content.clone())
        }),
    })
}

#[cfg(test)]
mod tests;
