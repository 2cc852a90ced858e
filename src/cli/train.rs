//! `rmsweb train`: SFT and Salvage-DS RL runs into run folders, and resuming them.

use anyhow::{Context, Result};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use rmsweb::train::rl::config::{PromptSource, RlConfig};
use rmsweb::train::rl::groups::Mode;
use rmsweb::train::rl::trainer::{self as rl, RlStepReport};
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
    /// Salvage-DS RL (or an ablation) from an SFT run into a run folder.
    Rl(RlArgs),
    /// Start a run from a whole trainer config file (the run.toml format: `kind =
    /// "sft"` or `"rl"` and every key), as the recipe does.
    Start {
        /// The config file.
        config: PathBuf,
        /// Run folder (a new one).
        #[arg(long)]
        run_dir: PathBuf,
    },
    /// Continue a run (SFT or RL, read from its run.toml) from its latest checkpoint.
    Resume {
        /// The run folder (runs/ID).
        run_dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct SftArgs {
    /// `tiny` (CPU, small model and tokenizer trained here), `tiny-vl` (the same with a
    /// vision tower that sees each step's screenshot), `lora` (LoRA r16 on a small
    /// pretrained model of any family, e.g. SmolLM2 from `rmsweb model import`),
    /// `qwen3-lora` (the paper's r64) or `qwen3-vl-lora` (LoRA on a Qwen3-VL folder that
    /// sees each step's screenshot, ≤ 262,144 px).
    #[arg(long)]
    preset: String,
    /// Dataset folder.
    #[arg(long)]
    dataset: PathBuf,
    /// Base model folder (HF layout) for lora, qwen3-lora and qwen3-vl-lora.
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

#[derive(clap::Args)]
struct RlArgs {
    /// `tiny` (CPU-sized batches and adapter) or `paper` (ALGORITHMS.md §5's values).
    #[arg(long)]
    preset: String,
    /// The variant: salvage-ds (full), anchor-free, dapo or grpo.
    #[arg(long, value_enum, default_value = "salvage-ds")]
    mode: Mode,
    /// Prompts: the mined states, or every action sample of the SFT corpus.
    #[arg(long, value_enum, default_value = "mined")]
    prompts: PromptSource,
    /// The SFT run folder (its latest checkpoint is used) or a checkpoint folder; a
    /// Qwen3-VL one (`tiny-vl`, `qwen3-vl-lora`) sees each prompt's screenshot.
    #[arg(long)]
    init: PathBuf,
    /// Dataset folder (default: the SFT run's dataset).
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// `cpu` or `cuda:N`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Run folder (default runs/rl-<time>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Number of RL steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Override any config key: `--set n=4 --set lora.r=16 --set sharpening.window=10`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// The dataset of the SFT run behind `init` (its run.toml), when `init` is a run folder.
fn init_dataset(init: &std::path::Path) -> Result<PathBuf> {
    let p = init.join("run.toml");
    let text = rmsweb::util::fs::read_record(&p)
        .map_err(|e| anyhow::anyhow!("--dataset not given and {e}; pass --dataset"))?;
    let t: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    match t.get("dataset").and_then(|d| d.as_str()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => anyhow::bail!("{}: field `dataset` missing; pass --dataset", p.display()),
    }
}

/// The `kind` of a run folder's run.toml (`sft` when absent, as older SFT runs).
fn run_kind(run_dir: &std::path::Path) -> Result<String> {
    let p = run_dir.join("run.toml");
    let text = rmsweb::util::fs::read_record(&p)?;
    config_kind(&p, &text)
}

/// The `kind` of a trainer config's text (`sft` when absent, as older SFT runs).
fn config_kind(p: &std::path::Path, text: &str) -> Result<String> {
    let t: toml::Table =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    match t.get("kind") {
        None => Ok("sft".into()),
        Some(toml::Value::String(k)) => Ok(k.clone()),
        Some(_) => anyhow::bail!("{}: field `kind` must be a string", p.display()),
    }
}

/// What a trainer's step report puts on the progress bar.
trait BarLine {
    /// The bar's template.
    const TEMPLATE: &'static str;
    /// The message before the first step.
    const LOADING: &'static str;
    /// The step, the total and the message.
    fn line(&self) -> (u64, u64, String);
}

impl BarLine for StepReport {
    const TEMPLATE: &'static str =
        "{elapsed_precise} [{bar:30}] {pos}/{len} steps  {msg}  eta {eta}";
    const LOADING: &'static str = "preparing tokenizer, samples and model";
    fn line(&self) -> (u64, u64, String) {
        let msg = format!(
            "loss {:.4}  lr {:.2e}  {:.0} tok/s",
            self.loss, self.lr, self.tokens_per_s
        );
        (self.step, self.total, msg)
    }
}

impl BarLine for RlStepReport {
    const TEMPLATE: &'static str = "{elapsed_precise} [{bar:30}] {pos}/{len} steps  {msg}";
    const LOADING: &'static str = "loading prompts and the SFT policy";
    fn line(&self) -> (u64, u64, String) {
        let msg = format!(
            "reward {:.3}  accepted {}  salvage {}  gen batches {}  {:.1}s/step",
            self.reward_mean,
            self.accepted_groups,
            self.salvage_groups,
            self.num_gen_batches,
            self.step_s
        );
        (self.step, self.total, msg)
    }
}

/// Trains (`go`, fed each step's report) with a progress bar, a line per step
/// without a terminal, then says how the run in `run` ended.
fn with_progress<R: BarLine>(
    run: &std::path::Path,
    go: impl FnOnce(&mut dyn FnMut(&R)) -> Result<Outcome>,
) -> Result<()> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(R::TEMPLATE)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(R::LOADING);
    let mut lines = PlainLines::new();
    let mut cb = |r: &R| {
        let (step, total, msg) = r.line();
        lines.step(step, total, &msg);
        bar.set_length(total);
        bar.set_position(step);
        bar.set_message(msg);
    };
    let out = go(&mut cb);
    bar.finish();
    report(out?, run);
    Ok(())
}

/// Progress as plain lines on standard output where standard error is no terminal
/// (a log file, CI, a pipe: the bar is hidden there): the first step, the last, and
/// one line at most every [`PlainLines::EVERY`] in between.
struct PlainLines {
    on: bool,
    last: Option<std::time::Instant>,
}

impl PlainLines {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(10);

    fn new() -> Self {
        use std::io::IsTerminal;
        PlainLines {
            on: !std::io::stderr().is_terminal(),
            last: None,
        }
    }

    fn step(&mut self, step: u64, total: u64, msg: &str) {
        if !self.on {
            return;
        }
        let due = self.last.is_none_or(|t| t.elapsed() >= Self::EVERY);
        if due || step == total {
            println!("step {step}/{total}  {msg}");
            self.last = Some(std::time::Instant::now());
        }
    }
}

fn stop_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, flag.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, flag.clone())?;
    Ok(flag)
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

/// A whole trainer config: what `train sft|rl` build from their options, what
/// `train start` reads from a file, what `run.toml` holds.
enum TrainerConfig {
    Sft(SftConfig),
    Rl(RlConfig),
}

impl TrainerConfig {
    /// Reads a config file; errors name the file and the field.
    fn read(path: &std::path::Path) -> Result<Self> {
        let text = rmsweb::util::fs::read_record(path)?;
        let invalid = || format!("{}: invalid trainer config", path.display());
        match config_kind(path, &text)?.as_str() {
            "sft" => Ok(Self::Sft(
                SftConfig::from_toml(&text).with_context(invalid)?,
            )),
            "rl" => Ok(Self::Rl(RlConfig::from_toml(&text).with_context(invalid)?)),
            other => anyhow::bail!(
                "{}: field `kind` is `{}`; expected sft or rl",
                path.display(),
                rmsweb::util::sanitize::clean_line(other)
            ),
        }
    }

    /// Trains a new run in `dir` with a progress bar (a line per step without a
    /// terminal), then says how it ended.
    fn train_new(&self, dir: &std::path::Path) -> Result<()> {
        let run = RunDir::open(dir)?;
        match self {
            Self::Sft(cfg) => {
                with_progress(dir, |cb| sft::train(cfg, &run, false, stop_flag()?, cb))
            }
            Self::Rl(cfg) => with_progress(dir, |cb| rl::train(cfg, &run, false, stop_flag()?, cb)),
        }
    }
}

/// `runs/<kind>-<time>`, the default run folder.
fn timestamped(kind: &str) -> PathBuf {
    PathBuf::from("runs").join(format!(
        "{kind}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    ))
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
            let cfg = TrainerConfig::Sft(cfg.with_overrides(&a.set)?);
            cfg.train_new(&a.run_dir.unwrap_or_else(|| timestamped("sft")))?;
        }
        Command::Rl(a) => {
            let dataset = match a.dataset {
                Some(d) => d,
                None => init_dataset(&a.init)?,
            };
            let mut cfg = RlConfig::preset(&a.preset, a.mode, a.prompts, &a.init, &dataset)?;
            cfg.device = a.device;
            if let Some(s) = a.steps {
                cfg.steps = s;
            }
            let cfg = TrainerConfig::Rl(cfg.with_overrides(&a.set)?);
            cfg.train_new(&a.run_dir.unwrap_or_else(|| timestamped("rl")))?;
        }
        Command::Start { config, run_dir } => TrainerConfig::read(&config)?.train_new(&run_dir)?,
        Command::Resume { run_dir } => match run_kind(&run_dir)?.as_str() {
            "sft" => with_progress(&run_dir, |cb| sft::resume(&run_dir, stop_flag()?, cb))?,
            "rl" => with_progress(&run_dir, |cb| rl::resume(&run_dir, stop_flag()?, cb))?,
            other => anyhow::bail!(
                "{}: field `kind` is `{other}`; expected sft or rl",
                run_dir.join("run.toml").display()
            ),
        },
    }
    Ok(())
}
