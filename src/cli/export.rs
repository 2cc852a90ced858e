//! `rmsweb export`: SFT samples in the formats of common trainers.

use rmsweb::curate::export::{ExportFormat, export_sft, llamafactory_dataset_info};
use rmsweb::trajectory::Dataset;
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
}

#[derive(clap::Args)]
struct SftArgs {
    /// Dataset folder.
    dataset: PathBuf,
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
    }
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
