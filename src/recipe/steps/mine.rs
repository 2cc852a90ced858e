//! Mining the pool (`data/pool/mined/`) with the heuristic judge.

use super::{Ctx, Done};
use crate::mine::{HeuristicJudge, mine_dataset, write_output};
use crate::recipe::folder::clear;
use crate::train::rl::config::PromptSource;
use crate::trajectory::Dataset;
use anyhow::Result;
use std::collections::BTreeMap;

/// Mines critical-step pairs from the pool.
pub fn run(ctx: &mut Ctx<'_>, unit: &str) -> Result<Done> {
    let cfg = ctx.cfg.mine_config()?;
    let ds = Dataset::open(ctx.layout.pool())?;
    let out_dir = ctx.layout.pool().join("mined");
    clear(ctx.layout, &out_dir)?;
    let bar = ctx.progress.unit_bar(unit, 0, "tasks");
    let tick = |total: usize| {
        bar.set_length(total as u64);
        bar.inc(1);
    };
    let out = mine_dataset(&ds, &cfg, &HeuristicJudge, &tick);
    bar.finish_and_clear();
    let out = out?;
    let needs_pairs = ctx
        .cfg
        .variants()?
        .iter()
        .any(|v| v.prompts == PromptSource::Mined);
    anyhow::ensure!(
        !out.pairs.is_empty() || !needs_pairs,
        "no critical-step pair mined from {} trajectories of {}; the RL variants on mined \
         prompts need some: collect more seeds, raise collect.mistake_rate, or give the SFT \
         policy more sft_collect.rounds",
        ds.trajectory_count(),
        ds.root().display()
    );
    write_output(&out_dir, &out)?;
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_category: BTreeMap<String, usize> = BTreeMap::new();
    for p in &out.pairs {
        let kind = serde_json::to_value(p.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        *by_kind.entry(kind).or_default() += 1;
        *by_category
            .entry(p.failure_mode.category.clone())
            .or_default() += 1;
    }
    Ok(Done {
        outputs: vec![out_dir.join("pairs.jsonl"), out_dir.join("report.json")],
        summary: serde_json::json!({
            "pairs": out.pairs.len(),
            "by_kind": by_kind,
            "by_category": by_category,
        }),
    })
}
