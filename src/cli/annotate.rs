//! `rmsweb annotate`: export the corrected corpus, per-annotator counts.

use super::dataset_arg::DatasetArg;
use rmsweb::annotate::{self, AnnotationLog};
use std::path::PathBuf;

/// Arguments of `rmsweb annotate`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Write the corrected corpus (accepted and edited pairs, corrections applied).
    Export {
        #[command(flatten)]
        dataset: DatasetArg,
        /// Output file (default: DATASET/mined/pairs.corrected.jsonl).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Events per annotator and op.
    Counts {
        #[command(flatten)]
        dataset: DatasetArg,
        /// Print one JSON object `{annotator: {op: n}}`.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Export { dataset, out } => {
            let out = out.unwrap_or_else(|| annotate::export::default_export_path(&dataset));
            let r = annotate::export_corrected(&dataset, &out)?;
            println!(
                "{}: {} of {} pairs ({} accepted, {} edited, {} relabelled); {} rejected, {} pending",
                r.out.display(),
                r.exported,
                r.pairs,
                r.accepted,
                r.edited,
                r.relabelled,
                r.rejected,
                r.pending
            );
            if r.conflicts + r.settled > 0 {
                println!(
                    "conflicts: {} settled by a reviewer (their word applied), {} left out \
                     unsettled (settle them in the workbench: S then a or x)",
                    r.settled, r.conflicts
                );
            }
        }
        Command::Counts { dataset, json } => {
            rmsweb::trajectory::store::read_meta(&dataset)?;
            let counts = annotate::counts(&AnnotationLog::for_dataset(&dataset))?;
            if json {
                println!("{}", serde_json::to_string(&counts)?);
            } else if counts.is_empty() {
                println!("no annotations yet");
            } else {
                let ops: Vec<&str> = annotate::export::op_names().collect();
                let w = counts
                    .keys()
                    .map(|k| k.chars().count())
                    .max()
                    .unwrap_or(9)
                    .max(9);
                print!("{:w$}", "annotator");
                for op in &ops {
                    print!("  {op:>11}");
                }
                println!("  {:>7}", "total");
                for (who, by_op) in &counts {
                    print!("{:w$}", rmsweb::util::sanitize::clean_line(who));
                    for op in &ops {
                        print!("  {:>11}", by_op.get(op).copied().unwrap_or(0));
                    }
                    println!("  {:>7}", by_op.values().sum::<usize>());
                }
                let folded = annotate::Folded::new(AnnotationLog::for_dataset(&dataset).read()?);
                let (open, settled) = folded.conflicts();
                println!("conflicts: {open} open, {settled} settled");
            }
        }
    }
    Ok(())
}
