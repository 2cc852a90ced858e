//! `rmsweb export`: SFT samples in the formats of common trainers; RL prompts,
//! config and launch script for verl.

use super::dataset_arg::DatasetArg;
use rmsweb::curate::export::{ExportFormat, export_sft, llamafactory_dataset_info};
use rmsweb::export::verl::{VerlOptions, export_verl};
use rmsweb::train::rl::config::PromptSource;
use rmsweb::trajectory::Dataset;
use rmsweb::util::sanitize::clean_line;
use std::path::PathBuf;

/// Arguments of `rmsweb export`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// The dataset's SFT samples (`sft/samples.jsonl`, flattened in memory when
    /// missing or stale) as LLaMA-Factory sharegpt JSON or ms-swift JSONL, with
    /// absolute image paths and `<image>` placeholders.
    Sft(SftArgs),
    /// The RL prompts (the same text rmsweb's own RL uses) as verl RLHF parquet
    /// (`train.parquet`, `val.parquet` with held-out tasks), plus `salvage_ds.yaml`
    /// (Hydra overrides of verl's ppo_trainer), `run.sh` (1×8 or 2×8 GPUs) and a
    /// README of the layout.
    Verl(VerlArgs),
}

#[derive(clap::Args)]
struct VerlArgs {
    #[command(flatten)]
    dataset: DatasetArg,
    /// Output folder (created).
    #[arg(long)]
    out: PathBuf,
    /// Where the prompts come from: the mined critical states, or every action sample
    /// of the flattened SFT corpus.
    #[arg(long, value_enum, default_value = "mined")]
    prompts: PromptSource,
    /// Share of tasks held out for `val.parquet` (whole tasks), in [0, 1).
    #[arg(long, default_value_t = 0.1)]
    val_share: f64,
    /// Attach each state's screenshot as PNG bytes (`images` column, `<image>` in the
    /// user message) for vision-language models.
    #[arg(long)]
    images: bool,
}

#[derive(clap::Args)]
struct SftArgs {
    #[command(flatten)]
    dataset: DatasetArg,
    /// Target trainer.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Output file (default: `sft/llamafactory.json` or `sft/swift.jsonl` in the dataset).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Text only: leave out screenshots and `<image>` placeholders.
    #[arg(long)]
    no_images: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Sft(a) => sft(a),
        Command::Verl(a) => verl(a),
    }
}

fn verl(a: VerlArgs) -> anyhow::Result<()> {
    let ds = Dataset::open(&a.dataset)?;
    let opts = VerlOptions {
        prompts: a.prompts,
        val_share: a.val_share,
        images: a.images,
    };
    let r = export_verl(&ds, &a.out, &opts)?;
    println!(
        "{} train + {} val prompts ({} + {} tasks, {} images) written to {}",
        r.train,
        r.val,
        r.train_tasks,
        r.val_tasks,
        r.images,
        r.out.display()
    );
    if r.missing_images > 0 {
        println!(
            "{} prompts have no readable screenshot (text only)",
            r.missing_images
        );
    }
    for (id, why) in r.skipped.iter().take(10) {
        println!("skipped {}: {}", clean_line(id), clean_line(why));
    }
    if r.skipped.len() > 10 {
        println!(
            "... {} more skipped (export.json lists them)",
            r.skipped.len() - 10
        );
    }
    println!(
        "launch: MODEL=<SFT-merged checkpoint> bash {}",
        r.out.join("run.sh").display()
    );
    Ok(())
}

fn sft(a: SftArgs) -> anyhow::Result<()> {
    let ds = Dataset::open(&a.dataset)?;
    let samples = rmsweb::curate::current_samples(&ds)?;
    let out = a
        .out
        .unwrap_or_else(|| ds.root().join("sft").join(a.format.default_file()));
    let report = export_sft(&ds, &samples, a.format, &out, !a.no_images)?;
    println!(
        "{} records ({} images) written to {}",
        report.records,
        report.images,
        out.display()
    );
    if a.format == ExportFormat::Llamafactory {
        let file = std::path::absolute(&out)?;
        println!("dataset_info.json entry:");
        println!(
            "{}",
            serde_json::to_string_pretty(&llamafactory_dataset_info(
                "rmsweb_sft",
                &file.to_string_lossy(),
                report.images > 0
            ))?
        );
    }
    Ok(())
}
