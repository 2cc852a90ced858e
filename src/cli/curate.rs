//! `rmsweb curate`: the quality filter (flattening and exports follow).

use anyhow::Context;
use rmsweb::curate::filter::FilterConfig;
use rmsweb::trajectory::Dataset;
use rmsweb::trajectory::jsonl::write_atomic;
use rmsweb::util::sanitize::clean_line;
use std::path::PathBuf;

/// Arguments of `rmsweb curate`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Keep successful trajectories with complete records, no stalled loops and
    /// 3–30 effective steps; writes `sft/filter.json` with every rejection's reason.
    Filter(FilterArgs),
}

#[derive(clap::Args)]
struct FilterArgs {
    /// Dataset folder.
    dataset: PathBuf,
    /// Thresholds in TOML (`min_effective_steps`, `max_effective_steps`, `repeat_limit`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Filter(a) => filter(a),
    }
}

fn filter(a: FilterArgs) -> anyhow::Result<()> {
    let cfg: FilterConfig = match &a.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => FilterConfig::default(),
    };
    let ds = Dataset::open(&a.dataset)?;
    let report = rmsweb::curate::filter_dataset(&ds, &cfg);
    let out = a.dataset.join("sft").join("filter.json");
    write_atomic(&out, serde_json::to_string_pretty(&report)?.as_bytes())?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "kept {} of {} trajectories; report in {}",
        report.kept.len(),
        report.trajectories,
        out.display()
    );
    for (rule, n) in &report.counts {
        println!("  rejected {n:>6}  {rule}");
    }
    for r in report
        .rejected
        .iter()
        .filter(|r| r.why.rule != "not_success")
        .take(20)
    {
        println!(
            "  line {:>6} {:<24} {}: {}",
            r.line,
            clean_line(&r.id),
            r.why.rule,
            clean_line(&r.why.reason)
        );
    }
    Ok(())
}
