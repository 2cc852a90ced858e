//! Mining configuration (`mine.toml`): taxonomy, alignment weights, thresholds, caps
//! and quality-control shares. Every field has the default of ALGORITHMS.md §4; a
//! TOML file only needs the keys it changes.

use super::pair::DEFAULT_TAXONOMY;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Weights of the four alignment parts (they should sum to 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlignmentWeights {
    pub url: f64,
    pub dom: f64,
    pub memory: f64,
    pub progress: f64,
}

impl Default for AlignmentWeights {
    fn default() -> Self {
        AlignmentWeights {
            url: 0.35,
            dom: 0.35,
            memory: 0.15,
            progress: 0.15,
        }
    }
}

/// Everything the miner can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MineConfig {
    /// Failure-mode categories a label may take.
    pub taxonomy: Vec<String>,
    pub weights: AlignmentWeights,
    /// Candidates whose alignment is below this are not comparable states.
    pub min_alignment: f64,
    /// Trajectory pairs per task and kind.
    pub max_pairs_per_kind: usize,
    /// A detour success must be at least this many steps longer than the shortest.
    pub detour_min_extra_steps: usize,
    /// Pairs scoring below this are dropped.
    pub min_score: f64,
    /// `min_score` is multiplied by this for runtime and evaluation failures.
    pub strict_factor: f64,
    /// No category may exceed this share of the output (relaxed when too few exist).
    pub max_category_share: f64,
    /// No domain may exceed this share of the output (relaxed when too few exist).
    pub max_domain_share: f64,
    /// `technical_obstruction` may not exceed this share of the output.
    pub obstruction_cap: f64,
    /// Progress gate: `|p_i - p_j|` must not exceed this.
    pub progress_gate: f64,
    /// Half-width of the evidence window, in steps.
    pub evidence_window: usize,
    /// Teachers whose failures and detours may be a pair's loc side (a trajectory's
    /// `teacher`; a trailing `*` matches any rest, as `local:*` for every local
    /// policy). Empty: every teacher. Successes come from any teacher.
    pub loc_teachers: Vec<String>,
}

impl Default for MineConfig {
    fn default() -> Self {
        MineConfig {
            taxonomy: DEFAULT_TAXONOMY.iter().map(|s| s.to_string()).collect(),
            weights: AlignmentWeights::default(),
            min_alignment: 0.8,
            max_pairs_per_kind: 4,
            detour_min_extra_steps: 2,
            min_score: 0.2,
            strict_factor: 1.5,
            max_category_share: 0.35,
            max_domain_share: 0.25,
            obstruction_cap: 0.10,
            progress_gate: 0.5,
            evidence_window: 2,
            loc_teachers: Vec::new(),
        }
    }
}

impl MineConfig {
    /// Reads a TOML config; errors name the file and the offending key.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::util::fs::read_config(path)?;
        Self::from_toml(&text).with_context(|| format!("{}", path.display()))
    }

    /// Parses and validates a TOML config text.
    pub fn from_toml(text: &str) -> Result<Self> {
        let cfg: MineConfig = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", crate::util::toml_error(text, &e)))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges so that a typo cannot silently empty the output.
    pub fn validate(&self) -> Result<()> {
        let unit = [
            ("min_alignment", self.min_alignment),
            ("min_score", self.min_score),
            ("max_category_share", self.max_category_share),
            ("max_domain_share", self.max_domain_share),
            ("obstruction_cap", self.obstruction_cap),
            ("progress_gate", self.progress_gate),
        ];
        for (name, v) in unit {
            if !(0.0..=1.0).contains(&v) {
                bail!("field `{name}`: {v} is outside 0..=1");
            }
        }
        for (name, v) in [
            ("max_category_share", self.max_category_share),
            ("max_domain_share", self.max_domain_share),
        ] {
            if v <= 0.0 {
                bail!("field `{name}` must be above 0");
            }
        }
        if self.strict_factor < 1.0 {
            bail!("field `strict_factor`: {} is below 1", self.strict_factor);
        }
        let w = self.weights;
        if [w.url, w.dom, w.memory, w.progress]
            .iter()
            .any(|x| *x < 0.0)
        {
            bail!("field `weights`: weights must not be negative");
        }
        if self.taxonomy.is_empty() {
            bail!("field `taxonomy` is empty");
        }
        if self
            .loc_teachers
            .iter()
            .any(|t| t.trim_end_matches('*').is_empty())
        {
            bail!(
                "field `loc_teachers`: an entry is empty or only `*` (leave the list empty for every teacher)"
            );
        }
        Ok(())
    }

    /// Whether a failure or detour by `teacher` may be a pair's loc side.
    pub fn accepts_loc(&self, teacher: &str) -> bool {
        self.loc_teachers.is_empty()
            || self.loc_teachers.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => teacher.starts_with(prefix),
                None => teacher == t,
            })
    }

    /// Whether `category` is one of the taxonomy's.
    pub fn knows(&self, category: &str) -> bool {
        self.taxonomy.iter().any(|c| c == category)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_toml_keeps_defaults() {
        let cfg = MineConfig::from_toml("min_alignment = 0.7\n[weights]\nurl = 0.5\n").unwrap();
        assert_eq!(cfg.min_alignment, 0.7);
        assert_eq!(cfg.weights.url, 0.5);
        assert_eq!(cfg.weights.dom, 0.35);
        assert_eq!(cfg.max_pairs_per_kind, 4);
    }

    #[test]
    fn bad_values_are_refused_with_the_field() {
        let e = MineConfig::from_toml("max_domain_share = 1.5").unwrap_err();
        assert!(format!("{e:#}").contains("max_domain_share"), "{e:#}");
        let e = MineConfig::from_toml("min_scor = 0.1").unwrap_err();
        assert!(format!("{e:#}").contains("min_scor"), "{e:#}");
    }
}
