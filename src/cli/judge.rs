//! `rmsweb judge` (an LLM judge's verdicts on trajectories without a programmatic
//! reward) and `rmsweb judge eval` (those verdicts against hand labels).

use super::llm_args::{LlmArgs, ask};
use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use rmsweb::judge::agreement::{agreement, read_labels};
use rmsweb::judge::prompts::{PROMPT_VERSION, Stage};
use rmsweb::judge::verdicts::{self, Verdict, content_hash, standing};
use rmsweb::judge::webjudge::{JudgeConfig, judge_trajectory};
use rmsweb::trajectory::import::InputErrors;
use rmsweb::trajectory::{Dataset, Task, Trajectory};
use rmsweb::util::sanitize::{clean_line, excerpt};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Arguments of `rmsweb judge`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub sub: Option<Sub>,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `judge eval`.
#[derive(clap::Subcommand)]
pub enum Sub {
    /// Agreement of the dataset's standing verdicts with hand labels (JSON Lines of
    /// {"trajectory_id", "success", "reason"}): accuracy, Cohen's kappa, confusion,
    /// every disagreement.
    Eval(EvalArgs),
}

/// Arguments of `rmsweb judge` itself.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The dataset whose trajectories are judged.
    #[arg(long, required = true)]
    pub dataset: Option<PathBuf>,
    /// Judge only these trajectories (comma-separated ids; default: all).
    #[arg(long, value_delimiter = ',')]
    pub trajectories: Vec<String>,
    /// Send each step's screenshot (base64 data URL) with its evidence prompt.
    #[arg(long)]
    pub vision: bool,
    #[command(flatten)]
    pub llm: LlmArgs,
    /// Do not send the answers' JSON schemas as `response_format` (for a server
    /// that refuses the field); the plain `Score:`/`Status:` forms are read either way.
    #[arg(long)]
    pub no_schema: bool,
    /// Judge again even where a standing verdict of this model and prompt exists.
    #[arg(long)]
    pub again: bool,
}

/// Arguments of `rmsweb judge eval`.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The labels file.
    pub labels: PathBuf,
    /// The dataset whose verdicts are compared.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Only this judge model's verdicts (default: the last verdict of any).
    #[arg(long)]
    pub model: Option<String>,
    /// Also write the result as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

impl Args {
    /// Whether the command talks to an endpoint (`judge`, not `judge eval`).
    pub fn opens_sockets(&self) -> bool {
        self.sub.is_none()
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.sub {
        Some(Sub::Eval(a)) => eval(a),
        None => judge(args.run),
    }
}

fn judge(a: RunArgs) -> Result<()> {
    let Some(dataset) = a.dataset else {
        bail!("judge needs --dataset");
    };
    let model = a.llm.model()?.to_string();
    let ds = Dataset::open(&dataset)?;
    let (todo, reused) = to_judge(&ds, &dataset, &a.trajectories, &model, a.again)?;
    // One client per question: its token budget and, unless --no-schema, its schema.
    let clients = a.llm.judge_clients(a.vision, !a.no_schema)?;
    let ask =
        |stage: Stage, text: &str, image: Option<&Path>| ask(&clients[stage as usize], text, image);
    let cfg = JudgeConfig {
        model: model.clone(),
        vision: a.vision,
        ..JudgeConfig::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(usize::from(a.llm.concurrency))
        .build()?;
    let written = Mutex::new(());
    let results: Vec<(String, Result<Verdict>)> = pool.install(|| {
        todo.par_iter()
            .map(|(task, t)| {
                let r = judge_trajectory(&ds, task, t, &cfg, &ask).and_then(|v| {
                    // Each verdict is kept as soon as it is made.
                    let _one_writer = written.lock();
                    verdicts::append(&dataset, std::slice::from_ref(&v))?;
                    Ok(v)
                });
                (t.id.clone(), r)
            })
            .collect()
    });
    let (failed, successes) = print_verdicts(&results);
    println!(
        "judged {} trajectories with {} ({} success, {} failure), {reused} standing verdicts reused, {failed} not judged; verdicts in {}",
        results.len() - failed,
        clean_line(&model),
        successes,
        results.len() - failed - successes,
        verdicts::path(&dataset).display()
    );
    if failed > 0 {
        bail!("{failed} trajectories could not be judged (run again to retry them)");
    }
    Ok(())
}

/// The trajectories to judge, with their tasks, and how many standing verdicts (same
/// model, prompt version and content) are reused instead; all of them with `again`.
/// A trajectory whose task is not in the dataset is refused.
fn to_judge(
    ds: &Dataset,
    dataset: &Path,
    ids: &[String],
    model: &str,
    again: bool,
) -> Result<(Vec<(Task, Trajectory)>, usize)> {
    let tasks: HashMap<String, Task> = ds
        .tasks()?
        .into_iter()
        .map(|t| (t.task_id.clone(), t))
        .collect();
    let chosen = chosen_trajectories(ds, ids)?;
    let earlier = verdicts::read(dataset)?;
    let standing = standing(&earlier, Some(model));
    let mut todo: Vec<(Task, Trajectory)> = Vec::new();
    let mut reused = 0;
    for t in chosen {
        let task = tasks.get(&t.task_id).cloned().unwrap_or_else(|| Task {
            task_id: t.task_id.clone(),
            website: String::new(),
            domain: String::new(),
            category: String::new(),
            instruction: String::new(),
            source: String::new(),
        });
        if task.instruction.is_empty() {
            bail!(
                "trajectory {}: its task {} is not in {} (the judge needs the task's text)",
                clean_line(&t.id),
                clean_line(&t.task_id),
                dataset.join("tasks.jsonl").display()
            );
        }
        let same = standing.get(t.id.as_str()).is_some_and(|v| {
            v.prompt_version == PROMPT_VERSION && v.content_hash == content_hash(&task, &t)
        });
        if same && !again {
            reused += 1;
        } else {
            todo.push((task, t));
        }
    }
    Ok((todo, reused))
}

/// Prints each trajectory's verdict (or why it was not judged); returns how many were
/// not judged and how many were judged successes.
fn print_verdicts(results: &[(String, Result<Verdict>)]) -> (usize, usize) {
    let mut failed = 0;
    let mut successes = 0;
    for (id, r) in results {
        match r {
            Ok(v) => {
                successes += usize::from(v.success);
                let selected = v.evidence.iter().filter(|e| e.selected).count();
                let first = v.summary();
                println!(
                    "{}: {} ({selected} of {} steps as key states) {}",
                    clean_line(id),
                    if v.success { "success" } else { "failure" },
                    v.evidence.len(),
                    excerpt(&first)
                );
            }
            Err(e) => {
                failed += 1;
                println!(
                    "{}: not judged: {}",
                    clean_line(id),
                    clean_line(&format!("{e:#}"))
                );
            }
        }
    }
    (failed, successes)
}

fn chosen_trajectories(ds: &Dataset, ids: &[String]) -> Result<Vec<Trajectory>> {
    if ids.is_empty() {
        return (0..ds.trajectory_count())
            .map(|i| ds.trajectory(i).map_err(Into::into))
            .collect();
    }
    ids.iter()
        .map(|id| {
            ds.trajectory_by_id(id)?.with_context(|| {
                format!(
                    "no trajectory {} in {}",
                    clean_line(id),
                    ds.root().display()
                )
            })
        })
        .collect()
}

fn eval(a: EvalArgs) -> Result<()> {
    let labels = read_labels(&a.labels).map_err(InputErrors)?;
    let all = verdicts::read(&a.dataset)?;
    let standing = standing(&all, a.model.as_deref());
    // The dataset's id index (built from each record's head, nothing parsed whole).
    let ds = Dataset::open(&a.dataset)?;
    let here: Vec<_> = labels
        .iter()
        .filter(|l| ds.position_of(&l.trajectory_id).is_some())
        .cloned()
        .collect();
    let r = agreement(&here, &standing);
    for d in &r.disagreements {
        println!(
            "disagree: {} label {} ({}), judge {}: {}",
            clean_line(&d.trajectory_id),
            if d.label { "success" } else { "failure" },
            clean_line(&d.label_reason),
            if d.verdict { "success" } else { "failure" },
            excerpt(&d.verdict_summary)
        );
    }
    let c = r.confusion;
    println!("                 judge success  judge failure");
    println!("label success    {:>13}  {:>13}", c[0][0], c[0][1]);
    println!("label failure    {:>13}  {:>13}", c[1][0], c[1][1]);
    println!(
        "{} labels compared ({} without a verdict, {} of other datasets): accuracy {:.3}, Cohen's kappa {:.3}",
        r.n,
        r.missing.len(),
        labels.len() - here.len(),
        r.accuracy,
        r.kappa
    );
    if let Some(path) = &a.report {
        rmsweb::util::fs::write_atomic(path, &serde_json::to_vec_pretty(&r)?)?;
        println!("report: {}", path.display());
    }
    if r.n == 0 {
        bail!(
            "no labelled trajectory of {} has a verdict",
            a.dataset.display()
        );
    }
    Ok(())
}
