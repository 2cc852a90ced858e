//! Elements of the state as the rubric sees them: lookup by index, equivalence
//! (same tag, role, normalized text and configured attributes), short descriptions.

use super::config::RewardConfig;
use super::normalize::normalize_text;
use super::quote::quote;
use crate::trajectory::Element;

/// The element with highlight index `index`.
pub fn find(elements: &[Element], index: i64) -> Option<&Element> {
    elements.iter().find(|e| i64::from(e.index) == index)
}

/// The element a viewport point falls in: among the elements whose box (`[x, y,
/// w, h]`, non-empty) holds the point, the smallest (the innermost). `None` when no
/// box holds it, e.g. for states recorded without boxes.
pub fn element_at(elements: &[Element], (x, y): (f64, f64)) -> Option<&Element> {
    elements
        .iter()
        .filter(|e| {
            let [bx, by, w, h] = e.bbox;
            w > 0.0 && h > 0.0 && x >= bx && x <= bx + w && y >= by && y <= by + h
        })
        .min_by(|a, b| (a.bbox[2] * a.bbox[3]).total_cmp(&(b.bbox[2] * b.bbox[3])))
}

/// The text that identifies an element: its text, else its `aria-label`, else its
/// `title`, else its `placeholder`.
pub fn label(e: &Element) -> &str {
    let t = e.text.trim();
    if !t.is_empty() {
        return t;
    }
    ["aria-label", "title", "placeholder"]
        .iter()
        .find_map(|k| e.attrs.get(*k).map(|v| v.trim()).filter(|v| !v.is_empty()))
        .unwrap_or("")
}

/// Whether two distinct elements do the same thing: same tag and role, same
/// normalized label, same configured attributes (absent = absent); and at least one
/// of label or those attributes is non-empty, so that two bare icons never count.
pub fn equivalent(a: &Element, b: &Element, cfg: &RewardConfig) -> bool {
    if !a.tag.eq_ignore_ascii_case(&b.tag) || !a.role.eq_ignore_ascii_case(&b.role) {
        return false;
    }
    let mut informative = false;
    for k in &cfg.equivalent_attrs {
        let (x, y) = (
            a.attrs.get(k).map(|s| s.trim()),
            b.attrs.get(k).map(|s| s.trim()),
        );
        if x != y {
            return false;
        }
        informative |= x.is_some_and(|v| !v.is_empty());
    }
    let (la, lb) = (normalize_text(label(a)), normalize_text(label(b)));
    la == lb && (informative || !la.is_empty())
}

/// `<a> "Next"` (with `role=` when the role says more than the tag).
pub fn describe(e: &Element) -> String {
    let tag = if e.tag.is_empty() { "element" } else { &e.tag };
    let role = if e.role.is_empty() || e.role.eq_ignore_ascii_case(&e.tag) {
        String::new()
    } else {
        format!(" role={}", quote(&e.role))
    };
    format!("<{}{role}> {}", quote_bare(tag), quote(label(e)))
}

fn quote_bare(s: &str) -> String {
    let q = quote(s);
    q[1..q.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn el(index: u32, tag: &str, text: &str, href: Option<&str>) -> Element {
        let mut attrs = BTreeMap::new();
        if let Some(h) = href {
            attrs.insert("href".to_string(), h.to_string());
        }
        Element {
            index,
            tag: tag.into(),
            text: text.into(),
            attrs,
            ..Element::default()
        }
    }

    #[test]
    fn equivalence_needs_tag_text_and_href() {
        let cfg = RewardConfig::default();
        let a = el(1, "a", "Next ", Some("/p/2"));
        assert!(equivalent(&a, &el(9, "A", "next", Some("/p/2")), &cfg));
        assert!(!equivalent(&a, &el(9, "a", "next", Some("/p/3")), &cfg));
        assert!(!equivalent(
            &a,
            &el(9, "button", "Next", Some("/p/2")),
            &cfg
        ));
        assert!(!equivalent(&a, &el(9, "a", "Prev", Some("/p/2")), &cfg));
        // Two bare icons are not equivalent.
        assert!(!equivalent(
            &el(1, "button", "", None),
            &el(2, "button", "", None),
            &cfg
        ));
    }

    #[test]
    fn a_point_resolves_to_the_innermost_box_that_holds_it() {
        let mut outer = el(1, "div", "", None);
        outer.bbox = [0.0, 0.0, 400.0, 300.0];
        let mut button = el(2, "button", "OK", None);
        button.bbox = [40.0, 40.0, 160.0, 40.0];
        let unboxed = el(3, "a", "x", None);
        let els = [outer, button, unboxed];
        assert_eq!(element_at(&els, (120.0, 60.0)).map(|e| e.index), Some(2));
        assert_eq!(element_at(&els, (300.0, 200.0)).map(|e| e.index), Some(1));
        assert!(element_at(&els, (500.0, 10.0)).is_none());
    }

    #[test]
    fn description_is_clean_and_short() {
        assert_eq!(describe(&el(1, "a", "Next", None)), "<a> \"Next\"");
        let d = describe(&el(1, "a", "evil\u{1b}[31mred", None));
        assert!(!d.contains('\u{1b}'), "{d}");
    }
}
