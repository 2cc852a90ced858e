//! The serialized element list Browser Use shows the model (`state_message`, 0.8+):
//! lines such as `[12]<button id=submit type=submit />` or `[12]<a href=/x>Next</a>`,
//! `*[12]` for elements new since the last step, `|SCROLL|[3]<div />` markers, and
//! tab-indented text lines that belong to the element above them.
//!
//! Parsing is lenient by design: a line that is not an element line is page text,
//! never an error. Text lines attach to the nearest preceding element that is less
//! indented than they are; unindented page text attaches to nothing and becomes
//! the state's page text ([`parse_page`]), with the current tab (`Current tab:
//! 5BA7`) and the scroll position (`0.0 pages above, 1.5 pages below`) read from
//! the lines above the element list.

use crate::trajectory::{Element, Scroll};
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

static PAGES_ABOVE_BELOW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+(?:\.\d+)?) pages above, (\d+(?:\.\d+)?) pages below").expect("static regex")
});

/// What a `<browser_state>` section says about the page besides its elements.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    pub elements: Vec<Element>,
    /// Text lines that belong to no element, in page order, one per line.
    pub page_text: String,
    /// `Current tab: 5BA7`.
    pub current_tab: String,
    /// `N pages above, M pages below`.
    pub scroll: Option<Scroll>,
}

/// Parses a `<browser_state>` section: elements, page text, current tab, scroll.
/// Lines before the `Interactive elements` header (page statistics, the tab list)
/// and the `[Start of page]` / `[End of page]` markers are not page text.
pub fn parse_page(section: &str) -> Page {
    let header = section
        .lines()
        .position(|l| l.trim_start().starts_with("Interactive elements"));
    let (head, body) = match header {
        Some(h) => {
            let cut: usize = section.lines().take(h + 1).map(|l| l.len() + 1).sum();
            (
                &section[..cut.min(section.len())],
                &section[cut.min(section.len())..],
            )
        }
        None => ("", section),
    };
    let (elements, loose) = elements_and_loose_text(body);
    let page_text = loose
        .into_iter()
        .filter(|l| !matches!(*l, "[Start of page]" | "[End of page]" | "empty page"))
        .collect::<Vec<_>>()
        .join("\n");
    let current_tab = head
        .lines()
        .find_map(|l| l.trim().strip_prefix("Current tab:"))
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let scroll = PAGES_ABOVE_BELOW.captures(head).and_then(|c| {
        Some(Scroll {
            pages_above: c.get(1)?.as_str().parse().ok()?,
            pages_below: c.get(2)?.as_str().parse().ok()?,
        })
    });
    Page {
        elements,
        page_text,
        current_tab,
        scroll,
    }
}

/// Parses every element line of a serialized element list, in order of appearance.
/// When an index appears twice the first occurrence wins.
pub fn parse_elements(text: &str) -> Vec<Element> {
    elements_and_loose_text(text).0
}

/// The elements, and the text lines that attach to none of them.
fn elements_and_loose_text(text: &str) -> (Vec<Element>, Vec<&str>) {
    let mut loose = Vec::new();
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
        } else {
            loose.push(line);
        }
    }
    (elements, loose)
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
    fn page_text_tab_and_scroll_come_from_the_browser_state() {
        let section = "<page_stats>1 links</page_stats>\nCurrent tab: 5BA7\nAvailable tabs:\nTab 5BA7: http://a.test/ - A\n\n<page_info>0.0 pages above, 1.5 pages below</page_info>\n\nInteractive elements:\n[Start of page]\nParts catalogue\n[3]<a />\n\tBack to the shop\nW-132 is red.\n[End of page]";
        let p = parse_page(section);
        assert_eq!(p.elements.len(), 1);
        assert_eq!(p.elements[0].text, "Back to the shop");
        assert_eq!(p.page_text, "Parts catalogue\nW-132 is red.");
        assert_eq!(p.current_tab, "5BA7");
        assert_eq!(
            p.scroll,
            Some(Scroll {
                pages_above: 0.0,
                pages_below: 1.5
            })
        );
        // Without the header (older layouts) every loose line is page text.
        let p = parse_page("Hello\n[1]<button />\n\tOK");
        assert_eq!((p.page_text.as_str(), p.scroll), ("Hello", None));
    }

    #[test]
    fn non_element_lines_are_never_elements() {
        assert!(parse_element_line("[Start of page]").is_none());
        assert!(parse_element_line("[x]<a>").is_none());
        assert!(parse_element_line("<a href=/x>").is_none());
        assert!(parse_elements("").is_empty());
    }
}
