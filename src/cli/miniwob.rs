//! `rmsweb miniwob`: install the MiniWoB++ pages, list the tasks, run one episode.

use super::eval::{EnvArgs, PolicyArgs};
use anyhow::Result;
use rmsweb::env::miniwob::{html_root, install, list_tasks, resolve_dir};
use rmsweb::eval::{EpisodeOptions, ScreenshotSink, new_run_id, run_episode};
use rmsweb::trajectory::Dataset;
use rmsweb::util::sanitize::{clean_line, clean_text};
use std::path::PathBuf;

/// Arguments of `rmsweb miniwob`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

impl Args {
    /// Whether the command drives a browser (`run`); `install` and `list` only
    /// read and write files.
    pub fn opens_sockets(&self) -> bool {
        matches!(self.command, Command::Run(_))
    }
}

#[derive(clap::Subcommand)]
enum Command {
    /// Download the miniwob wheel with pip and unpack its html pages into the cache folder.
    Install {
        /// Target folder (default: $RMSWEB_MINIWOB_DIR or ~/.cache/rmsweb/miniwob).
        #[arg(long)]
        miniwob_dir: Option<PathBuf>,
    },
    /// List the installed tasks (those the scripted teacher knows are marked).
    List {
        #[arg(long)]
        miniwob_dir: Option<PathBuf>,
    },
    /// Run one episode with a seed and print every step.
    Run(Box<RunArgs>),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Task name (`click-button` or `miniwob:click-button`).
    task: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 10)]
    max_steps: usize,
    /// Also print the element list seen at each step.
    #[arg(long)]
    show_dom: bool,
    /// Append the episode to this dataset (with screenshots).
    #[arg(long)]
    dataset: Option<PathBuf>,
    #[command(flatten)]
    policy: PolicyArgs,
    #[command(flatten)]
    env: EnvArgs,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Install { miniwob_dir } => {
            let dir = resolve_dir(miniwob_dir.as_deref());
            let root = install(&dir)?;
            let n = list_tasks(&root)?.len();
            println!(
                "MiniWoB++ {} installed in {} ({n} tasks)",
                rmsweb::env::miniwob::MINIWOB_VERSION,
                root.display()
            );
            Ok(())
        }
        Command::List { miniwob_dir } => {
            let root = html_root(&resolve_dir(miniwob_dir.as_deref()))?;
            for t in list_tasks(&root)? {
                let mark = if rmsweb::policy::scripted::ScriptedTeacher::supports(&t) {
                    "  [scripted]"
                } else {
                    ""
                };
                println!("miniwob:{t}{mark}");
            }
            Ok(())
        }
        Command::Run(a) => run_one(*a),
    }
}

fn run_one(a: RunArgs) -> Result<()> {
    anyhow::ensure!(a.max_steps > 0, "--max-steps must be at least 1");
    let mut policy = a.policy.build()?;
    let mut env = a.env.open()?;
    let mut dataset = match &a.dataset {
        Some(d) => Some(Dataset::create(
            d,
            "rmsweb-miniwob",
            "episodes written by rmsweb miniwob run",
        )?),
        None => None,
    };
    let sink = dataset.as_ref().map(|d| ScreenshotSink {
        root: d.root().to_path_buf(),
    });
    env.screenshots = sink.is_some();
    let name = rmsweb::env::miniwob::task_name(&a.task).to_string();
    let opts = EpisodeOptions {
        max_steps: a.max_steps,
        reflection: None,
        trajectory_id: format!("{}-{name}-s{}", new_run_id(), a.seed),
        attempt: 1,
        screenshots: sink.as_ref(),
    };
    let (task, traj, rec) = run_episode(&mut env, policy.as_mut(), &name, a.seed, &opts)?;
    println!("task: miniwob:{name}  seed: {}", a.seed);
    println!("instruction: {}", clean_line(&task.instruction));
    for s in &traj.steps {
        println!("--- step {}  {}", s.index, clean_line(&s.state.url));
        if a.show_dom {
            print!("{}", clean_text(&s.state.dom_text));
        }
        for (i, act) in s.output.actions.iter().enumerate() {
            let res = s.result.get(i);
            let status = match res {
                Some(r) if r.error.is_some() => {
                    format!("error: {}", clean_line(r.error.as_deref().unwrap_or("")))
                }
                Some(r) if r.is_done => "done".into(),
                Some(_) => "ok".into(),
                None => "not executed".into(),
            };
            println!("  {}  -> {status}", clean_line(&act.short()));
        }
        if s.output.actions.is_empty()
            && let Some(err) = s.result.first().and_then(|r| r.error.as_deref())
        {
            println!("  (no action) -> {}", clean_line(err));
        }
    }
    println!(
        "outcome: {}  reward {:.2}  steps {}  ({:.2} s)",
        if rec.success { "success" } else { "failure" },
        rec.reward,
        rec.steps,
        rec.seconds
    );
    println!("reason: {}", clean_line(&rec.reason));
    if let Some(ds) = dataset.as_mut() {
        if ds
            .tasks()
            .map(|ts| !ts.iter().any(|t| t.task_id == task.task_id))
            .unwrap_or(true)
        {
            ds.append_tasks(std::slice::from_ref(&task))?;
        }
        ds.append_trajectories(std::slice::from_ref(&traj))?;
        println!("saved as {} in {}", traj.id, ds.root().display());
    }
    Ok(())
}
