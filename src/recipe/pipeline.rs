//! Running the plan: each unit whose record is current is skipped (and said so);
//! every other selected unit runs, after its inputs, and leaves a record.
//! A stale unit left out of `--stages` (neither its stage nor its id named) stops
//! the run when a selected unit needs it.

use super::config::RecipeConfig;
use super::layout::Layout;
use super::plan::{Unit, Work, plan, rl_run_name};
use super::progress::Progress;
use super::record::{self, Record};
use super::select::Selection;
use super::steps::{self, Ctx, Done};
use crate::util::duration::human_time;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to run a recipe.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The recipe folder.
    pub out: PathBuf,
    /// The stages and units to run (none: all).
    pub select: Option<Selection>,
    /// The `rmsweb` binary training children run.
    pub exe: PathBuf,
    /// Draw progress bars (on stderr, when it is a terminal).
    pub bars: bool,
}

/// What happened to each unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its record was current.
    Skipped,
    /// It ran (with the reason it had to).
    Ran(String),
    /// Stale, but neither its stage nor it was selected, and nothing selected
    /// needed it.
    Left(String),
}

/// The outcome of every unit, in plan order.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub units: Vec<(String, Outcome)>,
    pub elapsed_s: f64,
}

impl RunSummary {
    /// The run's last line: units run, up to date and left out of date, the time, and
    /// where the report is.
    fn closing_line(&self, report: &Path) -> String {
        let count = |f: fn(&Outcome) -> bool| self.units.iter().filter(|(_, o)| f(o)).count();
        let ran = count(|o| matches!(o, Outcome::Ran(_)));
        let left = count(|o| matches!(o, Outcome::Left(_)));
        format!(
            "recipe: {ran} units run, {} up to date{} in {}; report: {}",
            self.units.len() - ran - left,
            if left > 0 {
                format!(", {left} out of date but not selected")
            } else {
                String::new()
            },
            human_time(self.elapsed_s),
            report.display()
        )
    }
}

fn run_unit(ctx: &mut Ctx<'_>, unit: &Unit) -> Result<Done> {
    let (cfg, layout) = (ctx.cfg, ctx.layout);
    match &unit.work {
        Work::Model => steps::model::prepare(ctx),
        Work::EvalBase => steps::evaluate::base(ctx, &unit.id),
        Work::Collect(arm) => steps::collect::teacher(ctx, &unit.id, *arm),
        Work::Filter(arm) => steps::curate::filter(cfg, layout, *arm),
        Work::Flatten(arm) => steps::curate::flatten(cfg, layout, *arm),
        Work::Sft(arm) => steps::train::sft(ctx, unit, *arm),
        Work::EvalSft(arm) => {
            steps::evaluate::run(ctx, &unit.id, &super::layout::sft_run_name(*arm))
        }
        Work::SftCollect => steps::collect::sft_policy(ctx, &unit.id),
        Work::Mine => steps::mine::run(ctx, &unit.id),
        Work::Rl { variant, seed } => steps::train::rl(ctx, unit, *variant, *seed),
        Work::EvalRl { variant, seed } => {
            steps::evaluate::rl(ctx, &unit.id, &rl_run_name(variant, *seed))
        }
        Work::Report => super::report::render(layout).map(|outputs| Done {
            outputs,
            summary: serde_json::Value::Null,
        }),
    }
}

/// Writes `DIR/recipe.toml`: the resolved config of this run (every default filled
/// in), which `rmsweb recipe report` reads.
fn write_config(layout: &Layout, cfg: &RecipeConfig) -> Result<()> {
    let text = format!(
        "{}\n{}",
        super::folder::CONFIG_HEADER,
        toml::to_string_pretty(cfg)?
    );
    crate::util::fs::write_atomic(&layout.config(), text.as_bytes())
}

/// A unit's error, told how to go on when a stop ended it.
fn stopped(e: anyhow::Error) -> anyhow::Error {
    if crate::eval::stop::is_interrupted(&e) {
        e.context(
            "stopped: the units done are recorded (a trainer checkpoints first); \
             `recipe run` again goes on from there",
        )
    } else {
        e
    }
}

/// Runs `unit`, which is not up to date (`why`), and records it. Refused when an
/// input of it was left stale because it was not selected.
fn run_stale(
    ctx: &mut Ctx,
    unit: &Unit,
    tokens: &BTreeMap<String, String>,
    stale: &BTreeMap<String, String>,
    why: String,
) -> Result<Outcome> {
    if let Some((input, reason)) = unit
        .inputs
        .iter()
        .find_map(|i| stale.get(i).map(|r| (i, r)))
    {
        let what = match input.split_once('/') {
            Some((stage, _)) => format!("its stage `{stage}` or the unit `{input}`"),
            None => format!("its stage `{input}`"),
        };
        bail!(
            "{} needs {input}, which is not up to date ({reason}); add {what} to --stages, \
             or run every stage",
            unit.id
        );
    }
    let (layout, progress) = (ctx.layout, ctx.progress);
    ctx.check_stop().map_err(stopped)?;
    progress.say(&format!("▶ {:<34} running ({why})", unit.id));
    record::remove(layout, &unit.id)?;
    let t = Instant::now();
    let done = run_unit(ctx, unit)
        .map_err(|e| stopped(crate::eval::stop::blame_stop(e)))
        .with_context(|| unit.id.to_string())?;
    let elapsed = t.elapsed().as_secs_f64();
    let outputs = done.outputs.iter().map(|p| layout.relative(p)).collect();
    record::write(
        layout,
        &Record::new(unit, tokens, outputs, elapsed, done.summary),
    )?;
    progress.say(&format!(
        "✓ {:<34} done in {}",
        unit.id,
        human_time(elapsed)
    ));
    Ok(Outcome::Ran(why))
}

/// Runs the recipe in `opts.out`.
pub fn run(cfg: &RecipeConfig, opts: &RunOptions) -> Result<RunSummary> {
    let started = Instant::now();
    let layout = Layout::new(super::folder::prepare(&opts.out)?);
    std::fs::create_dir_all(layout.runs())?;
    write_config(&layout, cfg)?;
    let units = plan(cfg)?;
    let selected = |u: &Unit| opts.select.as_ref().is_none_or(|s| s.picks(u));
    let progress = if opts.bars {
        Progress::new(units.len())
    } else {
        Progress::hidden(units.len())
    };
    // The first SIGINT/SIGTERM stops the unit at work at its next step; a second
    // ends the process at once.
    let stop = crate::eval::stop::on_signals()?;
    let mut ctx = Ctx::new(cfg, &layout, &opts.exe, &progress, stop);
    // The record token of every unit handled so far (what downstream units read).
    let mut tokens: BTreeMap<String, String> = BTreeMap::new();
    let mut summary = RunSummary::default();
    let mut stale: BTreeMap<String, String> = BTreeMap::new();
    progress.say(&format!(
        "recipe in {} · {} units",
        layout.root.display(),
        units.len()
    ));
    for unit in &units {
        progress.working_on(&unit.id);
        let outcome = match record::stale_reason(&layout, unit, &tokens) {
            None => {
                progress.say(&format!("✓ {:<34} up to date, skipped", unit.id));
                Outcome::Skipped
            }
            Some(why) if !selected(unit) => {
                stale.insert(unit.id.clone(), why.clone());
                Outcome::Left(why)
            }
            Some(why) => run_stale(&mut ctx, unit, &tokens, &stale, why)?,
        };
        if let Some(r) = record::read(&layout, &unit.id) {
            tokens.insert(unit.id.clone(), r.token);
        }
        progress.unit_done();
        summary.units.push((unit.id.clone(), outcome));
    }
    progress.finish();
    summary.elapsed_s = started.elapsed().as_secs_f64();
    progress.say(&summary.closing_line(&layout.report_md()));
    Ok(summary)
}
