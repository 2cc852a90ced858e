//! The difference of two runs' `run.toml`: every dotted key whose value differs
//! (or that only one run has), for the Runs tab's diff view (`D`).

use crate::util::toml_keys::dotted;
use anyhow::{Context, Result};
use std::path::Path;

/// One differing key: its dotted name and each run's value (TOML text), `None`
/// where the run does not set it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyDiff {
    pub key: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

/// The keys of `a` and `b` whose values differ, in key order.
pub fn diff(a: &toml::Table, b: &toml::Table) -> Vec<KeyDiff> {
    let (fa, fb) = (dotted(a), dotted(b));
    let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    keys.into_iter()
        .filter(|k| fa.get(*k) != fb.get(*k))
        .map(|k| KeyDiff {
            key: k.clone(),
            a: fa.get(k).cloned(),
            b: fb.get(k).cloned(),
        })
        .collect()
}

/// Reads `run.toml` of a run folder; errors name the file.
pub fn read_config(run_dir: &Path) -> Result<toml::Table> {
    let path = run_dir.join("run.toml");
    let shown = crate::util::sanitize::clean_line(&path.display().to_string()).into_owned();
    let text = crate::util::fs::read_text_limited(&path, 1 << 20)
        .with_context(|| format!("reading {shown}"))?;
    toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{shown}: {}",
            crate::util::sanitize::clean_line(&e.to_string())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_differing_keys_are_listed_with_both_values() {
        let a: toml::Table =
            toml::from_str("lr = 1e-3\nseed = 1\nmode = \"dapo\"\n[lora]\nr = 8\nalpha = 16.0\n")
                .unwrap();
        let b: toml::Table =
            toml::from_str("lr = 1e-3\nseed = 2\n[lora]\nr = 16\nalpha = 16.0\n").unwrap();
        let d = diff(&a, &b);
        let shown: Vec<(&str, Option<&str>, Option<&str>)> = d
            .iter()
            .map(|k| (k.key.as_str(), k.a.as_deref(), k.b.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("lora.r", Some("8"), Some("16")),
                ("mode", Some("\"dapo\""), None),
                ("seed", Some("1"), Some("2")),
            ]
        );
        assert!(diff(&a, &a).is_empty());
    }
}
