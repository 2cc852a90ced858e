//! The target-action editor of the Mined pairs tab (`e`): what an annotator types
//! is parsed and checked against the pair's page on every key.

use crate::action::Action as BrowserAction;
use crate::action::parse::parse_response;
use crate::trajectory::Element;
use ratatui_textarea::TextArea;
use serde_json::Value;

/// The target-action editor: the text, and what the parser and the rubric say
/// about it on the pair's page (recomputed on every key).
pub struct EditBox {
    pub area: TextArea<'static>,
    pub parsed: Result<BrowserAction, String>,
    /// The elements of the page the target acts on (the success side's step).
    pub(super) elements: Vec<Element>,
}

impl EditBox {
    pub(super) fn new(initial: &str, elements: Vec<Element>) -> Self {
        let mut area = TextArea::from(initial.lines().map(str::to_owned).collect::<Vec<_>>());
        area.move_cursor(ratatui_textarea::CursorMove::Bottom);
        area.move_cursor(ratatui_textarea::CursorMove::End);
        let mut b = EditBox {
            area,
            parsed: Err(String::new()),
            elements,
        };
        b.reparse();
        b
    }

    pub(super) fn reparse(&mut self) {
        self.parsed = parse_target(&self.area.lines().join("\n"))
            .and_then(|a| fits_page(&a, &self.elements).map(|()| a));
    }
}

/// Refuses a target the page cannot take: an unknown action, a known one with
/// missing or mistyped parameters, or an element index the page does not have.
/// With no recorded elements only the action itself is checked.
pub fn fits_page(a: &BrowserAction, elements: &[Element]) -> Result<(), String> {
    if !crate::action::CANONICAL_NAMES.contains(&a.name.as_str()) {
        return Err(format!(
            "unknown action `{}` (one of {})",
            a.name,
            crate::action::CANONICAL_NAMES.join(", ")
        ));
    }
    crate::action::check::check_params(a).map_err(|e| format!("{}: {}", e.key, e.message))?;
    match a.target_index() {
        Some(i) if !elements.is_empty() && !elements.iter().any(|e| i64::from(e.index) == i) => {
            let shown: Vec<String> = elements
                .iter()
                .take(12)
                .map(|e| e.index.to_string())
                .collect();
            let more = if elements.len() > shown.len() {
                ", …"
            } else {
                ""
            };
            Err(format!(
                "index {i} is not on this page (index.absent: its {} elements are {}{more})",
                elements.len(),
                shown.join(", ")
            ))
        }
        _ => Ok(()),
    }
}

/// Reads a target action typed by an annotator: the canonical JSON form
/// (`{"name": "click", "params": {"index": 3}}`), or anything the action parser
/// accepts (a model response, the short form `click(3)`); the first action counts.
pub fn parse_target(text: &str) -> Result<BrowserAction, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty: type an action".into());
    }
    if let Ok(v) = serde_json::from_str::<Value>(t)
        && v.get("name").is_some_and(Value::is_string)
    {
        return serde_json::from_value::<BrowserAction>(v)
            .map_err(|e| format!("not an action: {e}"));
    }
    match parse_response(t) {
        Ok(p) => p
            .actions
            .into_iter()
            .next()
            .ok_or_else(|| "no action in the text".to_string()),
        Err(e) => Err(e.message),
    }
}

/// JSON made safe for a text box: characters the sanitizer would strip (controls,
/// bidirectional overrides) become `\uXXXX` escapes, which are valid inside JSON
/// strings and round-trip to the same value.
pub fn escape_for_box(json: &str) -> String {
    json.chars()
        .map(|c| {
            if crate::util::sanitize::clean_line(c.encode_utf8(&mut [0; 4])) != c.to_string() {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}
