//! The serialized element list Browser Use shows the model (`state_message`, 0.8+):
//! lines such as `[12]<button id=submit type=submit />` or `[12]<a href=/x>Next</a>`,
//! `*[12]` for elements new since the last step, `|SCROLL|[3]<div />` markers, and
//! tab-indented text lines that belong to the element above them.
//!
//! Parsing is lenient by design: a line that is not an element line is page text,
//! never an error. Text lines attach to the nearest preceding element that is less
//! indented than they are; unindented page text attaches to nothing.

use crate::trajectory::Element;
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;

static ELEMENT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\*?)(?:\|[^|\s]*\|)*(\*?)\[(\d{1,9})\]<([A-Za-z][\w:.-]*)(.*)$")
        .expect("static regex")
});

/// The part of a state message that describes the page: the inside of
/// `<browser_state>...</browser_state>` when the message has that section, else the
/// whole message.
pub fn browser_state_section(message: &str) -> &str {
    const OPEN: &str = "<browser_state>";
    const CLOSE: &str = "</browser_state>";
    match message.find(OPEN) {
        Some(start) => {
            let body = &message[start + OPEN.len()..];
            let end = body.find(CLOSE).unwrap_or(body.len());
            body[..end].trim_matches('\n')
        }
        None => message,
    }
}

/// Parses every element line of a serialized element list, in order of appearance.
/// When an index appears twice the first occurrence wins.
pub fn parse_elements(text: &str) -> Vec<Element> {
    let mut elements: Vec<Element> = Vec::new();
    // (indent, position in `elements`) of the open elements, outermost first.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for raw in text.lines() {
        let (indent, line) = split_indent(raw);
        if line.is_empty() {
            continue;
        }
        while open.last().is_some_and(|&(d, _)| d >= indent) {
            open.pop();
        }
        if let Some(el) = parse_element_line(line) {
            if seen.insert(el.index) {
                elements.push(el);
                open.push((indent, elements.len() - 1));
            }
            continue;
        }
        if is_structural(line) {
            continue;
        }
        if let Some(&(_, pos)) = open.last() {
            let text = &mut elements[pos].text;
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(line);
        }
    }
    elements
}

/// A tag line without an index (`<div />`, `|SCROLL|<div />`, `</button>`): page
/// structure, not text.
fn is_structural(line: &str) -> bool {
    let mut rest = line.trim_start_matches('*');
    while let Some(r) = rest
        .strip_prefix('|')
        .and_then(|r| r.split_once('|'))
        .map(|(_, r)| r)
    {
        rest = r;
    }
    let mut chars = rest.chars();
    chars.next() == Some('<')
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        && rest.ends_with('>')
}

/// Indentation depth (a tab or two spaces count as one level) and the rest, trimmed.
fn split_indent(raw: &str) -> (usize, &str) {
    let mut tabs = 0;
    let mut spaces = 0;
    for c in raw.chars() {
        match c {
            '\t' => tabs += 1,
            ' ' => spaces += 1,
            _ => break,
        }
    }
    (tabs + spaces / 2, raw.trim())
}

/// Parses one element line (without its indentation).
pub fn parse_element_line(line: &str) -> Option<Element> {
    let caps = ELEMENT_LINE.captures(line)?;
    let index: u32 = caps.get(3)?.as_str().parse().ok()?;
    let tag = caps.get(4)?.as_str().to_ascii_lowercase();
    let rest = caps.get(5).map_or("", |m| m.as_str());
    let (attr_part, inline_text) = split_tag_rest(rest, &tag);
    let attrs = parse_attrs(attr_part);
    let role = attrs
        .get("role")
        .cloned()
        .unwrap_or_else(|| implicit_role(&tag, attrs.get("type").map(String::as_str)).into());
    Some(Element {
        index,
        tag,
        role,
        text: inline_text.trim().to_string(),
        attrs,
        bbox: [0.0; 4],
    })
}

/// Splits what follows `<tag` into the attribute text and the inline text
/// (`href=/x>Next</a>` → (`href=/x`, `Next`); `id=a />` → (`id=a`, ``)).
fn split_tag_rest<'a>(rest: &'a str, tag: &str) -> (&'a str, &'a str) {
    let trimmed = rest.trim_end();
    let close = format!("</{tag}>");
    if let Some(body) = strip_suffix_ignore_case(trimmed, &close) {
        if let Some(gt) = body.find('>') {
            return (&body[..gt], &body[gt + 1..]);
        }
        return (body, "");
    }
    if let Some(a) = trimmed.strip_suffix("/>") {
        return (a, "");
    }
    if let Some(a) = trimmed.strip_suffix('>')
        && !a.contains('>')
    {
        return (a, "");
    }
    match trimmed.find('>') {
        Some(gt) => (&trimmed[..gt], &trimmed[gt + 1..]),
        None => (trimmed, ""),
    }
}

fn strip_suffix_ignore_case<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    if s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix) {
        Some(&s[..cut])
    } else {
        None
    }
}

/// Parses `k=v k2="quoted value" k3=two words flag` into a map. A bare word after an
/// attribute continues its value (Browser Use writes values unquoted, spaces
/// included); a bare word before any attribute is a flag with an empty value.
fn parse_attrs(s: &str) -> BTreeMap<String, String> {
    let mut attrs = BTreeMap::new();
    let mut last: Option<String> = None;
    for token in tokenize(s) {
        match token.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(is_attr_name_char) => {
                let v = unquote(v);
                attrs.insert(k.to_string(), v.to_string());
                last = Some(k.to_string());
            }
            _ => match &last {
                Some(k) => {
                    if let Some(v) = attrs.get_mut(k) {
                        if !v.is_empty() {
                            v.push(' ');
                        }
                        v.push_str(unquote(&token));
                    }
                }
                None => {
                    attrs.insert(token, String::new());
                }
            },
        }
    }
    attrs
}

fn is_attr_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | '@')
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Splits on whitespace, keeping quoted stretches (`a="b c"`) in one token.
fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            None => {
                if (c == '"' || c == '\'') && cur.ends_with('=') {
                    quote = Some(c);
                }
                cur.push(c);
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The ARIA role a tag has without an explicit `role` attribute.
pub fn implicit_role(tag: &str, input_type: Option<&str>) -> &'static str {
    match tag {
        "a" => "link",
        "button" => "button",
        "select" => "combobox",
        "textarea" => "textbox",
        "option" => "option",
        "img" => "img",
        "summary" => "button",
        "input" => match input_type.unwrap_or("text").to_ascii_lowercase().as_str() {
            "checkbox" => "checkbox",
            "radio" => "radio",
            "submit" | "button" | "reset" | "image" => "button",
            "range" => "slider",
            "number" => "spinbutton",
            "search" => "searchbox",
            _ => "textbox",
        },
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_self_closing_and_inline_text_lines() {
        let els = parse_elements(
            "[12]<button id=submit type=submit />\n\tSubmit order\n[13]<a href=/x>Next</a>\n",
        );
        assert_eq!(els.len(), 2);
        assert_eq!(els[0].index, 12);
        assert_eq!(els[0].tag, "button");
        assert_eq!(els[0].role, "button");
        assert_eq!(els[0].text, "Submit order");
        assert_eq!(els[0].attrs["id"], "submit");
        assert_eq!(els[0].attrs["type"], "submit");
        assert_eq!(els[1].text, "Next");
        assert_eq!(els[1].role, "link");
        assert_eq!(els[1].attrs["href"], "/x");
    }

    #[test]
    fn nesting_new_markers_and_unquoted_values_with_spaces() {
        let text = "Page text at top\n[1]<div role=navigation />\n\t*[2]<a aria-label=Go to cart href=/cart />\n\t\tCart (2)\n\t|SCROLL|<div />\n\tMenu\n|SCROLL|[3]<div />\n[4]<input type=checkbox checked=true />";
        let els = parse_elements(text);
        let idx: Vec<u32> = els.iter().map(|e| e.index).collect();
        assert_eq!(idx, vec![1, 2, 3, 4]);
        assert_eq!(els[0].role, "navigation");
        assert_eq!(els[0].text, "Menu");
        assert_eq!(els[1].attrs["aria-label"], "Go to cart");
        assert_eq!(els[1].text, "Cart (2)");
        assert_eq!(els[3].role, "checkbox");
        assert_eq!(els[3].attrs["checked"], "true");
    }

    #[test]
    fn quoted_values_and_browser_state_section() {
        let msg = "<agent_history>x</agent_history>\n<browser_state>\nCurrent url: a\n[5]<input placeholder=\"Search recipes\" name=q />\n</browser_state>\n<user>y</user>";
        let section = browser_state_section(msg);
        assert!(section.starts_with("Current url"));
        assert!(!section.contains("<user>"));
        let els = parse_elements(section);
        assert_eq!(els[0].attrs["placeholder"], "Search recipes");
        assert_eq!(els[0].role, "textbox");
    }

    #[test]
    fn non_element_lines_are_never_elements() {
        assert!(parse_element_line("[Start of page]").is_none());
        assert!(parse_element_line("[x]<a>").is_none());
        assert!(parse_element_line("<a href=/x>").is_none());
        assert!(parse_elements("").is_empty());
    }
}
