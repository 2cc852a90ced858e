//! State alignment (ALGORITHMS.md §4.3): how comparable a success-side state and a
//! loc-side state are, from URL, DOM element signatures, agent memory and progress.
//!
//! Everything a comparison needs is computed once per state into a [`StateView`], so
//! that the n×m candidate grid of a trajectory pair costs a few set intersections.

use super::config::AlignmentWeights;
use crate::trajectory::{Element, State};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Attributes that identify an element (never its highlight index).
pub const KEY_ATTRS: &[&str] = &[
    "id",
    "name",
    "type",
    "role",
    "href",
    "placeholder",
    "aria-label",
    "value",
    "checked",
    "selected",
];

/// Attributes that hold the element's current value rather than its identity.
const STATE_ATTRS: &[&str] = &["value", "checked", "selected"];

/// Lower-cases and collapses whitespace.
pub fn normalize_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(w.chars().flat_map(char::to_lowercase));
    }
    out
}

fn signature(e: &Element, with_state: bool) -> u64 {
    let mut h = DefaultHasher::new();
    normalize_text(&e.tag).hash(&mut h);
    normalize_text(&e.role).hash(&mut h);
    normalize_text(&e.text).hash(&mut h);
    for k in KEY_ATTRS {
        if !with_state && STATE_ATTRS.contains(k) {
            continue;
        }
        if let Some(v) = e.attrs.get(*k) {
            k.hash(&mut h);
            v.trim().hash(&mut h);
        }
    }
    h.finish()
}

/// The signature of an element: tag, role, normalized text and key attributes
/// (including its value/checked/selected state), never the index.
pub fn element_signature(e: &Element) -> u64 {
    signature(e, true)
}

/// Like [`element_signature`] but without the value/checked/selected state: the same
/// control whatever was typed into it.
pub fn element_identity(e: &Element) -> u64 {
    signature(e, false)
}

/// A URL reduced for comparison: normalized form, host, host + path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UrlKey {
    pub full: String,
    pub host: String,
    pub host_path: String,
}

/// Normalizes a URL: scheme/host case, default port, trailing slash, fragment,
/// `utm_*` parameters and query order do not matter. Unparseable text is compared
/// as trimmed lower-case text.
pub fn url_key(raw: &str) -> UrlKey {
    let Ok(u) = url::Url::parse(raw.trim()) else {
        let t = raw.trim().to_lowercase();
        return UrlKey {
            full: t.clone(),
            host: String::new(),
            host_path: t,
        };
    };
    let host = u.host_str().unwrap_or("").to_lowercase();
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = u.path().trim_end_matches('/').to_string();
    let mut query: Vec<(String, String)> = u
        .query_pairs()
        .filter(|(k, _)| !k.starts_with("utm_"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    query.sort();
    let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let host_path = format!("{host}{port}{path}");
    UrlKey {
        full: format!("{}://{host_path}?{}", u.scheme(), q.join("&")),
        host: format!("{host}{port}"),
        host_path,
    }
}

/// URL part: 1 same normalized URL, 0.7 same host+path, 0.4 same host, else 0.
pub fn url_score(a: &UrlKey, b: &UrlKey) -> f64 {
    if a.full == b.full {
        1.0
    } else if a.host_path == b.host_path {
        0.7
    } else if !a.host.is_empty() && a.host == b.host {
        0.4
    } else {
        0.0
    }
}

/// Jaccard similarity of two sorted, deduplicated sets; 1 when both are empty.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    crate::util::sorted_set::jaccard(a, b)
}

fn hashed_set<I: IntoIterator<Item = u64>>(it: I) -> Vec<u64> {
    let mut v: Vec<u64> = it.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Word tokens (alphanumeric runs, lower-cased), hashed as a set.
pub fn token_set(s: &str) -> Vec<u64> {
    hashed_set(
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| {
                let mut h = DefaultHasher::new();
                w.to_lowercase().hash(&mut h);
                h.finish()
            }),
    )
}

/// One side of a pair: a trajectory and its precomputed state views.
#[derive(Clone, Copy)]
pub struct Side<'a> {
    pub traj: &'a crate::trajectory::Trajectory,
    pub views: &'a [StateView],
}

/// What alignment needs of one state, computed once.
#[derive(Debug, Clone, Default)]
pub struct StateView {
    pub url: UrlKey,
    /// Sorted set of element signatures.
    pub dom: Vec<u64>,
    /// `(index, signature, identity)` of every element, in page order.
    pub elements: Vec<(u32, u64, u64)>,
    /// Sorted set of memory tokens.
    pub memory: Vec<u64>,
    /// Normalized progress of the step in its trajectory, 0..=1.
    pub progress: f64,
}

impl StateView {
    /// Precomputes a state's view; `progress` is the step's position / (len − 1),
    /// computed from the trajectory rather than trusted from the record.
    pub fn new(state: &State, progress: f64) -> Self {
        let elements: Vec<(u32, u64, u64)> = state
            .elements
            .iter()
            .map(|e| (e.index, element_signature(e), element_identity(e)))
            .collect();
        StateView {
            url: url_key(&state.url),
            dom: hashed_set(elements.iter().map(|e| e.1)),
            elements,
            memory: token_set(&state.memory),
            progress,
        }
    }

    /// Signature and identity of the element with this index.
    pub fn element(&self, index: i64) -> Option<(u64, u64)> {
        self.elements
            .iter()
            .find(|e| i64::from(e.0) == index)
            .map(|e| (e.1, e.2))
    }

    /// The index of an element with this signature, if the page has one.
    pub fn index_of_signature(&self, sig: u64) -> Option<u32> {
        self.elements.iter().find(|e| e.1 == sig).map(|e| e.0)
    }
}

/// The alignment parts of a candidate and their weighted sum.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Alignment {
    pub url: f64,
    pub dom: f64,
    pub memory: f64,
    /// `1 − |p_i − p_j|`.
    pub progress: f64,
    pub total: f64,
}

/// Alignment = w_url·url + w_dom·dom + w_mem·memory + w_prog·(1 − |p_i − p_j|).
pub fn align(a: &StateView, b: &StateView, w: &AlignmentWeights) -> Alignment {
    let url = url_score(&a.url, &b.url);
    let dom = jaccard(&a.dom, &b.dom);
    let memory = jaccard(&a.memory, &b.memory);
    let progress = 1.0 - (a.progress - b.progress).abs();
    Alignment {
        url,
        dom,
        memory,
        progress,
        total: w.url * url + w.dom * dom + w.memory * memory + w.progress * progress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn el(index: u32, tag: &str, text: &str) -> Element {
        Element {
            index,
            tag: tag.into(),
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn signature_ignores_index_and_whitespace_but_not_attrs() {
        let a = el(1, "button", "Add  to Cart");
        let b = el(77, "button", "add to cart");
        assert_eq!(element_signature(&a), element_signature(&b));
        let mut c = b.clone();
        c.attrs = BTreeMap::from([("href".into(), "/x".into())]);
        assert_ne!(element_signature(&a), element_signature(&c));
        let mut d = el(3, "input", "");
        d.attrs.insert("value".into(), "2026-01-02".into());
        let mut e = d.clone();
        e.attrs.insert("value".into(), "2026-01-03".into());
        assert_ne!(element_signature(&d), element_signature(&e));
        assert_eq!(element_identity(&d), element_identity(&e));
    }

    #[test]
    fn url_levels() {
        let k = |s| url_key(s);
        let base = k("https://Shop.example/a/b/?q=1&utm_source=x&z=2#frag");
        assert_eq!(
            url_score(&base, &k("https://shop.example/a/b?z=2&q=1")),
            1.0
        );
        assert_eq!(url_score(&base, &k("https://shop.example/a/b?q=3")), 0.7);
        assert_eq!(url_score(&base, &k("https://shop.example/c")), 0.4);
        assert_eq!(url_score(&base, &k("https://other.example/a/b")), 0.0);
    }

    #[test]
    fn jaccard_counts_shared_members() {
        assert_eq!(jaccard(&[], &[]), 1.0);
        assert_eq!(jaccard(&[1, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard(&[1], &[]), 0.0);
    }
}
