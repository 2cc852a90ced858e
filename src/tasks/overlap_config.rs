//! Thresholds of `rmsweb tasks overlap`, read from the `[overlap]` table of a TOML
//! file (every key optional; unknown keys refused with their name).

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// When a training task counts as overlapping a benchmark task.
///
/// A pair is flagged when the benchmark task's word n-grams are contained in the
/// training task at `containment` or more, or their word sets have a Jaccard
/// similarity of `jaccard` or more. Two tasks on the same website are held to the
/// lower `same_site_*` thresholds: a paraphrase on the benchmark's own site is the
/// leak that matters most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverlapConfig {
    /// Words per n-gram (a benchmark task shorter than this counts as one n-gram of
    /// its whole text).
    pub ngram: usize,
    /// Share of the benchmark task's n-grams found in the training task.
    pub containment: f64,
    /// Jaccard similarity of the two tasks' word sets.
    pub jaccard: f64,
    /// `containment` for two tasks on the same website.
    pub same_site_containment: f64,
    /// `jaccard` for two tasks on the same website.
    pub same_site_jaccard: f64,
    /// Shared n-grams kept as evidence per flagged pair.
    pub max_evidence: usize,
}

impl Default for OverlapConfig {
    fn default() -> Self {
        OverlapConfig {
            ngram: 4,
            containment: 0.5,
            jaccard: 0.7,
            same_site_containment: 0.35,
            same_site_jaccard: 0.5,
            max_evidence: 8,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    overlap: OverlapConfig,
}

impl OverlapConfig {
    /// Reads the `[overlap]` table of `path` (defaults for what it leaves out).
    pub fn load(path: &Path) -> Result<OverlapConfig> {
        let text = crate::util::fs::read_config(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let file: File =
            toml::from_str(&text).with_context(|| format!("{}: invalid", path.display()))?;
        file.overlap
            .check()
            .with_context(|| format!("{}: [overlap]", path.display()))?;
        Ok(file.overlap)
    }

    /// Refuses values that make no sense, naming the key.
    pub fn check(&self) -> Result<()> {
        if !(1..=16).contains(&self.ngram) {
            bail!("ngram = {}: must be 1 to 16 words", self.ngram);
        }
        for (key, v) in [
            ("containment", self.containment),
            ("jaccard", self.jaccard),
            ("same_site_containment", self.same_site_containment),
            ("same_site_jaccard", self.same_site_jaccard),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                bail!("{key} = {v}: must be above 0 and at most 1");
            }
        }
        Ok(())
    }

    /// The (containment, jaccard) thresholds for a pair, by whether it shares a site.
    pub fn thresholds(&self, same_site: bool) -> (f64, f64) {
        if same_site {
            (self.same_site_containment, self.same_site_jaccard)
        } else {
            (self.containment, self.jaccard)
        }
    }

    /// The lowest Jaccard threshold any pair is held to (the candidate filter's).
    pub fn min_jaccard(&self) -> f64 {
        self.jaccard.min(self.same_site_jaccard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_sets_some_keys_and_unknown_or_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.toml");
        std::fs::write(&p, "[overlap]\nngram = 3\njaccard = 0.8\n").unwrap();
        let c = OverlapConfig::load(&p).unwrap();
        assert_eq!((c.ngram, c.jaccard), (3, 0.8));
        assert_eq!(c.containment, OverlapConfig::default().containment);

        std::fs::write(&p, "[overlap]\njacard = 0.8\n").unwrap();
        let e = format!("{:#}", OverlapConfig::load(&p).unwrap_err());
        assert!(e.contains("jacard"), "{e}");

        std::fs::write(&p, "[overlap]\ncontainment = 1.5\n").unwrap();
        let e = format!("{:#}", OverlapConfig::load(&p).unwrap_err());
        assert!(e.contains("containment = 1.5"), "{e}");
    }
}
