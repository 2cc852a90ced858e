//! Rubric thresholds and switches, loadable from TOML (`rmsweb reward --config`).
//!
//! Every key is optional and defaults to the documented value; an unknown key is an
//! error that names it, so a typo never silently falls back to a default.
//!
//! ```toml
//! search_jaccard = 0.8            # search: Jaccard of token sets for 0.7
//! extract_jaccard = 0.5           # extract: Jaccard of token sets for 0.7
//! done_token_f1 = 0.5             # done: token F1 for 0.7
//! done_allow_extra_key_tokens = true  # done: extra numbers/dates in the answer are fine
//! check_key_tokens = true         # text params with other numbers/dates cap at 0.3
//! wait_seconds_tolerance = 0.0    # wait: |Δseconds| within this is still 1.0
//! default_wait_seconds = 3.0      # wait: seconds when the action names none
//! strip_query_params = ["utm_*"]  # navigate: query keys ignored (`*` = prefix)
//! url_ignore_fragment = true
//! url_ignore_trailing_slash = true
//! url_sort_query = true
//! equivalent_attrs = ["href"]     # click: attributes that equivalent elements share
//! click_point_tolerance = 8.0     # coordinate clicks with no element boxes: same point within px
//! ```

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Rubric thresholds (TOML-configurable); [`Default`] gives the documented values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewardConfig {
    /// search: Jaccard similarity of the query token sets at or above which (with equal
    /// key tokens) the candidate scores 0.7.
    pub search_jaccard: f64,
    /// extract: Jaccard similarity at or above which the candidate scores 0.7.
    pub extract_jaccard: f64,
    /// done: token F1 at or above which (same flag, key tokens present) it scores 0.7.
    pub done_token_f1: f64,
    /// done: whether the answer may hold key tokens the target lacks (the target's
    /// must all be present either way).
    pub done_allow_extra_key_tokens: bool,
    /// Whether differing key tokens (numbers, dates) cap text parameters at 0.3.
    pub check_key_tokens: bool,
    /// wait: seconds within this distance of the target's count as the same.
    pub wait_seconds_tolerance: f64,
    /// wait: seconds assumed when the action gives none (Browser Use's default).
    pub default_wait_seconds: f64,
    /// navigate: query parameters ignored; `utm_*` matches the prefix, else exact
    /// (case-insensitive).
    pub strip_query_params: Vec<String>,
    /// navigate: ignore the `#fragment`.
    pub url_ignore_fragment: bool,
    /// navigate: `/a/` equals `/a`.
    pub url_ignore_trailing_slash: bool,
    /// navigate: query parameter order does not matter.
    pub url_sort_query: bool,
    /// click and friends: attributes that must be equal for two elements to be
    /// equivalent (besides tag, role and normalized text).
    pub equivalent_attrs: Vec<String>,
    /// Coordinate clicks, when neither point falls in an element box of the state:
    /// points at most this many CSS pixels apart (each axis) count as the same.
    pub click_point_tolerance: f64,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            search_jaccard: 0.8,
            extract_jaccard: 0.5,
            done_token_f1: 0.5,
            done_allow_extra_key_tokens: true,
            check_key_tokens: true,
            wait_seconds_tolerance: 0.0,
            default_wait_seconds: 3.0,
            strip_query_params: vec!["utm_*".into()],
            url_ignore_fragment: true,
            url_ignore_trailing_slash: true,
            url_sort_query: true,
            equivalent_attrs: vec!["href".into()],
            click_point_tolerance: 8.0,
        }
    }
}

impl RewardConfig {
    /// Parses TOML text; `source` names it in errors (a file path, `--config`).
    pub fn from_toml_str(text: &str, source: &str) -> anyhow::Result<Self> {
        let cfg: RewardConfig =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        cfg.validate()
            .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
        Ok(cfg)
    }

    /// Reads a TOML file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = crate::util::fs::read_config(path).context("reading a reward config")?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Checks the ranges: thresholds in 0..=1, seconds finite and not negative.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (key, v) in [
            ("search_jaccard", self.search_jaccard),
            ("extract_jaccard", self.extract_jaccard),
            ("done_token_f1", self.done_token_f1),
        ] {
            if !(0.0..=1.0).contains(&v) {
                bail!("{key} = {v} is outside 0..=1");
            }
        }
        for (key, v) in [
            ("wait_seconds_tolerance", self.wait_seconds_tolerance),
            ("default_wait_seconds", self.default_wait_seconds),
        ] {
            if !v.is_finite() || v < 0.0 {
                bail!("{key} = {v} must be a finite number ≥ 0");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_gives_the_documented_defaults() {
        let c = RewardConfig::from_toml_str("", "t").unwrap();
        assert_eq!(c, RewardConfig::default());
        assert_eq!(c.search_jaccard, 0.8);
        assert_eq!(c.extract_jaccard, 0.5);
        assert_eq!(c.done_token_f1, 0.5);
        assert_eq!(c.strip_query_params, ["utm_*"]);
    }

    #[test]
    fn keys_override_defaults() {
        let c = RewardConfig::from_toml_str("search_jaccard = 0.6\nstrip_query_params = []", "t")
            .unwrap();
        assert_eq!(c.search_jaccard, 0.6);
        assert!(c.strip_query_params.is_empty());
        assert_eq!(c.extract_jaccard, 0.5);
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_refused_by_name() {
        let e = RewardConfig::from_toml_str("search_jacard = 0.6", "reward.toml").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("reward.toml") && msg.contains("search_jacard"),
            "{msg}"
        );
        let e = RewardConfig::from_toml_str("done_token_f1 = 1.5", "reward.toml").unwrap_err();
        assert!(e.to_string().contains("done_token_f1"), "{e}");
        let e = RewardConfig::from_toml_str("url_sort_query = 3", "reward.toml").unwrap_err();
        assert!(e.to_string().contains("url_sort_query"), "{e}");
    }
}
