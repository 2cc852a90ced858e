//! Parsing a model response into actions.
//!
//! Accepted forms, tried in this order:
//! 1. A JSON object holding an action list, anywhere in the text: bare, inside a
//!    ```` ```json ```` fence, or before/after free reasoning text. The list is
//!    Browser Use's `"action": [{"click": {"index": 12}}]` (flat output, or the old
//!    `current_state` nesting), or `"actions": [{"name": .., "params": ..}]` (the
//!    canonical form). The *first* such object in the text wins, as Browser Use's own
//!    parser takes the first JSON block. A lone canonical action object
//!    `{"name": "click", "params": {"index": 12}}` is accepted as well.
//! 2. Otherwise the short form: `click(12)`, `input(5, "text")`,
//!    `navigate("https://a.test")`, `done("text", true)`, `go_back()`, with keyword
//!    arguments (`scroll(down=false, pages=2)`) and several calls in a row
//!    (`click(3); input(5, "x")`). Old Browser Use names are accepted in both forms
//!    and mapped with [`canonicalize`].
//!
//! [`Parsed::action_span`] is the byte span of the action list (brackets included) or
//! of the short-form call(s): the RL salvage loss is computed on exactly those bytes.

use super::scan::{
    Bounded, CANDIDATE_COST, ScanBudget, array_items, balanced_end_within, key_is, last_occurrence,
    line_col_to_offset, object_members, string_end_within,
};
use super::{Action, canonicalize};
use crate::util::json_kind;
use serde::Deserialize;
use serde_json::{Map, Value};
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
    fn at(offset: usize, message: impl Into<String>) -> Self {
        let message = message.into();
        ParseError {
            message: format!("at byte {offset}: {message}"),
            offset: Some(offset),
        }
    }
}

/// Longest response the parser reads (model outputs are a few KiB; this bound keeps
/// the scan's worst case small on adversarial input).
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Parses a model response into actions (see the module documentation for the forms).
///
/// The work is linear in the length of `text` whatever it holds: every candidate
/// tried (each `{`, each `name(`) is charged to a [`ScanBudget`] of a few passes over
/// the text, and a text that would need more (thousands of unclosed objects or calls
/// with long tails) is refused with a message saying so.
pub fn parse_response(text: &str) -> Result<Parsed, ParseError> {
    if text.len() > MAX_RESPONSE_BYTES {
        return Err(ParseError {
            message: format!(
                "the response is {} bytes, over the {} KiB limit",
                text.len(),
                MAX_RESPONSE_BYTES >> 10
            ),
            offset: Some(MAX_RESPONSE_BYTES),
        });
    }
    let mut budget = ScanBudget::for_len(text.len());
    let bytes = text.as_bytes();
    // Where the last `"action` / `"name"` starts: an object at or before it may have
    // meant to hold actions (one lookup instead of a search per candidate).
    let last_mention = last_occurrence(bytes, &[b"\"action", b"\"name\""]);
    // The first problem seen in an object that looked like it meant to hold actions.
    let mut json_error: Option<ParseError> = None;
    let mut pos = 0;
    while let Some(i) = memchr::memchr(b'{', &bytes[pos..]) {
        let start = pos + i;
        if !budget.spend(CANDIDATE_COST) {
            return Err(out_of_budget(start, &budget));
        }
        match parse_object(text, start, &mut budget) {
            Candidate::Found(p) => return Ok(p),
            Candidate::Broken(e) => return Err(e),
            Candidate::NoActions(end) => pos = end,
            Candidate::OutOfBudget => return Err(out_of_budget(start, &budget)),
            Candidate::NotJson(e) => {
                if json_error.is_none() && last_mention.is_some_and(|m| m >= start) {
                    json_error = Some(e.into_error(text));
                }
                pos = start + 1;
            }
        }
    }
    match parse_short(text, &mut budget) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(json_error.unwrap_or_else(|| ParseError {
            message: "no action found: expected a JSON object with an `action` list \
                      (e.g. {\"action\": [{\"click\": {\"index\": 12}}]}) or a call such as click(12)"
                .into(),
            offset: None,
        })),
        Err(short_error) => Err(json_error.unwrap_or(short_error)),
    }
}

fn out_of_budget(at: usize, budget: &ScanBudget) -> ParseError {
    ParseError::at(
        at,
        format!(
            "gave up after scanning {} bytes: the response holds too many objects or calls \
             that are never closed to look for an action in it",
            budget.spent()
        ),
    )
}

enum Candidate {
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
enum NotJson {
    /// The object opened at this byte is never closed.
    Unclosed(usize),
    /// `{` followed by something other than a key or `}`, at this byte.
    NoKey(usize),
    /// serde_json's error for the object starting at this byte.
    Invalid(usize, serde_json::Error),
}

impl NotJson {
    fn into_error(self, text: &str) -> ParseError {
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
struct RawOutput {
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

fn text_field(top: Option<Value>, nested: Option<&Value>) -> Option<String> {
    match top {
        Some(Value::String(s)) => Some(s),
        _ => nested.and_then(Value::as_str).map(str::to_owned),
    }
}

/// An action from a name and its params, without copying the params when the name
/// is already canonical.
fn make_action(name: String, params: Value) -> super::Canonicalized {
    match params {
        Value::Object(map)
            if name != "scroll" && super::CANONICAL_NAMES.contains(&name.as_str()) =>
        {
            super::Canonicalized {
                action: Action { name, params: map },
                warning: None,
            }
        }
        params => canonicalize(&name, &params),
    }
}

/// Reads the JSON object that starts at `start` (a `{`); text after it is left alone.
fn parse_object(text: &str, start: usize, budget: &mut ScanBudget) -> Candidate {
    let bytes = text.as_bytes();
    // Prose such as `{maybe}` fails here without starting a JSON parse.
    let first = bytes[start + 1..]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|k| start + 1 + k);
    match first.map(|k| (k, bytes[k])) {
        None => return Candidate::NotJson(NotJson::Unclosed(start)),
        Some((_, b'"' | b'}')) => {}
        Some((k, _)) => return Candidate::NotJson(NotJson::NoKey(k)),
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
            return if truncated {
                Candidate::OutOfBudget
            } else {
                Candidate::NotJson(NotJson::Unclosed(start))
            };
        }
        Some(Err(e)) => {
            // What serde_json read before failing (at least the line it failed on).
            let scanned = if e.line() <= 1 {
                e.column()
            } else {
                line_col_to_offset(&bytes[start..limit], e.line(), e.column())
            };
            budget.spend(scanned.max(1));
            return Candidate::NotJson(NotJson::Invalid(start, e));
        }
        None => return Candidate::NoActions(text.len()),
    };
    budget.spend(stream.byte_offset());
    let span = start..start + stream.byte_offset();
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
        (None, None) => {
            // A lone canonical action object.
            return match (raw.name, raw.params) {
                (Some(Value::String(name)), params) => {
                    let c = make_action(name, params.unwrap_or(Value::Null));
                    parsed.warnings.extend(c.warning);
                    parsed.actions.push(c.action);
                    parsed.action_span = span;
                    parsed.form = ResponseForm::Canonical;
                    Candidate::Found(parsed)
                }
                _ => Candidate::NoActions(span.end),
            };
        }
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

/// One item of an action list: `{"click": {...}}` or `{"name": "click", "params": {...}}`.
fn action_from_item(item: Value) -> Result<(super::Canonicalized, ResponseForm), String> {
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

/// The positional parameter names of an action, for the short form and for scalar
/// params such as `{"click": 12}`. Old names use the canonical action's order.
pub fn positional_params(name: &str) -> &'static [&'static str] {
    match name {
        "scroll_down" | "scroll_up" => &["amount"],
        _ => match canonical_name(name).unwrap_or("") {
            "navigate" => &["url", "new_tab"],
            "search" => &["query", "engine"],
            "click" => &["index"],
            "input" => &["index", "text", "clear"],
            "scroll" => &["down", "pages", "index"],
            "send_keys" => &["keys"],
            "switch" | "close" => &["tab_id"],
            "wait" => &["seconds"],
            "extract" => &["query"],
            "select_dropdown" => &["index", "text"],
            "dropdown_options" => &["index"],
            "upload_file" => &["index", "path"],
            "find_text" => &["text"],
            "done" => &["text", "success"],
            "search_page" => &["pattern"],
            "find_elements" => &["selector"],
            "evaluate" => &["code"],
            "write_file" => &["file_name", "content"],
            "replace_file" => &["file_name", "old_str", "new_str"],
            "read_file" => &["file_name"],
            _ => &[],
        },
    }
}

/// The canonical name for a canonical or old Browser Use action name; `None` if unknown.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "navigate" | "go_to_url" | "open_tab" => "navigate",
        "search" | "search_google" => "search",
        "click" | "click_element_by_index" | "click_element" => "click",
        "input" | "input_text" => "input",
        "scroll" | "scroll_down" | "scroll_up" => "scroll",
        "send_keys" => "send_keys",
        "switch" | "switch_tab" => "switch",
        "close" | "close_tab" => "close",
        "go_back" => "go_back",
        "wait" => "wait",
        "extract" | "extract_content" | "extract_structured_data" => "extract",
        "select_dropdown" | "select_dropdown_option" => "select_dropdown",
        "dropdown_options" | "get_dropdown_options" => "dropdown_options",
        "upload_file" | "upload_file_to_element" => "upload_file",
        "find_text" | "scroll_to_text" => "find_text",
        "done" => "done",
        _ => return super::CANONICAL_NAMES.iter().copied().find(|c| *c == name),
    })
}

fn positional_object(name: &str, args: &[Value]) -> Result<Value, String> {
    let names = positional_params(name);
    if args.len() > names.len() {
        return Err(if names.is_empty() {
            "takes no arguments".to_string()
        } else {
            format!(
                "takes at most {} positional argument(s) ({}), got {}",
                names.len(),
                names.join(", "),
                args.len()
            )
        });
    }
    let map: Map<String, Value> = names
        .iter()
        .zip(args)
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Ok(Value::Object(map))
}

// ---------------------------------------------------------------- short form

/// Finds the first short-form call (and the calls chained right after it).
/// `Ok(None)` when the text holds no call of a known action name; `Err` when it
/// holds one whose arguments cannot be read (and no readable one).
fn parse_short(text: &str, budget: &mut ScanBudget) -> Result<Option<Parsed>, ParseError> {
    let bytes = text.as_bytes();
    let mut first_error = None;
    let mut pos = 0;
    while let Some(i) = memchr::memchr(b'(', &bytes[pos..]) {
        let paren = pos + i;
        pos = paren + 1;
        let Some(name_start) = ident_start(bytes, paren) else {
            continue;
        };
        if !budget.spend(CANDIDATE_COST) {
            return Err(out_of_budget(name_start, budget));
        }
        match parse_call(text, name_start, paren, budget) {
            Ok(Some((first, end))) => {
                let mut actions = vec![first];
                let mut span_end = end;
                // Chained calls: separated by whitespace, `;` or `,` only.
                loop {
                    let mut j = span_end;
                    while j < bytes.len()
                        && (bytes[j].is_ascii_whitespace() || matches!(bytes[j], b';' | b','))
                    {
                        j += 1;
                    }
                    // The next call must start right here: a name, then `(`.
                    let mut paren = j;
                    while paren < bytes.len() && is_ident_byte(bytes[paren]) {
                        paren += 1;
                    }
                    if paren == j || bytes.get(paren) != Some(&b'(') || bytes[j].is_ascii_digit() {
                        break;
                    }
                    match parse_call(text, j, paren, budget) {
                        Ok(Some((a, e))) => {
                            actions.push(a);
                            span_end = e;
                        }
                        _ => break,
                    }
                }
                let mut parsed = Parsed {
                    action_span: name_start..span_end,
                    object_span: name_start..span_end,
                    form: ResponseForm::Short,
                    ..Parsed::default()
                };
                for c in actions {
                    parsed.warnings.extend(c.warning);
                    parsed.actions.push(c.action);
                }
                return Ok(Some(parsed));
            }
            Ok(None) => {}
            Err(e) => {
                if budget.exhausted() {
                    return Err(out_of_budget(name_start, budget));
                }
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The start of the identifier that ends right before `paren`, if it is a whole word.
fn ident_start(bytes: &[u8], paren: usize) -> Option<usize> {
    let mut s = paren;
    while s > 0 && is_ident_byte(bytes[s - 1]) {
        s -= 1;
    }
    if s == paren || bytes[s].is_ascii_digit() {
        return None;
    }
    // `obj.click(` or `$click(` is not our call.
    if s > 0 && matches!(bytes[s - 1], b'.' | b'$') {
        return None;
    }
    Some(s)
}

/// Parses `name(args)` with the name at `name_start` and `(` at `paren`.
/// `Ok(None)` if the name is not an action name.
fn parse_call(
    text: &str,
    name_start: usize,
    paren: usize,
    budget: &mut ScanBudget,
) -> Result<Option<(super::Canonicalized, usize)>, ParseError> {
    let name = &text[name_start..paren];
    if canonical_name(name).is_none() {
        return Ok(None);
    }
    let (args, kwargs, end) = parse_args(text, paren + 1, budget)
        .map_err(|(off, msg)| ParseError::at(off, format!("in `{name}(...)`: {msg}")))?;
    let mut params = match positional_object(name, &args) {
        Ok(Value::Object(m)) => m,
        Ok(_) => Map::new(),
        Err(msg) => return Err(ParseError::at(name_start, format!("`{name}` {msg}"))),
    };
    for (k, v) in kwargs {
        params.insert(k, v);
    }
    Ok(Some((canonicalize(name, &Value::Object(params)), end)))
}

type Args = (Vec<Value>, Vec<(String, Value)>, usize);

/// Reads call arguments from `start` (just after `(`) to the closing `)`.
fn parse_args(text: &str, start: usize, budget: &mut ScanBudget) -> Result<Args, (usize, String)> {
    let bytes = text.as_bytes();
    let mut args = Vec::new();
    let mut kwargs = Vec::new();
    let mut i = start;
    let skip = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip(i);
    if bytes.get(i) == Some(&b')') {
        return Ok((args, kwargs, i + 1));
    }
    loop {
        i = skip(i);
        // keyword argument?
        let mut key = None;
        let mut j = i;
        while j < bytes.len() && is_ident_byte(bytes[j]) {
            j += 1;
        }
        if j > i {
            let k = skip(j);
            if bytes.get(k) == Some(&b'=') && bytes.get(k + 1) != Some(&b'=') {
                key = Some(text[i..j].to_string());
                i = skip(k + 1);
            }
        }
        let (value, end) = parse_literal(text, i, budget)?;
        match key {
            Some(k) => kwargs.push((k, value)),
            None if !kwargs.is_empty() => {
                return Err((i, "a positional argument follows a keyword argument".into()));
            }
            None => args.push(value),
        }
        i = skip(end);
        match bytes.get(i) {
            Some(b',') => {
                i += 1;
                if bytes.get(skip(i)) == Some(&b')') {
                    return Ok((args, kwargs, skip(i) + 1));
                }
            }
            Some(b')') => return Ok((args, kwargs, i + 1)),
            Some(_) => return Err((i, "expected `,` or `)` after an argument".into())),
            None => return Err((i, "the call is never closed (missing `)`)".into())),
        }
    }
}

/// Longest bare literal (number, `true`, `None`, ...) read before it is refused.
const MAX_BARE_LITERAL: usize = 64;

/// The error for a scan the budget cut short, or for an unclosed one.
fn unclosed(i: usize, what: &str, b: Bounded) -> (usize, String) {
    match b {
        Bounded::OutOfBudget => (i, "gave up: too much unclosed text to scan".into()),
        _ => (i, format!("the {what} is never closed")),
    }
}

/// One literal argument: a JSON or single-quoted string, number, boolean (also
/// Python's `True`/`False`), null/`None`, or a JSON object/list.
fn parse_literal(
    text: &str,
    i: usize,
    budget: &mut ScanBudget,
) -> Result<(Value, usize), (usize, String)> {
    let bytes = text.as_bytes();
    match bytes.get(i) {
        None => Err((i, "the call is never closed (missing `)`)".into())),
        Some(b'"') => {
            let end = match string_end_within(bytes, i, budget) {
                Bounded::End(end) => end,
                b => return Err(unclosed(i, "string", b)),
            };
            let s: String = serde_json::from_str(&text[i..end])
                .map_err(|e| (i, format!("bad string literal: {e}")))?;
            Ok((Value::String(s), end))
        }
        Some(b'\'') => {
            let limit = (i + 1).saturating_add(budget.left()).min(bytes.len());
            let mut out = String::new();
            let mut chars = text[i + 1..].char_indices();
            while let Some((k, c)) = chars.next() {
                if i + 1 + k >= limit {
                    budget.spend(limit - i);
                    return Err(unclosed(i, "string", Bounded::OutOfBudget));
                }
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 't')) => out.push('\t'),
                        Some((_, e)) => out.push(e),
                        None => break,
                    },
                    '\'' => {
                        budget.spend(k + 2);
                        return Ok((Value::String(out), i + 1 + k + 1));
                    }
                    c => out.push(c),
                }
            }
            budget.spend(bytes.len() - i);
            Err((i, "the string is never closed".into()))
        }
        Some(b'{' | b'[') => {
            let end = match balanced_end_within(bytes, i, budget) {
                Bounded::End(end) => end,
                b => return Err(unclosed(i, "bracket", b)),
            };
            let v = serde_json::from_str(&text[i..end])
                .map_err(|e| (i, format!("invalid JSON argument: {e}")))?;
            Ok((v, end))
        }
        Some(_) => {
            // A bare literal ends at `,` or `)`; a `(` means prose such as
            // `click(the click(` and is not read past.
            let limit = i.saturating_add(MAX_BARE_LITERAL + 1).min(bytes.len());
            let end = bytes[i..limit]
                .iter()
                .position(|b| matches!(b, b',' | b')' | b'('))
                .map_or(limit, |k| i + k);
            budget.spend(end - i);
            let tok = String::from_utf8_lossy(&bytes[i..end]);
            let tok = tok.trim();
            if end == limit && end < bytes.len() && !matches!(bytes[end], b',' | b')') {
                return Err((
                    i,
                    format!(
                        "argument `{}…` is not a number, string, boolean or null",
                        crate::util::sanitize::clean_line(clip(tok, 40))
                    ),
                ));
            }
            let v = match tok {
                "true" | "True" => Value::Bool(true),
                "false" | "False" => Value::Bool(false),
                "null" | "None" => Value::Null,
                _ => match serde_json::from_str::<Value>(tok) {
                    Ok(v @ Value::Number(_)) => v,
                    _ => {
                        return Err((
                            i,
                            format!(
                                "argument `{}` is not a number, string, boolean or null",
                                crate::util::sanitize::clean_line(clip(tok, 40))
                            ),
                        ));
                    }
                },
            };
            Ok((v, end))
        }
    }
}

fn clip(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Action {
        let p = parse_response(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(p.actions.len(), 1, "{text}");
        p.actions[0].clone()
    }

    fn err(text: &str) -> ParseError {
        parse_response(text).expect_err(text)
    }

    #[test]
    fn flat_browser_use_output() {
        let t = r#"{"thinking": "the button", "evaluation_previous_goal": "ok", "memory": "m", "next_goal": "g", "action": [{"click": {"index": 12}}]}"#;
        let p = parse_response(t).unwrap();
        assert_eq!(p.actions, [Action::new("click", json!({"index": 12}))]);
        assert_eq!(p.thinking.as_deref(), Some("the button"));
        assert_eq!(p.evaluation_previous_goal.as_deref(), Some("ok"));
        assert_eq!(p.memory.as_deref(), Some("m"));
        assert_eq!(p.next_goal.as_deref(), Some("g"));
        assert_eq!(&t[p.action_span.clone()], r#"[{"click": {"index": 12}}]"#);
        assert_eq!(p.object_span, 0..t.len());
        assert_eq!(p.form, ResponseForm::BrowserUse);
    }

    #[test]
    fn old_nested_current_state_form() {
        let t = r#"{"current_state": {"evaluation_previous_goal": "Success", "memory": "on page 2", "next_goal": "type"}, "action": [{"input_text": {"index": 5, "text": "alice"}}, {"click_element_by_index": {"index": 6}}]}"#;
        let p = parse_response(t).unwrap();
        assert_eq!(p.memory.as_deref(), Some("on page 2"));
        assert_eq!(p.next_goal.as_deref(), Some("type"));
        assert_eq!(
            p.actions,
            [
                Action::new("input", json!({"index": 5, "text": "alice"})),
                Action::new("click", json!({"index": 6}))
            ]
        );
    }

    #[test]
    fn fenced_block_with_reasoning_around_it() {
        let t = "I should open the next page {maybe}.\n```json\n{\"action\": [{\"go_to_url\": {\"url\": \"https://a.test/{x}\"}}]}\n```\nThat's it.";
        let p = parse_response(t).unwrap();
        assert_eq!(p.actions[0].name, "navigate");
        assert_eq!(p.actions[0].params["url"], json!("https://a.test/{x}"));
        assert_eq!(p.actions[0].params["new_tab"], json!(false));
        assert_eq!(
            &t[p.action_span.clone()],
            "[{\"go_to_url\": {\"url\": \"https://a.test/{x}\"}}]"
        );
    }

    #[test]
    fn json_before_free_text() {
        let t = r#"{"action":[{"done":{"text":"42 }","success":true}}]} -- done because {"#;
        let a = one(t);
        assert_eq!(
            a,
            Action::new("done", json!({"text": "42 }", "success": true}))
        );
    }

    #[test]
    fn braces_and_quotes_inside_strings() {
        let t = r#"{"thinking": "a } brace and \"quote\" and [bracket", "action": [{"input": {"index": 1, "text": "{\"a\": [1]}"}}]}"#;
        let p = parse_response(t).unwrap();
        assert_eq!(p.actions[0].params["text"], json!("{\"a\": [1]}"));
        assert!(t[p.action_span.clone()].starts_with("[{\"input\""));
        assert!(t[p.action_span.clone()].ends_with("}}]"));
    }

    #[test]
    fn canonical_forms() {
        let a = one(r#"{"name": "click", "params": {"index": 3}}"#);
        assert_eq!(a, Action::new("click", json!({"index": 3})));
        let t = r#"note: {"actions": [{"name": "search_google", "params": {"query": "rust"}}]}"#;
        let p = parse_response(t).unwrap();
        assert_eq!(p.form, ResponseForm::Canonical);
        assert_eq!(p.actions[0].name, "search");
        assert_eq!(p.actions[0].params["engine"], json!("google"));
        assert_eq!(
            &t[p.action_span.clone()],
            r#"[{"name": "search_google", "params": {"query": "rust"}}]"#
        );
        // A canonical item inside Browser Use's `action` list.
        let a = one(r#"{"action": [{"name": "go_back", "params": {}}]}"#);
        assert_eq!(a.name, "go_back");
    }

    #[test]
    fn scalar_and_null_params() {
        assert_eq!(
            one(r#"{"action":[{"click": 7}]}"#),
            Action::new("click", json!({"index": 7}))
        );
        assert_eq!(one(r#"{"action":[{"go_back": null}]}"#).name, "go_back");
        assert_eq!(
            one(r#"{"action":[{"click": {"index": 4}, "input": null}]}"#),
            Action::new("click", json!({"index": 4}))
        );
    }

    #[test]
    fn short_forms() {
        assert_eq!(one("click(12)"), Action::new("click", json!({"index": 12})));
        assert_eq!(
            one(r#"input(5, "text, with (parens)")"#),
            Action::new("input", json!({"index": 5, "text": "text, with (parens)"}))
        );
        assert_eq!(
            one(r#"navigate("https://a.test/?q=1")"#).params["url"],
            json!("https://a.test/?q=1")
        );
        assert_eq!(
            one(r#"done("The answer is 4", true)"#),
            Action::new("done", json!({"text": "The answer is 4", "success": true}))
        );
        assert_eq!(one("go_back()"), Action::new("go_back", json!({})));
        assert_eq!(
            one("scroll(down=False, pages=2.5)"),
            Action::new("scroll", json!({"down": false, "pages": 2.5}))
        );
        assert_eq!(
            one("input_text(3, 'it\\'s')"),
            Action::new("input", json!({"index": 3, "text": "it's"}))
        );
        assert_eq!(one("switch_tab(2)").params["tab_id"], json!(2));
    }

    #[test]
    fn short_form_span_and_chains() {
        let t = "I will type the name now: input(5, \"alice\"); click(6) and then wait.";
        let p = parse_response(t).unwrap();
        assert_eq!(p.form, ResponseForm::Short);
        assert_eq!(p.actions.len(), 2);
        assert_eq!(&t[p.action_span.clone()], "input(5, \"alice\"); click(6)");
    }

    #[test]
    fn prose_calls_are_skipped_for_real_ones() {
        // `click(the button)` is prose; `click(4)` is the action.
        let p = parse_response("I could click(the button) but better: click(4)").unwrap();
        assert_eq!(p.actions, [Action::new("click", json!({"index": 4}))]);
        // Method calls and unknown names are not actions.
        assert!(parse_response("page.click(3) or foo(3)").is_err());
    }

    #[test]
    fn errors_name_the_problem_and_its_byte() {
        let t = r#"{"action": [{"click": {"index": 12}}"#;
        let e = err(t);
        assert_eq!(e.offset, Some(0));
        assert!(e.message.contains("never closed"), "{}", e.message);

        let t = r#"xx {"action": [{"click": {"index": 12,}}]}"#;
        let e = err(t);
        let off = e.offset.unwrap();
        assert!(
            e.message
                .starts_with(&format!("at byte {off}: invalid JSON")),
            "{}",
            e.message
        );
        assert_eq!(&t[off - 1..=off], ",}", "{}", e.message);

        let t = r#"{"action": []}"#;
        let e = err(t);
        assert_eq!(e.offset, Some(11));
        assert!(e.message.contains("empty"));

        let t = r#"{"action": [{"click": {"index": 1}}, 7]}"#;
        let e = err(t);
        assert_eq!(e.offset, Some(37));
        assert!(e.message.contains("item 2"), "{}", e.message);

        let e = err(r#"{"action": [{"click": {"index": 1}, "input": {"index": 2}}]}"#);
        assert!(e.message.contains("several actions"), "{}", e.message);

        let e = err(r#"{"action": {"click": {"index": 1}}}"#);
        assert!(e.message.contains("must be a list"), "{}", e.message);
        assert_eq!(e.offset, Some(11));

        let e = err("click(12");
        assert!(e.message.contains("never closed"), "{}", e.message);
        let e = err("click(1, 2)");
        assert!(e.message.contains("at most 1"), "{}", e.message);
        assert_eq!(e.offset, Some(0));

        let huge = format!("click(1){}", " ".repeat(MAX_RESPONSE_BYTES));
        assert!(err(&huge).message.contains("over the 1024 KiB limit"));

        let e = err("I have no idea what to do.");
        assert_eq!(e.offset, None);
        assert!(e.message.contains("no action found"));
    }

    fn fill(unit: &str, len: usize) -> String {
        let mut s = unit.repeat(len / unit.len() + 1);
        s.truncate(len);
        s
    }

    /// Thread CPU seconds (a loaded machine does not make it grow).
    fn cpu_seconds() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    /// `err` that fails when the parse takes more than a second of CPU (a few
    /// milliseconds in a release build; minutes when every `{` rescanned the rest).
    fn quick_err(text: &str) -> ParseError {
        let start = cpu_seconds();
        let e = err(text);
        let took = cpu_seconds() - start;
        assert!(took < 1.0, "{took:.2} s for {:?}…", clip(text, 12));
        e
    }

    #[test]
    fn hostile_megabyte_candidates_get_their_answer_in_linear_time() {
        let err = quick_err;
        let n = MAX_RESPONSE_BYTES;
        let e = err(&fill("{", n));
        assert!(e.message.contains("never closed"), "{}", e.message);
        // 174k calls, each opening the next: the first one's error, or the budget.
        let e = err(&fill("click(", n));
        assert!(
            e.message.contains("is not a number") || e.message.contains("gave up"),
            "{}",
            e.message
        );
        let e = err(&fill("click({", n));
        assert!(
            e.message.contains("gave up") || e.message.contains("never closed"),
            "{}",
            e.message
        );
        let e = err(&fill(r#"{"action": ["#, n));
        assert!(
            e.message.contains("never closed") || e.message.contains("gave up"),
            "{}",
            e.message
        );
        for unit in [r#"{"a":"#, r#"{"{"#, r#"input(1, ""#, "input(1, '"] {
            let _ = err(&fill(unit, n));
        }
        // Prose full of braces and calls does not hide a real action at its end.
        let action = r#"{"action": [{"click": {"index": 3}}]}"#;
        let mut t = fill("I think {maybe} click(the button) ", n - action.len());
        t.push_str(action);
        assert_eq!(one(&t), Action::new("click", json!({"index": 3})));
    }

    #[test]
    fn the_scan_budget_is_spent_once_per_byte_on_ordinary_text() {
        let t = format!(
            "{}{{\"action\": [{{\"go_back\": null}}]}}",
            "so {it} goes; ".repeat(5000)
        );
        let mut budget = ScanBudget::for_len(t.len());
        let start = memchr::memchr(b'{', t.as_bytes()).unwrap();
        assert!(matches!(
            parse_object(&t, start, &mut budget),
            Candidate::NotJson(_)
        ));
        assert!(budget.spent() < 4, "{}", budget.spent());
        assert_eq!(one(&t).name, "go_back");
    }

    #[test]
    fn unknown_names_are_kept_with_a_warning() {
        let p = parse_response(r#"{"action": [{"drag": {"from": 1}}]}"#).unwrap();
        assert_eq!(p.actions[0].name, "drag");
        assert_eq!(p.warnings.len(), 1);
    }

    #[test]
    fn first_action_object_wins_and_other_json_is_skipped() {
        let t = r#"{"note": 1} then {"action": [{"click": {"index": 1}}]} or {"action": [{"click": {"index": 2}}]}"#;
        assert_eq!(one(t).params["index"], json!(1));
    }

    #[test]
    fn multibyte_text_keeps_spans_on_char_boundaries() {
        let t = "Ich klicke auf „Weiter“ → {\"action\": [{\"click\": {\"index\": 2}}]} ✓";
        let p = parse_response(t).unwrap();
        assert_eq!(&t[p.action_span.clone()], "[{\"click\": {\"index\": 2}}]");
    }
}
