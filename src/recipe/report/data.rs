//! What the report reads from a recipe folder: the resolved config, the yield
//! reports, the evaluation results, the RL runs' metrics, the unit records. Every
//! missing or unreadable input is listed (the report says what it lacks) rather
//! than stopping the report.

use crate::collect::CollectReport;
use crate::eval::EvalReport;
use crate::recipe::config::{RecipeConfig, Variant};
use crate::recipe::layout::{BASE_EVAL, Layout, sft_run_name};
use crate::recipe::plan::{Arm, plan, rl_run_name};
use crate::recipe::record::{self, Record};
use anyhow::Result;
use std::collections::BTreeMap;

/// One metrics line of an RL run.
pub type MetricsLine = (u64, BTreeMap<String, f64>);

/// An RL run's metrics.
#[derive(Debug, Clone)]
pub struct RlRun {
    pub variant: String,
    pub seed: u64,
    /// The run folder name (`rl-dapo-s1`).
    pub name: String,
    pub metrics: Vec<MetricsLine>,
}

/// Everything the report is built from.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub cfg: RecipeConfig,
    /// `reflection`, `baseline`, `sft-policy`.
    pub collections: BTreeMap<String, CollectReport>,
    /// By run name: `sft-reflection`, `sft-baseline`, `rl-<variant>-s<seed>`, and
    /// `base` (the pretrained base, zero-shot).
    pub evals: BTreeMap<String, EvalReport>,
    /// The checkpoint each evaluation used (relative to the recipe folder).
    pub checkpoints: BTreeMap<String, String>,
    pub rl_runs: Vec<RlRun>,
    /// Unit records by unit id.
    pub records: BTreeMap<String, Record>,
    /// Inputs that were missing or unreadable, with why.
    pub missing: Vec<String>,
}

fn read_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    missing: &mut Vec<String>,
    layout: &Layout,
) -> Option<T> {
    let rel = layout.relative(path);
    match crate::util::fs::read_record(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            missing.push(format!("{rel} (not written yet)"));
            None
        }
        Err(e) => {
            missing.push(format!("{rel} (unreadable: {e})"));
            None
        }
        Ok(text) => match serde_json::from_str(&text) {
            Ok(v) => Some(v),
            Err(e) => {
                missing.push(format!("{rel} (unreadable: {e})"));
                None
            }
        },
    }
}

/// Reads an RL run's metrics; malformed lines are skipped and counted in `missing`.
fn read_metrics(
    path: &std::path::Path,
    layout: &Layout,
    missing: &mut Vec<String>,
) -> Vec<MetricsLine> {
    let Ok(text) = crate::util::fs::read_record(path) else {
        missing.push(format!("{} (not written yet)", layout.relative(path)));
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match crate::runs::tail::parse_line(line) {
            Ok(r) => out.push((r.step, r.data.into_iter().collect())),
            Err(_) => bad += 1,
        }
    }
    if bad > 0 {
        missing.push(format!(
            "{}: {bad} malformed lines skipped",
            layout.relative(path)
        ));
    }
    out
}

/// The evaluated policy names of a config, in report order: the two SFT policies,
/// then each variant's runs.
pub fn rl_names(cfg: &RecipeConfig) -> Result<Vec<(Variant, u64, String)>> {
    let mut out = Vec::new();
    for v in cfg.variants()? {
        for &s in &cfg.rl.seeds {
            out.push((v, s, rl_run_name(&v, s)));
        }
    }
    Ok(out)
}

/// Reads the inputs of the recipe folder's report.
pub fn load(layout: &Layout) -> Result<Inputs> {
    let cfg = RecipeConfig::load(&layout.config())?;
    let mut missing = Vec::new();
    let mut collections = BTreeMap::new();
    for name in ["reflection", "baseline", "sft-policy"] {
        if let Some(r) = read_json(&layout.collect_report(name), &mut missing, layout) {
            collections.insert(name.to_string(), r);
        }
    }
    let mut records = BTreeMap::new();
    for u in plan(&cfg)? {
        if let Some(r) = record::read(layout, &u.id) {
            records.insert(u.id.clone(), r);
        }
    }
    let mut names: Vec<String> = Arm::BOTH.iter().map(|a| sft_run_name(*a)).collect();
    if cfg.model.zero_shot && cfg.base_model()?.is_some() {
        names.push(BASE_EVAL.to_string());
    }
    let rl = rl_names(&cfg)?;
    names.extend(rl.iter().map(|(_, _, n)| n.clone()));
    let mut evals = BTreeMap::new();
    let mut checkpoints = BTreeMap::new();
    for n in &names {
        if let Some(r) = read_json::<EvalReport>(&layout.eval_report(n), &mut missing, layout) {
            evals.insert(n.clone(), r);
        }
        let unit = records.values().find(|r| {
            r.stage.starts_with("eval")
                && (r.unit.ends_with(&format!("/{n}")) || (n == BASE_EVAL && r.unit == "eval-base"))
        });
        if let Some(c) = unit.and_then(|r| r.summary.get("checkpoint")?.as_str().map(str::to_owned))
        {
            checkpoints.insert(n.clone(), c);
        }
    }
    let rl_runs = rl
        .into_iter()
        .map(|(v, seed, name)| RlRun {
            variant: v.name(),
            seed,
            metrics: read_metrics(
                &layout.run(&name).join("metrics.jsonl"),
                layout,
                &mut missing,
            ),
            name,
        })
        .collect();
    Ok(Inputs {
        cfg,
        collections,
        evals,
        checkpoints,
        rl_runs,
        records,
        missing,
    })
}
