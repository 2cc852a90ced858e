//! Observations in the style of Browser Use: the visible interactive elements with
//! indices (document order, from 1), their tag, role, text, key attributes and
//! bounding box, computed by one JavaScript evaluation in the page; the serialized
//! element list the model reads (`[index]<tag attr=value />text`); a PNG screenshot.

use crate::trajectory::{Element, State};
use crate::util::sanitize::clean_line;
use serde::Deserialize;

/// The page script that lists the interactive elements. It is a function of one
/// argument, a CSS selector of subtrees to leave out (or `null`); it also installs
/// [`HIT_POINT_JS`] as `window.__rmswebHitPoint`.
pub const OBSERVE_JS: &str = include_str!("observe.js");

/// A page function giving the first point of an element that a click would hit (its
/// centre unless that is covered), or `null` when it is covered everywhere.
pub const HIT_POINT_JS: &str = include_str!("hitpoint.js");

/// [`OBSERVE_JS`] ready to call, with its helper inlined.
pub fn observe_script() -> String {
    OBSERVE_JS.replace("__HIT_POINT__", HIT_POINT_JS)
}

/// Attributes shown in `dom_text`, in this order (the element list keeps them all).
pub const DOM_TEXT_ATTRS: &[&str] = &[
    "id",
    "name",
    "type",
    "role",
    "href",
    "placeholder",
    "aria-label",
    "title",
    "value",
    "checked",
    "selected",
];

/// Longest element text shown in `dom_text`, in characters.
pub const DOM_TEXT_MAX_CHARS: usize = 120;

/// What the agent observes before a step.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub url: String,
    pub title: String,
    pub elements: Vec<Element>,
    /// The serialized element list (see [`dom_text`]).
    pub dom_text: String,
    /// PNG bytes of the screenshot, if one was taken.
    pub screenshot: Option<Vec<u8>>,
}

impl Observation {
    /// The trajectory [`State`] of this observation; `screenshot` is the path (relative
    /// to the dataset root) where the caller stored the PNG.
    pub fn to_state(&self, screenshot: Option<String>, memory: &str) -> State {
        State {
            url: self.url.clone(),
            title: self.title.clone(),
            tabs: Vec::new(),
            elements: self.elements.clone(),
            dom_text: self.dom_text.clone(),
            screenshot,
            memory: memory.to_string(),
            progress: 0.0,
            ..State::default()
        }
    }
}

/// The raw result of [`OBSERVE_JS`].
#[derive(Debug, Deserialize)]
pub(crate) struct PageElements {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub elements: Vec<Element>,
}

impl PageElements {
    /// Sanitizes every untrusted string of the page (text, attributes, url, title).
    pub(crate) fn sanitized(mut self) -> PageElements {
        self.url = clean_line(&self.url).into_owned();
        self.title = clean_line(&self.title).into_owned();
        for e in &mut self.elements {
            e.text = clean_line(&e.text).into_owned();
            e.tag = clean_line(&e.tag).into_owned();
            e.role = clean_line(&e.role).into_owned();
            for v in e.attrs.values_mut() {
                *v = clean_line(v).into_owned();
            }
        }
        self
    }
}

/// One element as a `dom_text` line: `[3]<input type=text name=user />` or
/// `[5]<button id=subbtn />Submit`. Values with spaces are quoted.
pub fn element_line(e: &Element) -> String {
    let mut s = format!("[{}]<{}", e.index, e.tag);
    for k in DOM_TEXT_ATTRS {
        let Some(v) = e.attrs.get(*k) else { continue };
        if *k == "role" && v == &e.role && implicit(&e.tag, v) {
            continue;
        }
        let v = clean_line(v);
        let v: String = v.chars().take(80).collect();
        if v.is_empty() || v.contains(char::is_whitespace) || v.contains('"') {
            s.push_str(&format!(" {k}={v:?}"));
        } else {
            s.push_str(&format!(" {k}={v}"));
        }
    }
    if !e.role.is_empty() && !e.attrs.contains_key("role") && !implicit(&e.tag, &e.role) {
        s.push_str(&format!(" role={}", clean_line(&e.role)));
    }
    s.push_str(" />");
    s.push_str(&shown_text(e));
    s
}

/// An element's text as its [`element_line`] shows it: cleaned, and cut at
/// [`DOM_TEXT_MAX_CHARS`] with `…`.
pub fn shown_text(e: &Element) -> String {
    let text = clean_line(&e.text);
    let mut chars = text.chars();
    let mut shown: String = chars.by_ref().take(DOM_TEXT_MAX_CHARS).collect();
    if chars.next().is_some() {
        shown.push('…');
    }
    shown
}

/// Whether `role` is what the tag implies anyway (so it need not be shown).
fn implicit(tag: &str, role: &str) -> bool {
    matches!(
        (tag, role),
        ("a", "link")
            | ("button", "button")
            | ("select", "combobox")
            | ("textarea", "textbox")
            | (
                "input",
                "textbox" | "checkbox" | "radio" | "button" | "slider"
            )
    )
}

/// The serialized element list, one [`element_line`] per element.
pub fn dom_text(elements: &[Element]) -> String {
    let mut out = String::new();
    for e in elements {
        out.push_str(&element_line(e));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn el(index: u32, tag: &str, role: &str, text: &str, attrs: &[(&str, &str)]) -> Element {
        Element {
            index,
            tag: tag.into(),
            role: role.into(),
            text: text.into(),
            attrs: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            bbox: [0.0; 4],
        }
    }

    #[test]
    fn lines_follow_browser_use_form() {
        let e = el(3, "input", "textbox", "", &[("type", "text"), ("id", "tt")]);
        assert_eq!(element_line(&e), "[3]<input id=tt type=text />");
        let b = el(5, "button", "button", "Submit", &[("id", "subbtn")]);
        assert_eq!(element_line(&b), "[5]<button id=subbtn />Submit");
        let h = el(2, "h3", "tab", "Section #4", &[("role", "tab")]);
        assert_eq!(element_line(&h), "[2]<h3 role=tab />Section #4");
        let q = el(1, "a", "link", "x", &[("aria-label", "Close dialog")]);
        assert_eq!(element_line(&q), "[1]<a aria-label=\"Close dialog\" />x");
    }

    #[test]
    fn control_characters_never_reach_dom_text() {
        let e = el(
            1,
            "button",
            "button",
            "ok\u{1b}[31m\u{7}",
            &[("id", "a\nb")],
        );
        let line = element_line(&e);
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        let e = el(1, "a", "link", &"w".repeat(500), &[]);
        let line = element_line(&e);
        assert!(line.ends_with('…'));
        assert!(line.chars().count() < 140);
    }
}
