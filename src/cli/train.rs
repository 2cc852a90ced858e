//! `rmsweb train`: SFT runs into run folders, and resuming them.

use anyhow::Result;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use rmsweb::train::run::RunDir;
use rmsweb::train::sft::{self, Outcome, SftConfig, StepReport};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Arguments of `rmsweb train`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Supervised fine-tuning into a run folder.
    Sft(SftArgs),
    /// Continue a run from its latest checkpoint.
    Resume {
        /// The run folder (runs/ID).
        run_dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct SftArgs {
    /// `tiny` (CPU, small model and tokenizer trained here) or `qwen3-lora`.
    #[arg(long)]
    preset: String,
    /// Dataset folder.
    #[arg(long)]
    dataset: PathBuf,
    /// Base model folder (HF layout) for qwen3-lora.
    #[arg(long)]
    model: Option<PathBuf>,
    /// `cpu` or `cuda:N`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Run folder (default runs/sft-<time>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Stop after this many optimizer steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Override any config key: `--set lr=1e-3 --set lora.r=16`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, flag.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, flag.clone())?;
    Ok(flag)
}

fn progress() -> (ProgressBar, impl FnMut(&StepReport)) {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} steps  {msg}  eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message("preparing tokenizer, samples and model");
    let b = bar.clone();
    let cb = move |r: &StepReport| {
        b.set_length(r.total);
        b.set_position(r.step);
        b.set_message(format!(
            "loss {:.4}  lr {:.2e}  {:.0} tok/s",
            r.loss, r.lr, r.tokens_per_s
        ));
    };
    (bar, cb)
}

fn report(outcome: Outcome, run: &std::path::Path) {
    match outcome {
        Outcome::Finished => println!("finished: {}", run.display()),
        Outcome::Stopped => println!(
            "stopped after a checkpoint; continue with `rmsweb train resume {}`",
            run.display()
        ),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Sft(a) => {
            let mut cfg = SftConfig::preset(&a.preset, &a.dataset, a.model.as_deref())?;
            cfg.device = a.device;
            if let Some(s) = a.steps {
                cfg.max_steps = s;
            }
            let cfg = cfg.with_overrides(&a.set)?;
            let dir = a.run_dir.unwrap_or_else(|| {
                PathBuf::from("runs").join(format!(
                    "sft-{}",
                    chrono::Utc::now().format("%Y%m%d-%H%M%S")
                ))
            });
            let run = RunDir::open(&dir)?;
            let (bar, mut cb) = progress();
            let out = sft::train(&cfg, &run, false, stop_flag()?, &mut cb);
            bar.finish();
            report(out?, &dir);
        }
        Command::Resume { run_dir } => {
            let (bar, mut cb) = progress();
            let out = sft::resume(&run_dir, stop_flag()?, &mut cb);
            bar.finish();
            report(out?, &run_dir);
        }
    }
    Ok(())
}
