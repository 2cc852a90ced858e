//! `rmsweb annotate`: export the corrected corpus, per-annotator counts, agreement
//! between annotators per category.

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
    /// Agreement between annotators per failure-mode category: pairs decided by two
    /// or more, how many they agreed on, open and settled conflicts, Cohen's kappa
    /// on keep / reject (Light's mean with three or more annotators).
    Agreement {
        #[command(flatten)]
        dataset: DatasetArg,
        /// Print the rows as a JSON array.
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
        Command::Agreement { dataset, json } => {
            let rows = annotate::agreement::for_dataset(&dataset)?;
            if json {
                println!("{}", serde_json::to_string(&rows)?);
            } else {
                print!("{}", agreement_table(&rows));
            }
        }
    }
    Ok(())
}

/// The agreement rows as an aligned text table.
fn agreement_table(rows: &[annotate::agreement::CategoryAgreement]) -> String {
    use std::fmt::Write;
    let w = rows
        .iter()
        .map(|r| r.category.chars().count())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut out = format!(
        "{:w$}  {:>5}  {:>7}  {:>6}  {:>6}  {:>8}  {:>7}  {:>6}\n",
        "category", "pairs", "decided", "shared", "agreed", "conflict", "settled", "kappa"
    );
    for r in rows {
        let kappa = r.kappa.map_or("-".to_string(), |k| format!("{k:.2}"));
        let _ = writeln!(
            out,
            "{:w$}  {:>5}  {:>7}  {:>6}  {:>6}  {:>8}  {:>7}  {:>6}",
            rmsweb::util::sanitize::clean_line(&r.category),
            r.pairs,
            r.decided,
            r.shared,
            r.agreed,
            r.open_conflicts,
            r.settled,
            kappa
        );
    }
    out.push_str(
        "shared: decided by two or more annotators; kappa: Cohen's on keep (accept, relabel) \
         vs reject, '-' where no two annotators share a pair\n",
    );
    out
}
