//! The short form of a response: `click(12)`, `input(5, "text")`, keyword
//! arguments and several calls in a row, with the positional parameters of each
//! action.

use super::parsed::{ParseError, Parsed, ResponseForm, out_of_budget};
use crate::action::canonicalize;
use crate::action::scan::{
    Bounded, CANDIDATE_COST, ScanBudget, balanced_end_within, string_end_within,
};
use serde_json::{Map, Value};

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
        _ => {
            return crate::action::CANONICAL_NAMES
                .iter()
                .copied()
                .find(|c| *c == name);
        }
    })
}

pub(super) fn positional_object(name: &str, args: &[Value]) -> Result<Value, String> {
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
pub(super) fn parse_short(
    text: &str,
    budget: &mut ScanBudget,
) -> Result<Option<Parsed>, ParseError> {
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

pub(super) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The start of the identifier that ends right before `paren`, if it is a whole word.
pub(super) fn ident_start(bytes: &[u8], paren: usize) -> Option<usize> {
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
pub(super) fn parse_call(
    text: &str,
    name_start: usize,
    paren: usize,
    budget: &mut ScanBudget,
) -> Result<Option<(crate::action::Canonicalized, usize)>, ParseError> {
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
pub(super) fn parse_args(
    text: &str,
    start: usize,
    budget: &mut ScanBudget,
) -> Result<Args, (usize, String)> {
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
pub(super) const MAX_BARE_LITERAL: usize = 64;

/// The error for a scan the budget cut short, or for an unclosed one.
pub(super) fn unclosed(i: usize, what: &str, b: Bounded) -> (usize, String) {
    match b {
        Bounded::OutOfBudget => (i, "gave up: too much unclosed text to scan".into()),
        _ => (i, format!("the {what} is never closed")),
    }
}

/// One literal argument: a JSON or single-quoted string, number, boolean (also
/// Python's `True`/`False`), null/`None`, or a JSON object/list.
pub(super) fn parse_literal(
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
        Some(b'\'') => single_quoted(text, i, budget),
        Some(b'{' | b'[') => {
            let end = match balanced_end_within(bytes, i, budget) {
                Bounded::End(end) => end,
                b => return Err(unclosed(i, "bracket", b)),
            };
            let v = serde_json::from_str(&text[i..end])
                .map_err(|e| (i, format!("invalid JSON argument: {e}")))?;
            Ok((v, end))
        }
        Some(_) => bare_literal(text, i, budget),
    }
}

pub(super) fn clip(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A single-quoted string at `i` (Python style: `\n` and `\t` escapes, `\` before any
/// other character keeps it), and where it ends.
fn single_quoted(
    text: &str,
    i: usize,
    budget: &mut ScanBudget,
) -> Result<(Value, usize), (usize, String)> {
    let bytes = text.as_bytes();
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

/// A bare literal at `i` (number, boolean or null, also Python's spelling), and where
/// it ends: at `,` or `)`; a `(` means prose such as `click(the click(` and is not
/// read past.
fn bare_literal(
    text: &str,
    i: usize,
    budget: &mut ScanBudget,
) -> Result<(Value, usize), (usize, String)> {
    let bytes = text.as_bytes();
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
