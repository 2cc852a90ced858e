//! Rendering a step's output (thinking, memory, goals, actions: the trajectory's
//! `ModelOutput` hands its fields over as [`OutputParts`]) as Browser Use
//! model-output JSON: the SFT target text.
//!
//! The form is one line of JSON with the keys in Browser Use's order —
//! `thinking` (only when non-empty), `evaluation_previous_goal`, `memory`,
//! `next_goal`, `action` — and each action as `{"<name>": {params}}`.
//! [`crate::action::parse::parse_response`] reads it back to the same actions.

use super::Action;
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

/// The fields of a step's output, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct OutputParts<'a> {
    pub thinking: &'a str,
    pub evaluation_previous_goal: &'a str,
    pub memory: &'a str,
    pub next_goal: &'a str,
    pub actions: &'a [Action],
}

/// Renders the output as Browser Use model-output JSON (one line).
pub fn render_output(output: &OutputParts<'_>) -> String {
    let r = Rendered {
        thinking: output.thinking,
        evaluation_previous_goal: output.evaluation_previous_goal,
        memory: output.memory,
        next_goal: output.next_goal,
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

/// An action as a short-form call that the parser reads back exactly:
/// `input(5, "alice")`, `scroll(true, index=3)`. Leading parameters in the
/// action's positional order are written positionally, the rest as `key=value`;
/// values are JSON.
pub fn render_call(action: &Action) -> String {
    let positional = super::parse::positional_params(&action.name);
    let mut args: Vec<String> = Vec::new();
    let mut used = 0;
    for key in positional {
        match action.params.get(*key) {
            Some(v) => {
                args.push(v.to_string());
                used += 1;
            }
            None => break,
        }
    }
    let taken = &positional[..used];
    for (k, v) in &action.params {
        if !taken.contains(&k.as_str()) {
            args.push(format!("{k}={v}"));
        }
    }
    format!("{}({})", action.name, args.join(", "))
}

/// A response whose action was replaced by the ground truth (Salvage-DS): the text
/// and the byte span of the new action, the only bytes that get loss.
#[derive(Debug, Clone, PartialEq)]
pub struct Spliced {
    pub text: String,
    pub action_span: std::ops::Range<usize>,
}

/// Replaces the action of `response` by `targets`, keeping the response's own
/// reasoning and format: a Browser Use action list stays one, the canonical form
/// stays canonical, a short-form call becomes short-form calls. A response with no
/// readable action keeps its text and gets `{"action": [...]}` appended on a new line.
pub fn splice_actions(response: &str, targets: &[Action]) -> Spliced {
    use super::parse::{ResponseForm, parse_response};
    let (range, replacement) = match parse_response(response) {
        Ok(p) => {
            let old = &response[p.action_span.clone()];
            let new = match p.form {
                ResponseForm::Short => targets
                    .iter()
                    .map(Action::short)
                    .collect::<Vec<_>>()
                    .join("; "),
                ResponseForm::Canonical if !old.starts_with('[') && targets.len() == 1 => {
                    serde_json::to_string(&targets[0]).unwrap_or_default()
                }
                ResponseForm::Canonical => serde_json::to_string(targets).unwrap_or_default(),
                ResponseForm::BrowserUse => render_actions(targets),
            };
            (p.action_span, new)
        }
        Err(_) => {
            let mut text = response.trim_end().to_string();
            if !text.is_empty() {
                text.push('\n');
            }
            let prefix = "{\"action\": ";
            let start = text.len() + prefix.len();
            let list = render_actions(targets);
            let end = start + list.len();
            text.push_str(prefix);
            text.push_str(&list);
            text.push('}');
            return Spliced {
                text,
                action_span: start..end,
            };
        }
    };
    let mut text = String::with_capacity(response.len() + replacement.len());
    text.push_str(&response[..range.start]);
    text.push_str(&replacement);
    text.push_str(&response[range.end..]);
    Spliced {
        action_span: range.start..range.start + replacement.len(),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::CANONICAL_NAMES;
    use crate::action::parse::parse_response;
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    /// An owned output, as a trajectory step holds one.
    #[derive(Debug, Clone)]
    struct ModelOutput {
        thinking: String,
        evaluation_previous_goal: String,
        memory: String,
        next_goal: String,
        actions: Vec<Action>,
    }

    impl ModelOutput {
        fn parts(&self) -> OutputParts<'_> {
            OutputParts {
                thinking: &self.thinking,
                evaluation_previous_goal: &self.evaluation_previous_goal,
                memory: &self.memory,
                next_goal: &self.next_goal,
                actions: &self.actions,
            }
        }
    }

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
            render_output(&out.parts()),
            r#"{"evaluation_previous_goal":"ok","memory":"m","next_goal":"g","action":[{"click":{"index":12}}]}"#
        );
    }

    #[test]
    fn splicing_keeps_reasoning_and_marks_the_new_action() {
        let targets = [Action::new("input", json!({"index": 5, "text": "alice"}))];
        let cases = [
            r#"Thinking... {"thinking": "t", "action": [{"click": {"index": 12}}]} bye"#,
            r#"{"actions": [{"name": "click", "params": {"index": 12}}]}"#,
            r#"{"name": "click", "params": {"index": 12}}"#,
            "I will click(12) now",
            "no action at all",
            "",
        ];
        for response in cases {
            let s = splice_actions(response, &targets);
            let p = parse_response(&s.text).unwrap_or_else(|e| panic!("{response}: {e}"));
            assert_eq!(p.actions, targets, "{response} -> {}", s.text);
            assert_eq!(p.action_span, s.action_span, "{response} -> {}", s.text);
        }
        let s = splice_actions(cases[0], &targets);
        assert!(
            s.text
                .starts_with("Thinking... {\"thinking\": \"t\", \"action\": ")
        );
        assert!(s.text.ends_with("} bye"));
        assert_eq!(
            splice_actions("I will click(12) now", &targets).text,
            "I will input(5, \"alice\") now"
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
            let body = render_output(&out.parts());
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
        fn splicing_any_response_yields_the_targets(
            targets in proptest::collection::vec(action(), 1..3),
            response in prop_oneof![
                ".{0,60}",
                output().prop_map(|o| render_output(&o.parts())),
                proptest::collection::vec(action(), 1..3)
                    .prop_map(|a| format!("I'll do {} now.", a.iter().map(render_call).collect::<Vec<_>>().join("; "))),
            ],
        ) {
            let s = splice_actions(&response, &targets);
            let p = parse_response(&s.text).map_err(|e| TestCaseError::fail(format!("{e}: {}", s.text)))?;
            prop_assert_eq!(&p.actions, &targets, "{}", s.text);
            prop_assert_eq!(p.action_span, s.action_span);
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
