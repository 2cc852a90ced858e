//! Curation of a teacher collection: the quality filter with the recipe's bounds
//! (`sft/filter.json`), then flattening the kept trajectories (`sft/samples.jsonl`).

use super::Done;
use crate::curate::flatten::{FlattenOptions, samples_path, write_samples};
use crate::curate::{FILTER_FILE, FilterReport, filter_dataset, flatten_kept};
use crate::recipe::config::RecipeConfig;
use crate::recipe::folder::clear;
use crate::recipe::layout::Layout;
use crate::recipe::plan::Arm;
use crate::trajectory::Dataset;
use crate::util::fs::write_atomic;
use anyhow::{Context, Result};

/// Filters a collection.
pub fn filter(cfg: &RecipeConfig, layout: &Layout, arm: Arm) -> Result<Done> {
    let ds = Dataset::open(layout.dataset(arm))?;
    let out = ds.root().join(FILTER_FILE);
    clear(layout, &out)?;
    let report = filter_dataset(&ds, &cfg.filter.to_filter());
    write_atomic(&out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    Ok(Done {
        outputs: vec![out],
        summary: serde_json::json!({
            "trajectories": report.trajectories,
            "kept": report.kept.len(),
            "rejected": report.counts,
        }),
    })
}

/// Flattens the trajectories the filter kept.
pub fn flatten(cfg: &RecipeConfig, layout: &Layout, arm: Arm) -> Result<Done> {
    let ds = Dataset::open(layout.dataset(arm))?;
    let fpath = ds.root().join(FILTER_FILE);
    let text = crate::util::fs::read_record(&fpath)?;
    let filter: FilterReport =
        serde_json::from_str(&text).with_context(|| format!("{}", fpath.display()))?;
    let out = samples_path(&ds);
    clear(layout, &out)?;
    let mut opts = FlattenOptions::default();
    opts.prompt.token_budget = cfg.flatten.token_budget;
    opts.prompt.format = cfg.flatten.format;
    let (samples, report) = flatten_kept(&ds, &filter, &opts, &crate::policy::prompt::CharApprox)?;
    anyhow::ensure!(
        !samples.is_empty(),
        "{}: the filter kept {} of {} trajectories and they gave no SFT sample; \
         loosen [filter] or collect more seeds",
        ds.root().display(),
        filter.kept.len(),
        filter.trajectories
    );
    write_samples(&out, &samples)?;
    Ok(Done {
        outputs: vec![out],
        summary: serde_json::json!({
            "trajectories": report.trajectories,
            "samples": samples.len(),
            "action_samples": report.action_samples,
            "extraction_samples": report.extraction_samples,
            "skipped": report.skipped.len(),
        }),
    })
}
