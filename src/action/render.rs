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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::CANONICAL_NAMES;
    use crate::action::parse::parse_response;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    #[test]
    fn renders_browser_use_order_and_shape() {
        let out = ModelOutput {
            thinking: String::new(),
            evaluation_previous_goal: "ok".into(),
            memory: "m".into(),
            next_goal: "g".into(),
            actions: vec![Action::new("click", json!({"index": 12}))],
        };
        assert_eq!(
            render_output(&out),
            r#"{"evaluation_previous_goal":"ok","memory":"m","next_goal":"g","action":[{"click":{"index":12}}]}"#
        );
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            ".{0,20}".prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    fn action() -> impl Strategy<Value = Action> {
        (
            proptest::sample::select(CANONICAL_NAMES),
            proptest::collection::btree_map("[a-z_]{1,8}", value(), 0..4),
        )
            .prop_map(|(name, params)| {
                let mut params: Map<String, Value> = params.into_iter().collect();
                if name == "scroll" {
                    params.entry("down").or_insert(json!(true));
                }
                Action {
                    name: name.to_string(),
                    params,
                }
            })
    }

    fn output() -> impl Strategy<Value = ModelOutput> {
        (
            ".{0,30}",
            ".{0,30}",
            ".{0,30}",
            ".{0,30}",
            proptest::collection::vec(action(), 1..4),
        )
            .prop_map(
                |(thinking, evaluation_previous_goal, memory, next_goal, actions)| ModelOutput {
                    thinking,
                    evaluation_previous_goal,
                    memory,
                    next_goal,
                    actions,
                },
            )
    }

    proptest! {
        #[test]
        fn render_then_parse_gives_back_the_output(
            out in output(),
            before in "[a-zA-Z .,:!?\n]{0,40}",
            after in "[a-zA-Z .,:!?\n]{0,40}",
            fenced in any::<bool>(),
        ) {
            let body = render_output(&out);
            let text = if fenced {
                format!("{before}\n```json\n{body}\n```\n{after}")
            } else {
                format!("{before}{body}{after}")
            };
            let p = parse_response(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            prop_assert_eq!(&p.actions, &out.actions);
            prop_assert_eq!(&text[p.action_span.clone()], render_actions(&out.actions));
            prop_assert_eq!(p.memory.as_deref(), Some(out.memory.as_str()));
            prop_assert_eq!(p.next_goal.as_deref(), Some(out.next_goal.as_str()));
            let thinking = (!out.thinking.is_empty()).then_some(out.thinking.as_str());
            prop_assert_eq!(p.thinking.as_deref(), thinking);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,200}") {
            if let Ok(p) = parse_response(&text) {
                prop_assert!(text.get(p.action_span.clone()).is_some());
            }
        }

        #[test]
        fn json_like_text_never_panics(text in r#"[{}\[\]":,a-z0-9()\\' =]{0,120}"#) {
            match parse_response(&text) {
                Ok(p) => prop_assert!(text.get(p.action_span.clone()).is_some()),
                Err(e) => prop_assert!(e.offset.is_none_or(|o| o <= text.len())),
            }
        }
    }
}
