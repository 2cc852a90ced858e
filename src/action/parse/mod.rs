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
//!    and mapped with [`canonicalize`](crate::action::canonicalize).
//!
//! [`Parsed::action_span`] is the byte span of the action list (brackets included) or
//! of the short-form call(s): the RL salvage loss is computed on exactly those bytes.
//!
//! The JSON form is read in `json_form`, the short form in `short_form`, what a
//! parse gives in `parsed`; the entry point is here.

mod json_form;
mod parsed;
mod short_form;

pub use short_form::{canonical_name, positional_params};

use json_form::{Candidate, parse_object};
use parsed::out_of_budget;
pub use parsed::{ParseError, Parsed, ResponseForm};
use short_form::parse_short;

use super::scan::{CANDIDATE_COST, ScanBudget, last_occurrence};

/// Longest response the parser reads (model outputs are a few KiB; this bound keeps
/// the scan's worst case small on adversarial input).
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Parses a model response into actions (see the module documentation for the forms).
///
/// The work is linear in the length of `text` whatever it holds: every candidate
/// tried (each `{`, each `name(`) is charged to a `ScanBudget` of a few passes over
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

#[cfg(test)]
mod tests;
