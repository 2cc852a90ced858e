//! Parsing a model response into actions.
//!
//! INTERIM: the reward issue replaces this with the full parser (fenced blocks, text
//! around the JSON, the short form `click(12)`, precise errors). The signatures stay.

use super::{Action, canonicalize};
use serde_json::Value;
use std::ops::Range;

/// A parsed model response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub actions: Vec<Action>,
    pub thinking: Option<String>,
    pub evaluation_previous_goal: Option<String>,
    pub memory: Option<String>,
    pub next_goal: Option<String>,
    /// Byte span of the action(s) inside the response text.
    pub action_span: Range<usize>,
}

/// Why a response has no valid action.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
    /// Byte offset in the response where the problem was found, if known.
    pub offset: Option<usize>,
}

/// Parses a model response into actions.
pub fn parse_response(text: &str) -> Result<Parsed, ParseError> {
    let v: Value = serde_json::from_str(text.trim()).map_err(|e| ParseError {
        message: format!("not JSON: {e}"),
        offset: None,
    })?;
    let list = v
        .get("action")
        .and_then(Value::as_array)
        .ok_or(ParseError {
            message: "no `action` list".into(),
            offset: None,
        })?;
    let mut actions = Vec::new();
    for item in list {
        let obj = item.as_object().ok_or(ParseError {
            message: "action item is not an object".into(),
            offset: None,
        })?;
        for (name, params) in obj {
            actions.push(canonicalize(name, params).action);
        }
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(Parsed {
        actions,
        thinking: s("thinking"),
        evaluation_previous_goal: s("evaluation_previous_goal"),
        memory: s("memory"),
        next_goal: s("next_goal"),
        action_span: 0..text.len(),
    })
}
