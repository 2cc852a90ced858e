//! Observation-grounded decoding: the JSON schema a local policy's answer is decoded
//! under when grounding is on (`--grounded`).
//!
//! The schema is Browser Use's model output (the four text fields and one to three
//! actions of the system prompt's vocabulary) narrowed to what the step's observation
//! offers: every element `index` is one of the indices the prompt shows, and the
//! `text` typed by `input` is a value of the task instruction — one of its quoted
//! strings when it quotes any (instructions quote the literal values to type), else
//! one to [`MAX_SPAN_WORDS`] consecutive words; `select_dropdown` may also name the
//! text of a shown element. The decoder also holds every quoted span of the answer's
//! text (`\"…\"` in `thinking`, `next_goal`, …) to the instruction's quoted values
//! ([`crate::model::constrain::QuoteGuard`]), as the teacher's reasoning quotes only
//! those. A small model that has learned *what* to do but not yet to
//! copy exactly then cannot click an element that does not exist or type a value it
//! memorized in training. The rule suits tasks whose typed values stand in the
//! instruction (MiniWoB's); a task that must type text of its own needs it off.

use crate::model::constrain::{QuoteGuard, Schema};
use crate::trajectory::Element;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Longest instruction span, in words, that `input` may type.
pub const MAX_SPAN_WORDS: usize = 4;

/// Most characters of each free-text field (`thinking`, `memory`, …) and of a
/// `navigate` URL: a reply that loops in one field is closed there instead of running
/// out of tokens.
pub const MAX_FIELD_CHARS: usize = 400;

/// Most characters of `send_keys` keys (`Control+Shift+ArrowLeft` is 23).
pub const MAX_KEYS_CHARS: usize = 64;

/// Most values one text parameter offers: the schema matcher follows at most 64
/// alternatives at once, and the values of an enum are alternatives until their
/// bytes differ.
pub const MAX_VALUES: usize = 48;

/// Longest element text offered to `select_dropdown`.
const MAX_OPTION_CHARS: usize = 80;

/// Characters trimmed from both ends of an instruction word.
fn is_edge_punct(c: char) -> bool {
    matches!(
        c,
        '"' | '\''
            | '“'
            | '”'
            | '‘'
            | '’'
            | '.'
            | ','
            | ':'
            | ';'
            | '!'
            | '?'
            | '('
            | ')'
            | '['
            | ']'
    )
}

/// The contents of the quoted strings of `instruction`, in order, without repeats.
pub fn quoted_values(instruction: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, part) in instruction.split('"').enumerate() {
        let part = part.trim();
        if i % 2 == 1 && !part.is_empty() && !out.iter().any(|o| o == part) {
            out.push(part.to_string());
        }
    }
    out.truncate(MAX_VALUES);
    out
}

/// What `input` may type: [`quoted_values`] when there are any, else
/// [`instruction_spans`].
pub fn typed_values(instruction: &str) -> Vec<String> {
    let quoted = quoted_values(instruction);
    if quoted.is_empty() {
        instruction_spans(instruction)
    } else {
        quoted
    }
}

/// The spans of `instruction` a value may be: the contents of its quoted strings,
/// then its single words, then runs of two up to [`MAX_SPAN_WORDS`] words (edge
/// punctuation trimmed), without repeats and at most [`MAX_VALUES`].
pub fn instruction_spans(instruction: &str) -> Vec<String> {
    let mut out = quoted_values(instruction);
    let mut push = |s: &str| {
        let s = s.trim();
        if !s.is_empty() && out.len() < MAX_VALUES && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    let words: Vec<&str> = instruction
        .split_whitespace()
        .map(|w| w.trim_matches(is_edge_punct))
        .collect();
    for len in 1..=MAX_SPAN_WORDS {
        for run in words.windows(len) {
            if run.iter().all(|w| !w.is_empty()) {
                push(&run.join(" "));
            }
        }
    }
    out
}

fn enum_of<T: serde::Serialize>(values: &[T]) -> Value {
    json!({ "enum": values })
}

fn free_text() -> Value {
    json!({"type": "string", "maxLength": MAX_FIELD_CHARS})
}

/// `{"<name>": params}` as an action item.
fn action(name: &str, props: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": {
            name: {
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": false,
            }
        },
        "required": [name],
        "additionalProperties": false,
    })
}

/// The schema of one step's answer: `shown` are the element indices the prompt
/// lists, `elements` the page's elements (for `select_dropdown`'s option texts).
pub fn answer_schema(instruction: &str, shown: &[u32], elements: &[Element]) -> Value {
    let spans = instruction_spans(instruction);
    let typed = typed_values(instruction);
    let mut actions = Vec::new();
    if !shown.is_empty() {
        let index = enum_of(shown);
        let shown_set: BTreeSet<u32> = shown.iter().copied().collect();
        let mut options = spans.clone();
        for e in elements.iter().filter(|e| shown_set.contains(&e.index)) {
            for line in e.text.lines() {
                let t = line.trim();
                if !t.is_empty()
                    && options.len() < MAX_VALUES + MAX_VALUES / 4
                    && t.chars().count() <= MAX_OPTION_CHARS
                    && !options.iter().any(|o| o == t)
                {
                    options.push(t.to_string());
                }
            }
        }
        actions.push(action("click", json!({ "index": index }), &["index"]));
        if !typed.is_empty() {
            actions.push(action(
                "input",
                json!({"index": index, "text": enum_of(&typed), "clear": {"type": "boolean"}}),
                &["index", "text"],
            ));
        }
        if !options.is_empty() {
            actions.push(action(
                "select_dropdown",
                json!({"index": index, "text": enum_of(&options)}),
                &["index", "text"],
            ));
        }
        actions.push(action(
            "scroll",
            json!({"down": {"type": "boolean"}, "pages": {"type": "number"}, "index": index}),
            &["down"],
        ));
    } else {
        actions.push(action(
            "scroll",
            json!({"down": {"type": "boolean"}, "pages": {"type": "number"}}),
            &["down"],
        ));
    }
    actions.push(action(
        "send_keys",
        json!({"keys": {"type": "string", "minLength": 1, "maxLength": MAX_KEYS_CHARS}}),
        &["keys"],
    ));
    actions.push(action("go_back", json!({}), &[]));
    actions.push(action(
        "navigate",
        json!({"url": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS}}),
        &["url"],
    ));
    actions.push(action("wait", json!({"seconds": {"type": "number"}}), &[]));
    actions.push(action(
        "done",
        json!({"text": free_text(), "success": {"type": "boolean"}}),
        &["text", "success"],
    ));
    json!({
        "type": "object",
        "properties": {
            "thinking": free_text(),
            "evaluation_previous_goal": free_text(),
            "memory": free_text(),
            "next_goal": free_text(),
            "action": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": actions}},
        },
        "required": ["evaluation_previous_goal", "memory", "next_goal", "action"],
        "additionalProperties": false,
    })
}

/// Both rules of a grounded step: the compiled [`answer_schema`] and the
/// quoted-span rule over the instruction's [`quoted_values`] (`None` when it quotes
/// nothing).
pub fn step_constraints(
    instruction: &str,
    shown: &[u32],
    elements: &[Element],
) -> anyhow::Result<(Arc<Schema>, Option<QuoteGuard>)> {
    let schema = Schema::compile(&answer_schema(instruction, shown, elements))?;
    Ok((schema, QuoteGuard::new(&quoted_values(instruction))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn element(index: u32, tag: &str, text: &str) -> Element {
        Element {
            index,
            tag: tag.into(),
            role: String::new(),
            text: text.into(),
            attrs: Default::default(),
            bbox: [0.0; 4],
        }
    }

    #[test]
    fn spans_are_quoted_strings_and_short_word_runs_of_the_instruction() {
        let s = instruction_spans("Enter \"bl3H\" into the field, then press Submit.");
        assert_eq!(s[0], "bl3H");
        for want in ["Enter", "into the field", "Submit", "press Submit"] {
            assert!(s.iter().any(|x| x == want), "{want}: {s:?}");
        }
        assert!(
            !s.iter().any(|x| x.ends_with('.') || x.contains('"')),
            "{s:?}"
        );
        let quoted = instruction_spans("Type \"New York City\" please");
        assert_eq!(quoted[0], "New York City");
        assert!(instruction_spans("   ").is_empty());
        let long = (0..40)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let capped = instruction_spans(&format!("Type \"x y\" {long}"));
        assert_eq!(capped.len(), MAX_VALUES);
        assert_eq!(capped[0], "x y");
        assert!(
            capped.iter().any(|s| s == "w39"),
            "every single word fits first"
        );
    }

    #[test]
    fn the_schema_accepts_only_shown_indices_and_instruction_values() {
        let elements = [element(3, "input", ""), element(7, "button", "Submit")];
        let schema = Schema::compile(&answer_schema(
            "Enter \"Jerald\" into the text field.",
            &[3, 7],
            &elements,
        ))
        .unwrap();
        let answer = |act: &str| {
            format!(
                r#"{{"evaluation_previous_goal":"","memory":"","next_goal":"","action":[{act}]}}"#
            )
        };
        assert!(schema.accepts(&answer(
            r#"{"input":{"clear":true,"index":3,"text":"Jerald"}}"#
        )));
        assert!(schema.accepts(&answer(r#"{"click":{"index":7}}"#)));
        assert!(schema.accepts(&answer(
            r#"{"click":{"index":3}},{"done":{"text":"ok","success":true}}"#
        )));
        assert!(schema.accepts(&answer(
            r#"{"select_dropdown":{"index":3,"text":"Submit"}}"#
        )));
        // An index the page does not show, a value the instruction does not hold.
        assert!(!schema.accepts(&answer(r#"{"click":{"index":12}}"#)));
        assert!(!schema.accepts(&answer(r#"{"input":{"index":3,"text":"Miguelita"}}"#)));
        // The instruction quotes its value: no other word of it may be typed.
        assert!(!schema.accepts(&answer(r#"{"input":{"index":3,"text":"field"}}"#)));
        assert!(!schema.accepts(&answer(r#"{"frobnicate":{}}"#)));
        assert!(!schema.accepts(&answer("")));
        // Every string is bounded, so a looping reply closes: keys and URLs too.
        let keys = |n: usize| {
            answer(&format!(
                r#"{{"send_keys":{{"keys":"{}"}}}}"#,
                "k".repeat(n)
            ))
        };
        assert!(schema.accepts(&keys(MAX_KEYS_CHARS)));
        assert!(!schema.accepts(&keys(MAX_KEYS_CHARS + 1)));
        let url = |n: usize| answer(&format!(r#"{{"navigate":{{"url":"{}"}}}}"#, "u".repeat(n)));
        assert!(schema.accepts(&url(MAX_FIELD_CHARS)));
        assert!(!schema.accepts(&url(MAX_FIELD_CHARS + 1)));
    }

    #[test]
    fn typed_values_are_the_quoted_ones_when_the_instruction_quotes() {
        let login =
            "Enter the username \"kanesha\" and the password \"x Y2\" into the text fields.";
        assert_eq!(typed_values(login), ["kanesha", "x Y2"]);
        assert_eq!(quoted_values("say \"a\" then \"a\" and \"\""), ["a"]);
        let unquoted = typed_values("Search for wireless mouse");
        assert!(
            unquoted.iter().any(|v| v == "wireless mouse"),
            "{unquoted:?}"
        );
    }

    #[test]
    fn a_page_without_elements_still_allows_scrolling_and_done() {
        let schema = Schema::compile(&answer_schema("Click OK", &[], &[])).unwrap();
        let ok = r#"{"evaluation_previous_goal":"","memory":"","next_goal":"","action":[{"scroll":{"down":true,"pages":0.5}}]}"#;
        assert!(schema.accepts(ok));
        let click = r#"{"evaluation_previous_goal":"","memory":"","next_goal":"","action":[{"click":{"index":0}}]}"#;
        assert!(!schema.accepts(click));
    }
}
