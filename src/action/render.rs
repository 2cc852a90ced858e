//! Rendering a [`ModelOutput`] as Browser Use model-output JSON: the SFT target text.
//!
//! The form is one line of JSON with the keys in Browser Use's order —
//! `thinking` (only when non-empty), `evaluation_previous_goal`, `memory`,
//! `next_goal`, `action` — and each action as `{"<name>": {params}}`.
//! [`crate::action::parse::parse_response`] reads it back to the same actions.

use super::Action;
use crate::trajectory::ModelOutput;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

#[derive(Serialize)]
struct Rendered<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    thinking: &'a str,
    evaluation_previous_goal: &'a str,
    memory: &'a str,
    next_goal: &'a str,
    action: Vec<BrowserUseAction<'a>>,
}

/// An action as Browser Use writes it: `{"click": {"index": 12}}`.
struct BrowserUseAction<'a>(&'a Action);

impl Serialize for BrowserUseAction<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(&self.0.name, &self.0.params)?;
        m.end()
    }
}

/// Renders the output as Browser Use model-output JSON (one line).
pub fn render_output(output: &ModelOutput) -> String {
    let r = Rendered {
        thinking: &output.thinking,
        evaluation_previous_goal: &output.evaluation_previous_goal,
        memory: &output.memory,
        next_goal: &output.next_goal,
        action: output.actions.iter().map(BrowserUseAction).collect(),
    };
    // Serializing strings and JSON maps cannot fail.
    serde_json::to_string(&r).unwrap_or_default()
}

/// Renders just an action list as Browser Use's `[{"click": {"index": 12}}]`.
pub fn render_actions(actions: &[Action]) -> String {
    let list: Vec<BrowserUseAction> = actions.iter().map(BrowserUseAction).collect();
    serde_json::to_string(&list).unwrap_or_default()
}
