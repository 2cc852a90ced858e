//! URL normalization for the navigate rule, with the `url` crate: scheme and host
//! case and default ports (done by the parser), trailing slash, fragment, stripped
//! tracking parameters (`utm_*` by default) and query order, all per [`RewardConfig`].
//!
//! A URL written without a scheme (`example.com/a`) is read as `https://`.

use super::config::RewardConfig;
use std::fmt;
use url::Url;

/// A URL reduced to the parts that matter for "the same page".
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedUrl {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
    pub path: String,
    /// Decoded `(key, value)` pairs, tracking parameters removed, sorted if configured.
    pub query: Vec<(String, String)>,
    pub fragment: Option<String>,
}

impl fmt::Display for NormalizedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        f.write_str(if self.path.is_empty() {
            "/"
        } else {
            &self.path
        })?;
        for (i, (k, v)) in self.query.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { '?' } else { '&' })?;
        }
        if let Some(fr) = &self.fragment {
            write!(f, "#{fr}")?;
        }
        Ok(())
    }
}

/// Whether the query key matches one of the patterns (`utm_*` = prefix, else exact),
/// compared case-insensitively.
fn stripped(key: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => key
            .get(..prefix.len())
            .is_some_and(|k| k.eq_ignore_ascii_case(prefix)),
        None => key.eq_ignore_ascii_case(p),
    })
}

/// Normalizes `raw`; `None` when it is not a URL even with `https://` prepended.
pub fn normalize_url(raw: &str, cfg: &RewardConfig) -> Option<NormalizedUrl> {
    let raw = raw.trim();
    let url = match Url::parse(raw) {
        Ok(u) if u.has_host() => u,
        _ => Url::parse(&format!("https://{raw}"))
            .ok()
            .filter(Url::has_host)?,
    };
    let mut path = url.path().to_string();
    if cfg.url_ignore_trailing_slash {
        while path.ends_with('/') {
            path.pop();
        }
    }
    let mut query: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| !stripped(k, &cfg.strip_query_params))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if cfg.url_sort_query {
        query.sort();
    }
    Some(NormalizedUrl {
        scheme: url.scheme().to_string(),
        host: url.host_str().unwrap_or("").to_string(),
        port: url.port(),
        path,
        query,
        fragment: if cfg.url_ignore_fragment {
            None
        } else {
            url.fragment().map(str::to_owned)
        },
    })
}

/// Where two normalized URLs first differ, as a short phrase naming both values
/// (`query date: 2024-05-02 vs target 2024-05-01`), with a rule suffix
/// (`other_host`, `other_path`, `other_query`, `other_url`).
pub fn first_difference(c: &NormalizedUrl, t: &NormalizedUrl) -> (&'static str, String) {
    use crate::reward::quote::quote as q;
    if c.host != t.host {
        return (
            "other_host",
            format!("host {} vs target {}", q(&c.host), q(&t.host)),
        );
    }
    if c.scheme != t.scheme || c.port != t.port {
        return (
            "other_url",
            format!(
                "scheme/port {}:{:?} vs target {}:{:?}",
                c.scheme, c.port, t.scheme, t.port
            ),
        );
    }
    if c.path != t.path {
        return (
            "other_path",
            format!("path {} vs target {}", q(&c.path), q(&t.path)),
        );
    }
    for (k, tv) in &t.query {
        let cv: Vec<&str> = c
            .query
            .iter()
            .filter(|(ck, _)| ck == k)
            .map(|(_, v)| v.as_str())
            .collect();
        if cv.is_empty() {
            return (
                "other_query",
                format!(
                    "query parameter {} missing (target {}={})",
                    q(k),
                    q(k),
                    q(tv)
                ),
            );
        }
        if !cv.contains(&tv.as_str()) {
            return (
                "other_query",
                format!("query {}: {} vs target {}", q(k), q(cv[0]), q(tv)),
            );
        }
    }
    for (k, _) in &c.query {
        if !t.query.iter().any(|(tk, _)| tk == k) {
            return ("other_query", format!("extra query parameter {}", q(k)));
        }
    }
    if c.query != t.query {
        return (
            "other_query",
            "query parameters differ in order or repetition".into(),
        );
    }
    (
        "other_url",
        format!("fragment {:?} vs target {:?}", c.fragment, t.fragment),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> NormalizedUrl {
        normalize_url(s, &RewardConfig::default()).unwrap()
    }

    #[test]
    fn equivalent_spellings_normalize_equal() {
        let base = n("https://shop.test/search?q=shoes&page=2");
        assert_eq!(n("HTTPS://Shop.TEST:443/search/?page=2&q=shoes#top"), base);
        assert_eq!(
            n("https://shop.test/search?utm_source=x&q=shoes&UTM_medium=y&page=2"),
            base
        );
        assert_eq!(n("shop.test/search?q=shoes&page=2"), base);
        assert_eq!(n("https://shop.test/search?q=sh%6Fes&page=2"), base);
    }

    #[test]
    fn differences_are_named() {
        let t = n("https://a.test/f?date=2024-05-01&from=SFO");
        let c = n("https://a.test/f?from=SFO&date=2024-05-02");
        let (rule, why) = first_difference(&c, &t);
        assert_eq!(rule, "other_query");
        assert!(
            why.contains("2024-05-02") && why.contains("2024-05-01"),
            "{why}"
        );
        assert_eq!(
            first_difference(&n("https://b.test/f"), &n("https://a.test/f")).0,
            "other_host"
        );
        assert_eq!(
            first_difference(&n("https://a.test/g"), &n("https://a.test/f")).0,
            "other_path"
        );
        assert_eq!(
            first_difference(&n("http://a.test/f"), &n("https://a.test/f")).0,
            "other_url"
        );
    }

    #[test]
    fn config_switches_are_honoured() {
        let cfg = RewardConfig {
            strip_query_params: vec![],
            url_ignore_fragment: false,
            ..RewardConfig::default()
        };
        let a = normalize_url("https://a.test/?utm_source=x", &cfg).unwrap();
        assert_eq!(a.query.len(), 1);
        let b = normalize_url("https://a.test/#x", &cfg).unwrap();
        assert_eq!(b.fragment.as_deref(), Some("x"));
        assert!(normalize_url("not a url at all", &cfg).is_none());
    }
}
