//! `rmsweb import browser-use` and `rmsweb import tasks`.

use rmsweb::trajectory::import::{self, BrowserUseOptions, tasks::TaskFormat};
use rmsweb::util::sanitize::clean_line;
use std::path::PathBuf;

/// Arguments of `rmsweb import`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

/// What to import.
#[derive(clap::Subcommand)]
pub enum What {
    /// Import Browser Use agent histories (any version's layout) as trajectories of
    /// one task. A folder with a task.json imports each *.json in it as one attempt.
    /// All or nothing: on any error the dataset is left as it was.
    BrowserUse(Box<BrowserUseArgs>),
    /// Import a public task list (WebVoyager, Online-Mind2Web) into tasks.jsonl.
    Tasks(TasksArgs),
}

/// Arguments of `rmsweb import browser-use`.
#[derive(clap::Args)]
pub struct BrowserUseArgs {
    /// History files (`{"history": [...]}`) or folders holding histories and a task.json.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Dataset folder (created if missing).
    #[arg(long)]
    pub dataset: PathBuf,
    /// The task the histories attempt (a folder's task.json takes precedence).
    #[arg(long)]
    pub task: Option<String>,
    /// Task id (default: site name and a hash of the task text).
    #[arg(long)]
    pub task_id: Option<String>,
    /// Start URL or site of the task.
    #[arg(long)]
    pub website: Option<String>,
    /// Domain of the task (default: the site name of --website).
    #[arg(long)]
    pub domain: Option<String>,
    /// Category of the task (shopping, travel, ...).
    #[arg(long)]
    pub category: Option<String>,
    /// Mark the attempts successful, whatever the final done says.
    #[arg(long, conflicts_with = "failure")]
    pub success: bool,
    /// Mark the attempts failed, whatever the final done says.
    #[arg(long)]
    pub failure: bool,
    /// Name of the model that produced the histories.
    #[arg(long)]
    pub teacher: Option<String>,
    /// Producer and version, e.g. `browser-use@0.8.1` (default `browser-use`).
    #[arg(long)]
    pub source: Option<String>,
    /// Where the task came from, for its record (`webvoyager:Allrecipes--0`, ...).
    #[arg(long)]
    pub task_source: Option<String>,
    /// Attempt number (one history only; default: the next free number).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// Reflection round of the attempt (default 1).
    #[arg(long)]
    pub round: Option<u32>,
    /// The reflection text the attempt was given.
    #[arg(long)]
    pub reflection: Option<String>,
    /// Allow absolute screenshot_path values that lie inside this folder.
    #[arg(long)]
    pub screenshot_root: Option<PathBuf>,
    /// Import steps whose screenshot file no longer exists without a screenshot
    /// (with a warning) instead of refusing the history.
    #[arg(long)]
    pub allow_missing_screenshots: bool,
}

/// Arguments of `rmsweb import tasks`.
#[derive(clap::Args)]
pub struct TasksArgs {
    /// Format of the task list.
    #[arg(long, value_enum)]
    pub format: TaskFormat,
    /// The task list file.
    pub file: PathBuf,
    /// Dataset folder (created if missing).
    #[arg(long)]
    pub dataset: PathBuf,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::BrowserUse(a) => browser_use(*a),
        What::Tasks(a) => tasks(a),
    }
}

fn browser_use(a: BrowserUseArgs) -> anyhow::Result<()> {
    let opts = BrowserUseOptions {
        task: a.task,
        task_id: a.task_id,
        website: a.website,
        domain: a.domain,
        category: a.category,
        success: match (a.success, a.failure) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        teacher: a.teacher,
        source: a.source,
        task_source: a.task_source,
        attempt: a.attempt,
        round: a.round,
        reflection: a.reflection,
        screenshot_root: a.screenshot_root,
        allow_missing_screenshots: a.allow_missing_screenshots,
        ..BrowserUseOptions::default()
    };
    let report = import::import_browser_use(&a.dataset, &a.inputs, &opts)?;
    for w in &report.warnings {
        rmsweb::util::report::warn(w);
    }
    for t in &report.tasks_added {
        println!(
            "task {}: {}",
            clean_line(&t.task_id),
            clean_line(&t.instruction)
        );
    }
    for t in &report.trajectories {
        println!(
            "trajectory {} (attempt {}, {} steps, {} screenshots, {}) from {}",
            clean_line(&t.id),
            t.attempt,
            t.steps,
            t.screenshots,
            if t.success { "success" } else { "failure" },
            clean_line(&t.file.display().to_string()),
        );
    }
    println!(
        "imported {} trajectories and {} new tasks into {} ({} warnings)",
        report.trajectories.len(),
        report.tasks_added.len(),
        a.dataset.display(),
        report.warnings.len()
    );
    Ok(())
}

fn tasks(a: TasksArgs) -> anyhow::Result<()> {
    let report = import::tasks::import_tasks(
        &a.dataset,
        &a.file,
        a.format,
        import::tasks::Limits::default(),
    )?;
    println!(
        "imported {} tasks into {} ({} already present)",
        report.added.len(),
        a.dataset.display(),
        report.already_present
    );
    Ok(())
}
