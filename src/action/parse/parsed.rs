//! What parsing gives: the actions with their form and span, or an error at a byte
//! offset.

use crate::action::Action;
use crate::action::scan::ScanBudget;
use std::ops::Range;

/// Which form the action was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseForm {
    /// Browser Use model output: `{"action": [{"click": {"index": 12}}], ...}`.
    #[default]
    BrowserUse,
    /// Canonical JSON: `{"name": "click", "params": {...}}`, alone or in an `actions` list.
    Canonical,
    /// A call such as `click(12)`.
    Short,
}

/// A parsed model response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub actions: Vec<Action>,
    pub thinking: Option<String>,
    pub evaluation_previous_goal: Option<String>,
    pub memory: Option<String>,
    pub next_goal: Option<String>,
    /// Byte span of the action(s) inside the response text: the action list with its
    /// brackets, the lone canonical object, or the short-form call(s).
    pub action_span: Range<usize>,
    /// Byte span of the whole JSON object (equal to `action_span` for the short form).
    pub object_span: Range<usize>,
    /// The form the actions were written in.
    pub form: ResponseForm,
    /// Non-fatal remarks, e.g. an unknown action name kept as it is.
    pub warnings: Vec<String>,
}

/// Why a response has no valid action.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
    /// Byte offset in the response where the problem was found, if known.
    pub offset: Option<usize>,
}

impl ParseError {
    pub(super) fn at(offset: usize, message: impl Into<String>) -> Self {
        let message = message.into();
        ParseError {
            message: format!("at byte {offset}: {message}"),
            offset: Some(offset),
        }
    }
}

pub(super) fn out_of_budget(at: usize, budget: &ScanBudget) -> ParseError {
    ParseError::at(
        at,
        format!(
            "gave up after scanning {} bytes: the response holds too many objects or calls \
             that are never closed to look for an action in it",
            budget.spent()
        ),
    )
}
