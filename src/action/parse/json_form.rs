//! The JSON form of a response: the first object holding an action list (Browser
//! Use's flat or nested output, or the canonical list), or a lone canonical action.

use super::parsed::{ParseError, Parsed, ResponseForm};
use super::short_form::positional_object;
use crate::action::scan::{ScanBudget, array_items, key_is, line_col_to_offset, object_members};
use crate::action::{Action, canonicalize};
use crate::util::json_kind;
use serde::Deserialize;
use serde_json::Value;
use std::ops::ControlFlow;

pub(super) enum Candidate {
    /// An object with actions.
    Found(Parsed),
    /// An object with an action list that is malformed: a definite error.
    Broken(ParseError),
    /// Valid JSON without actions, ending at this byte: skip it.
    NoActions(usize),
    /// Not valid JSON (may be prose in braces); the message is made only when needed.
    NotJson(NotJson),
    /// The scan budget ran out inside this candidate.
    OutOfBudget,
}

/// Why a candidate is not JSON, kept cheap: most candidates in prose are never reported.
pub(super) enum NotJson {
    /// The object opened at this byte is never closed.
    Unclosed(usize),
    /// `{` followed by something other than a key or `}`, at this byte.
    NoKey(usize),
    /// serde_json's error for the object starting at this byte.
    Invalid(usize, serde_json::Error),
}

impl NotJson {
    pub(super) fn into_error(self, text: &str) -> ParseError {
        match self {
            NotJson::Unclosed(start) => ParseError::at(
                start,
                "the JSON object opened here is never closed (missing `}`)",
            ),
            NotJson::NoKey(at) => ParseError::at(
                at,
                "invalid JSON: expected a key in double quotes or `}` after `{`",
            ),
            NotJson::Invalid(start, e) => {
                let off =
                    start + line_col_to_offset(&text.as_bytes()[start..], e.line(), e.column());
                let msg = e.to_string();
                // serde_json appends " at line L column C"; the byte offset replaces it.
                let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
                ParseError::at(off, format!("invalid JSON: {msg}"))
            }
        }
    }
}

/// The top-level fields of a model output; unknown fields are skipped.
#[derive(Deserialize)]
pub(super) struct RawOutput {
    #[serde(default)]
    thinking: Option<Value>,
    #[serde(default)]
    evaluation_previous_goal: Option<Value>,
    #[serde(default)]
    memory: Option<Value>,
    #[serde(default)]
    next_goal: Option<Value>,
    #[serde(default)]
    current_state: Option<Value>,
    #[serde(default)]
    action: Option<Value>,
    #[serde(default)]
    actions: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
}

pub(super) fn text_field(top: Option<Value>, nested: Option<&Value>) -> Option<String> {
    match top {
        Some(Value::String(s)) => Some(s),
        _ => nested.and_then(Value::as_str).map(str::to_owned),
    }
}

/// An action from a name and its params, without copying the params when the name
/// is already canonical.
pub(super) fn make_action(name: String, params: Value) -> crate::action::Canonicalized {
    match params {
        Value::Object(map)
            if name != "scroll" && crate::action::CANONICAL_NAMES.contains(&name.as_str()) =>
        {
            crate::action::Canonicalized {
                action: Action { name, params: map },
                warning: None,
            }
        }
        params => canonicalize(&name, &params),
    }
}

/// The object at `start` read as a response, with its span; or (`Break`) what it is
/// instead when it is not one (prose in braces, unclosed, invalid, over the budget).
fn read_raw(
    text: &str,
    start: usize,
    budget: &mut ScanBudget,
) -> ControlFlow<Candidate, (RawOutput, std::ops::Range<usize>)> {
    let bytes = text.as_bytes();
    // Prose such as `{maybe}` fails here without starting a JSON parse.
    let first = bytes[start + 1..]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|k| start + 1 + k);
    match first.map(|k| (k, bytes[k])) {
        None => return ControlFlow::Break(Candidate::NotJson(NotJson::Unclosed(start))),
        Some((_, b'"' | b'}')) => {}
        Some((k, _)) => return ControlFlow::Break(Candidate::NotJson(NotJson::NoKey(k))),
    }
    // serde_json sees no more than the budget allows; running into that end is
    // running out of budget, not an unclosed object.
    let limit = start.saturating_add(budget.left()).min(bytes.len());
    let truncated = limit < bytes.len();
    let mut stream =
        serde_json::Deserializer::from_slice(&bytes[start..limit]).into_iter::<RawOutput>();
    let raw = match stream.next() {
        Some(Ok(r)) => r,
        Some(Err(e)) if e.is_eof() => {
            budget.spend(limit - start);
            return ControlFlow::Break(if truncated {
                Candidate::OutOfBudget
            } else {
                Candidate::NotJson(NotJson::Unclosed(start))
            });
        }
        Some(Err(e)) => {
            // What serde_json read before failing (at least the line it failed on).
            let scanned = if e.line() <= 1 {
                e.column()
            } else {
                line_col_to_offset(&bytes[start..limit], e.line(), e.column())
            };
            budget.spend(scanned.max(1));
            return ControlFlow::Break(Candidate::NotJson(NotJson::Invalid(start, e)));
        }
        None => return ControlFlow::Break(Candidate::NoActions(text.len())),
    };
    budget.spend(stream.byte_offset());
    ControlFlow::Continue((raw, start..start + stream.byte_offset()))
}

/// Reads the JSON object that starts at `start` (a `{`); text after it is left alone.
pub(super) fn parse_object(text: &str, start: usize, budget: &mut ScanBudget) -> Candidate {
    let (raw, span) = match read_raw(text, start, budget) {
        ControlFlow::Continue(r) => r,
        ControlFlow::Break(c) => return c,
    };
    let state = raw.current_state.as_ref();
    let nested = |k: &str| state.and_then(|s| s.get(k));
    let mut parsed = Parsed {
        thinking: text_field(raw.thinking, nested("thinking")),
        evaluation_previous_goal: text_field(
            raw.evaluation_previous_goal,
            nested("evaluation_previous_goal"),
        ),
        memory: text_field(raw.memory, nested("memory")),
        next_goal: text_field(raw.next_goal, nested("next_goal")),
        object_span: span.clone(),
        ..Parsed::default()
    };
    let (list, key, form) = match (raw.action, raw.actions) {
        (Some(l), _) => (l, "action", ResponseForm::BrowserUse),
        (None, Some(l)) => (l, "actions", ResponseForm::Canonical),
        (None, None) => return lone_action(raw.name, raw.params, parsed, span),
    };
    let list_span = object_members(text, span.clone())
        .into_iter()
        .find(|m| key_is(text, &m.key, key))
        .map_or(span.clone(), |m| m.value);
    let items = match list {
        Value::Array(items) => items,
        other => {
            return Candidate::Broken(ParseError::at(
                list_span.start,
                format!(
                    "`{key}` must be a list such as [{{\"click\": {{\"index\": 12}}}}], found {}",
                    json_kind(&other)
                ),
            ));
        }
    };
    if items.is_empty() {
        return Candidate::Broken(ParseError::at(
            list_span.start,
            format!("the `{key}` list is empty"),
        ));
    }
    parsed.actions.reserve(items.len());
    for (n, item) in items.into_iter().enumerate() {
        match action_from_item(item) {
            Ok((c, item_form)) => {
                parsed.warnings.extend(c.warning);
                parsed.actions.push(c.action);
                if item_form == ResponseForm::Canonical {
                    parsed.form = ResponseForm::Canonical;
                }
            }
            Err(msg) => {
                let at = array_items(text, list_span.clone())
                    .get(n)
                    .map_or(list_span.start, |r| r.start);
                return Candidate::Broken(ParseError::at(
                    at,
                    format!("`{key}` item {}: {msg}", n + 1),
                ));
            }
        }
    }
    if form == ResponseForm::Canonical {
        parsed.form = form;
    }
    parsed.action_span = list_span;
    Candidate::Found(parsed)
}

/// An object without an action list: a lone canonical action (`name`, `params`), or
/// no action at all.
fn lone_action(
    name: Option<Value>,
    params: Option<Value>,
    mut parsed: Parsed,
    span: std::ops::Range<usize>,
) -> Candidate {
    match (name, params) {
        (Some(Value::String(name)), params) => {
            let c = make_action(name, params.unwrap_or(Value::Null));
            parsed.warnings.extend(c.warning);
            parsed.actions.push(c.action);
            parsed.action_span = span;
            parsed.form = ResponseForm::Canonical;
            Candidate::Found(parsed)
        }
        _ => Candidate::NoActions(span.end),
    }
}

/// One item of an action list: `{"click": {...}}` or `{"name": "click", "params": {...}}`.
pub(super) fn action_from_item(
    item: Value,
) -> Result<(crate::action::Canonicalized, ResponseForm), String> {
    let Value::Object(mut obj) = item else {
        return Err(format!(
            "expected an object such as {{\"click\": {{\"index\": 12}}}}, found {}",
            json_kind(&item)
        ));
    };
    if let Some(Value::String(_)) = obj.get("name") {
        let Some(Value::String(name)) = obj.remove("name") else {
            return Err("no action name".into());
        };
        let params = obj.remove("params").unwrap_or(Value::Null);
        if !matches!(params, Value::Object(_) | Value::Null) {
            return Err(format!(
                "`params` of `{name}` must be an object, found {}",
                json_kind(&params)
            ));
        }
        return Ok((make_action(name, params), ResponseForm::Canonical));
    }
    // Browser Use writes one key per item; some models add the others as null.
    let set: Vec<&str> = obj
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, _)| k.as_str())
        .collect();
    match set.as_slice() {
        [] => match obj.into_iter().next() {
            // `{"go_back": null}` is a parameterless action.
            Some((k, _)) => Ok((canonicalize(&k, &Value::Null), ResponseForm::BrowserUse)),
            None => Err("empty object: no action name".into()),
        },
        [one] => {
            let name = one.to_string();
            let params = obj.remove(&name).unwrap_or(Value::Null);
            let c = match params {
                Value::Object(_) => make_action(name, params),
                scalar => {
                    let p = positional_object(&name, std::slice::from_ref(&scalar))
                        .map_err(|e| format!("`{name}`: {e}"))?;
                    canonicalize(&name, &p)
                }
            };
            Ok((c, ResponseForm::BrowserUse))
        }
        [first, rest @ ..] => Err(format!(
            "holds several actions ({first}, {}); write one action per item",
            rest.join(", ")
        )),
    }
}
