//! `rmsweb verl`: run an `rmsweb export verl` folder on verl inside a run folder
//! (what the Runs tab's `n` launches for kind `verl`), or start a new attempt of one.

use rmsweb::runs::verl::{VerlSpec, read_spec, run};
use rmsweb::train::rl::groups::Mode;
use std::path::PathBuf;

/// Arguments of `rmsweb verl`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Start verl on an export (its run.sh) in a run folder and supervise it: status,
    /// one metrics file per attempt, SIGTERM passed on. Exits with verl's outcome.
    Run(RunArgs),
    /// A new attempt of the verl run in RUN_DIR (verl resumes from its checkpoints).
    Resume {
        /// The run folder.
        run_dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// The export folder (`rmsweb export verl DATASET --out DIR`).
    export: PathBuf,
    /// The run folder (created).
    #[arg(long)]
    run_dir: PathBuf,
    /// Nodes.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u32,
    /// A running Ray cluster's head, HOST:PORT (needed for more than one node).
    #[arg(long)]
    ray_address: Option<String>,
    /// The SFT-merged checkpoint (a Hugging Face folder); default: $MODEL.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Salvage-DS or an ablation.
    #[arg(long, value_enum, default_value = "salvage-ds")]
    mode: Mode,
    /// The interpreter with verl and rmsweb_verl (default: python3).
    #[arg(long)]
    python: Option<String>,
    /// More Hydra overrides, after `--`.
    #[arg(last = true)]
    overrides: Vec<String>,
}

/// Runs the subcommand.
pub fn run_cmd(args: Args) -> anyhow::Result<()> {
    let (spec, dir) = match args.command {
        Command::Run(a) => (
            VerlSpec {
                export: a.export,
                nodes: a.nodes,
                gpus_per_node: a.gpus_per_node,
                ray_address: a.ray_address,
                model: a.model,
                mode: a.mode.name().to_string(),
                python: a.python,
                overrides: a.overrides,
                ..Default::default()
            },
            a.run_dir,
        ),
        Command::Resume { run_dir } => (read_spec(&run_dir)?, run_dir),
    };
    let code = run(&spec, &dir)?;
    anyhow::ensure!(
        code == 0,
        "verl exited with code {code} (see {})",
        dir.join("stdout.log").display()
    );
    Ok(())
}
