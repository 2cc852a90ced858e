//! `rmsweb curate`: the quality filter and flattening into SFT samples.

use super::dataset_arg::DatasetArg;
use rmsweb::curate::filter::FilterConfig;
use rmsweb::trajectory::Dataset;
use rmsweb::util::fs::write_atomic;
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
    /// Flatten the kept trajectories into per-step SFT samples (`sft/samples.jsonl`):
    /// an action sample per step and an extraction sample per `extract` result.
    /// Runs the filter first when `sft/filter.json` is missing or stale.
    Flatten(FlattenArgs),
}

#[derive(clap::Args)]
struct FlattenArgs {
    #[command(flatten)]
    dataset: DatasetArg,
    /// Token budget of each prompt (system + user).
    #[arg(long, default_value_t = rmsweb::policy::prompt::DEFAULT_TOKEN_BUDGET)]
    token_budget: usize,
    /// `tokenizer.json` of the model to train, to count the budget in its tokens
    /// (default: one token per 4 characters).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Prompt format of the samples: rmsweb's own, or Browser Use 0.13's layout
    /// (imported steps then take the teacher's own state message verbatim).
    #[arg(long, value_enum, default_value = "rmsweb")]
    prompt_format: rmsweb::policy::format::PromptFormat,
    /// Print the counts as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct FilterArgs {
    #[command(flatten)]
    dataset: DatasetArg,
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
        Command::Flatten(a) => flatten(a),
    }
}

fn flatten(a: FlattenArgs) -> anyhow::Result<()> {
    use rmsweb::curate::flatten::{FlattenOptions, samples_path, write_samples};
    anyhow::ensure!(a.token_budget >= 256, "--token-budget must be at least 256");
    let ds = Dataset::open(&a.dataset)?;
    let (filter, ran) = rmsweb::curate::current_filter(&ds, true)?;
    let mut opts = FlattenOptions::default();
    opts.prompt.token_budget = a.token_budget;
    opts.prompt.format = a.prompt_format;
    let tokenizer = match &a.tokenizer {
        Some(p) => Some(rmsweb::model::tokenizer::load(p)?),
        None => None,
    };
    let counter: Box<dyn rmsweb::policy::prompt::TokenCounter + Sync + '_> = match &tokenizer {
        Some(t) => Box::new(rmsweb::policy::local::TokenizerCounter(t)),
        None => Box::new(rmsweb::policy::prompt::CharApprox),
    };
    let (samples, report) = rmsweb::curate::flatten_kept(&ds, &filter, &opts, counter.as_ref())?;
    let out = samples_path(&ds);
    write_samples(&out, &samples)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    if ran {
        println!(
            "filtered: kept {} of {} trajectories",
            filter.kept.len(),
            filter.trajectories
        );
    }
    println!(
        "{} samples from {} trajectories: {} action, {} extraction, {} with a screenshot; written to {}",
        samples.len(),
        report.trajectories,
        report.action_samples,
        report.extraction_samples,
        report.with_image,
        out.display()
    );
    for (id, why) in &report.skipped {
        println!("  skipped {}: {}", clean_line(id), clean_line(why));
    }
    Ok(())
}

fn filter(a: FilterArgs) -> anyhow::Result<()> {
    let cfg: FilterConfig = match &a.config {
        Some(p) => {
            let text = rmsweb::util::fs::read_config(p)?;
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
