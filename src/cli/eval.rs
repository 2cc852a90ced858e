//! `rmsweb eval`: evaluate a policy on live MiniWoB++ tasks (pass@1, pass@k, steps on
//! solved tasks), with a progress bar, a per-task table, a results JSON and every
//! episode saved as a trajectory into a dataset. Live-web tasks (`--tasks-file`),
//! whose sites do not score themselves, are scored by an LLM judge (`--judge-url`).

use super::live_tasks::{JudgeArgs, live_tasks, unjudged};
use anyhow::{Context, Result, bail};
use rmsweb::env::miniwob::{resolve_dir, task_name};
use rmsweb::env::{ChromeOptions, MiniwobEnv, WebEnv};
use rmsweb::eval::stop::{CutShort, Stoppable};
use rmsweb::eval::{EpisodeEnv, EvalConfig, EvalReport, evaluate, table, write_report};
use rmsweb::policy::Policy;
use rmsweb::policy::chat::{ChatClient, ChatConfig, ChatPolicy};
use rmsweb::policy::format::PromptFormat;
use rmsweb::policy::scripted::{MistakeRates, ScriptedTeacher, TeacherThinking};
use rmsweb::trajectory::{Dataset, Task};
use rmsweb::util::sanitize::clean_line;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Which policy acts, and how it is configured.
#[derive(clap::Args, Debug, Clone)]
pub struct PolicyArgs {
    /// `scripted` (the scripted MiniWoB teacher), `chat` (an OpenAI-compatible endpoint)
    /// or `local` (a candle model checkpoint, see `--checkpoint`).
    #[arg(long, default_value = "scripted")]
    pub policy: String,
    /// Chat endpoint base URL (up to /v1).
    #[arg(long, default_value = "http://127.0.0.1:8000/v1")]
    pub base_url: String,
    /// Chat model name.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Name of the environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Send screenshots to the chat model as images.
    #[arg(long)]
    pub vision: bool,
    /// Chat request timeout in seconds.
    #[arg(long, default_value_t = 120.0)]
    pub timeout_s: f64,
    /// Chat retries on timeouts and 5xx.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Local model: a model folder, a training checkpoint (`runs/ID/checkpoints/step-N`)
    /// or a run folder (its latest complete checkpoint).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Local model: device (`cpu` or `cuda:N`).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Local model: sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Local model: most tokens of one answer (a grounded answer is closed the
    /// shortest way its schema allows before they run out).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub max_new_tokens: u64,
    /// Local model: decode each answer under the step's observation-grounded schema
    /// (element indices the prompt shows, typed values spanning the instruction).
    #[arg(long)]
    pub grounded: bool,
    /// Chat and local models: the prompt format the model was trained with (default:
    /// the one a local checkpoint records, else `rmsweb`).
    #[arg(long, value_enum)]
    pub prompt_format: Option<rmsweb::policy::format::PromptFormat>,
    /// Scripted teacher: rate of every mistake mode (0..1).
    #[arg(long, default_value_t = 0.0)]
    pub mistake_rate: f64,
    /// Scripted teacher: misclick rate (overrides --mistake-rate).
    #[arg(long)]
    pub misclick: Option<f64>,
    /// Scripted teacher: wrong/partial value rate.
    #[arg(long)]
    pub wrong_value: Option<f64>,
    /// Scripted teacher: premature done rate.
    #[arg(long)]
    pub premature_done: Option<f64>,
    /// Scripted teacher: detour rate.
    #[arg(long)]
    pub detour: Option<f64>,
    /// Scripted teacher: how it words its thinking (`progress`: the plan's last
    /// finished part first, `Done: check tB. To check nx5Zf, click nx5Zf [3].`).
    #[arg(long, value_enum, default_value_t = TeacherThinking::Plain)]
    pub teacher_thinking: TeacherThinking,
}

impl PolicyArgs {
    /// `n` policies for episodes played side by side: for a local model, clients of
    /// one batching engine that decodes their steps together; otherwise `n` policies
    /// built alike.
    pub fn build_side_by_side(&self, n: usize) -> Result<Vec<Box<dyn Policy + Send>>> {
        if self.policy == "local" {
            let clients = self
                .build_local()?
                .batched(n, rmsweb::model::engine::EngineOptions::default())?;
            return Ok(clients
                .into_iter()
                .map(|c| Box::new(c) as Box<dyn Policy + Send>)
                .collect());
        }
        (0..n).map(|_| self.build()).collect()
    }

    /// The local model's policy (`--policy local`).
    fn build_local(&self) -> Result<rmsweb::policy::local::LocalPolicy> {
        let Some(dir) = &self.checkpoint else {
            bail!(
                "--policy local needs --checkpoint DIR (a model folder, a run checkpoint or a run folder)"
            );
        };
        let mut model = super::score::load(dir, &self.device)?;
        model.sampling.temperature = self.temperature;
        model.sampling.max_new_tokens = self.max_new_tokens as usize;
        let name = format!("local:{}", dir.display());
        let mut policy = rmsweb::policy::local::LocalPolicy::new(model, name);
        policy.prompt.format = layout_for(self.prompt_format, dir)?;
        policy.grounded = self.grounded;
        Ok(policy)
    }

    /// Builds the policy.
    pub fn build(&self) -> Result<Box<dyn Policy + Send>> {
        match self.policy.as_str() {
            "scripted" => {
                let base = MistakeRates::uniform(self.mistake_rate);
                let rates = MistakeRates {
                    misclick: self.misclick.unwrap_or(base.misclick),
                    wrong_value: self.wrong_value.unwrap_or(base.wrong_value),
                    premature_done: self.premature_done.unwrap_or(base.premature_done),
                    detour: self.detour.unwrap_or(base.detour),
                };
                for (n, v) in [
                    ("misclick", rates.misclick),
                    ("wrong-value", rates.wrong_value),
                    ("premature-done", rates.premature_done),
                    ("detour", rates.detour),
                ] {
                    if !(0.0..=1.0).contains(&v) {
                        bail!("--{n} must be within 0..1, got {v}");
                    }
                }
                Ok(Box::new(
                    ScriptedTeacher::new(rates).with_thinking(self.teacher_thinking),
                ))
            }
            "chat" => {
                if !(self.timeout_s > 0.0 && self.timeout_s.is_finite()) {
                    bail!("--timeout-s must be a positive number of seconds");
                }
                let client = ChatClient::new(ChatConfig {
                    base_url: self.base_url.clone(),
                    model: self.model.clone(),
                    api_key_env: self.api_key_env.clone(),
                    timeout: Duration::from_secs_f64(self.timeout_s),
                    max_retries: self.retries,
                    vision: self.vision,
                    ..Default::default()
                })?;
                let mut policy = ChatPolicy::new(client);
                policy.prompt.format = self.prompt_format.unwrap_or_default();
                Ok(Box::new(policy))
            }
            "local" => Ok(Box::new(self.build_local()?)),
            other => bail!("unknown --policy {other:?}: use scripted, chat or local"),
        }
    }
}

/// The layout a local model's prompts are rendered in: the one asked for, else the
/// one its checkpoint records ([`rmsweb::train::prompt_record`]), else the default.
/// Asking for another layout than the recorded one is allowed (a cross-layout test)
/// and said on stderr.
fn layout_for(asked: Option<PromptFormat>, checkpoint: &std::path::Path) -> Result<PromptFormat> {
    let recorded = rmsweb::train::prompt_record::read(checkpoint)?;
    let known = recorded.as_deref().and_then(PromptFormat::of_version);
    if let (Some(v), None) = (&recorded, known) {
        bail!(
            "{}: records the prompt layout {:?}, which this rmsweb does not know",
            clean_line(&checkpoint.display().to_string()),
            clean_line(v)
        );
    }
    let shown = clean_line(&checkpoint.display().to_string()).into_owned();
    let (layout, why) = match (asked, known) {
        (Some(a), Some(k)) if a != k => {
            eprintln!(
                "note: {shown} was trained on the {} layout; rendering {} as asked",
                k.name(),
                a.name()
            );
            (a, "asked")
        }
        (Some(a), _) => (a, "asked"),
        (None, Some(k)) => (k, "recorded by the checkpoint"),
        (None, None) => (
            PromptFormat::default(),
            "the default; the checkpoint records none",
        ),
    };
    eprintln!("prompt layout {} ({why})", layout.name());
    Ok(layout)
}

/// Where the browser and the MiniWoB pages are.
#[derive(clap::Args, Debug, Clone)]
pub struct EnvArgs {
    /// Chromium executable.
    #[arg(long, default_value = rmsweb::env::DEFAULT_CHROMIUM)]
    pub chromium: PathBuf,
    /// MiniWoB html folder (default: $RMSWEB_MINIWOB_DIR or ~/.cache/rmsweb/miniwob).
    #[arg(long)]
    pub miniwob_dir: Option<PathBuf>,
}

impl EnvArgs {
    /// Launches the browser and serves the pages.
    pub fn open(&self) -> Result<MiniwobEnv> {
        let dir = resolve_dir(self.miniwob_dir.as_deref());
        MiniwobEnv::open(&dir, &self.chrome())
    }

    /// `n` tabs of one browser for the tasks to play, and the tasks' names: the
    /// live-web tasks' ids when there are any, else the MiniWoB `tasks` (refused by
    /// name when the install does not have one).
    pub fn tabs(
        &self,
        web: Option<Vec<Task>>,
        miniwob: &[String],
        n: usize,
    ) -> Result<(Vec<Tab>, Vec<String>)> {
        match web {
            Some(tasks) => {
                let ids = tasks.iter().map(|t| t.task_id.clone()).collect();
                let env = WebEnv::open(&self.chrome(), tasks)?;
                Ok((tabs_of(env, n, WebEnv::open_tab)?, ids))
            }
            None => {
                let env = self.open()?;
                for t in miniwob {
                    if !env.tasks().iter().any(|x| x == task_name(t)) {
                        bail!("unknown MiniWoB task {t:?} (see `rmsweb miniwob list`)");
                    }
                }
                Ok((tabs_of(env, n, MiniwobEnv::open_tab)?, miniwob.to_vec()))
            }
        }
    }

    fn chrome(&self) -> ChromeOptions {
        ChromeOptions {
            executable: self.chromium.clone(),
            ..Default::default()
        }
    }
}

/// Arguments of `rmsweb eval`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// Comma-separated tasks: `miniwob:click-button,miniwob:enter-text`.
    #[arg(long, value_delimiter = ',', required_unless_present = "tasks_file")]
    pub tasks: Vec<String>,
    /// Live-web tasks instead: a JSON Lines file of task records (`task_id`,
    /// `website`, `instruction`), each played from its website once per attempt
    /// (`--k`; `--episodes` and `--seed` do not apply) and scored by the judge
    /// (`--judge-url`, which this needs, with `--dataset`).
    #[arg(long, conflicts_with = "tasks")]
    pub tasks_file: Option<PathBuf>,
    /// Task instances per task type (seeds S, S+1, ...).
    #[arg(long, default_value_t = 10)]
    pub episodes: usize,
    /// k of pass@k: attempts per instance, the policy re-seeded for each (a local
    /// model needs --temperature > 0 for its attempts to differ).
    #[arg(long, default_value_t = 1)]
    pub k: usize,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Step limit per episode.
    #[arg(long, default_value_t = 10)]
    pub max_steps: usize,
    /// Dataset folder to append every episode to (created if missing).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Write the results JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Reflection text given to every attempt.
    #[arg(long)]
    pub reflection: Option<String>,
    /// Episodes played side by side, each in its own tab of one browser (a local
    /// model decodes their steps together in one batch; same episodes, same ids).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub parallel: u64,
    #[command(flatten)]
    pub policy: Box<PolicyArgs>,
    #[command(flatten)]
    pub env: Box<EnvArgs>,
    #[command(flatten)]
    pub judge: Box<JudgeArgs>,
}

/// `rmsweb eval` subcommands.
#[derive(clap::Subcommand)]
pub enum EvalCommand {
    /// Evaluations' results JSONs (`--out`) side by side, episodes paired by task,
    /// seed and attempt: pass@1 per task type, the episodes each solved that the other
    /// did not (lost, gained) and McNemar's exact p-value on them; several compared
    /// evaluations (RL seeds) are each paired with the base, then pooled.
    Compare(CompareArgs),
}

/// Arguments of `rmsweb eval compare`.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// The base evaluation (e.g. the SFT policy's).
    pub base: PathBuf,
    /// The evaluation to compare with it (e.g. an RL policy's, on the same seeds);
    /// several (one per RL seed, say) are each paired with the base and pooled.
    #[arg(required = true)]
    pub new: Vec<PathBuf>,
    /// Print the comparison as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// Whether the command plays live episodes (a browser, maybe an LLM endpoint);
    /// `eval compare` only reads files.
    pub fn opens_sockets(&self) -> bool {
        !matches!(self.command, Some(EvalCommand::Compare(_)))
    }
}

fn compare(args: CompareArgs) -> Result<()> {
    use rmsweb::eval::compare::{compare_pooled, load_report, render};
    let base = load_report(&args.base)?;
    let news = args
        .new
        .iter()
        .map(|p| load_report(p))
        .collect::<Result<Vec<_>>>()?;
    let c = compare_pooled(&base, &news);
    // `runs` follows the order of `news`: name the first file with nothing to pair.
    if let Some((path, _)) = args
        .new
        .iter()
        .zip(&c.runs)
        .find(|(_, r)| r.total.paired == 0)
    {
        bail!(
            "{} and {} share no episode (same task, seed and attempt)",
            args.base.display(),
            path.display()
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", render(&c));
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    if let Some(EvalCommand::Compare(c)) = args.command {
        return compare(c);
    }
    if args.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    if args.max_steps == 0 {
        bail!("--max-steps must be at least 1");
    }
    let (web_tasks, judge) =
        live_tasks(args.tasks_file.as_deref(), &args.judge, &args.policy.policy)?;
    check_args(&args, web_tasks.is_some())?;
    let parallel = args.parallel as usize;
    let policies = args.policy.build_side_by_side(parallel)?;
    // A site has no seeds: each live-web task is one instance, played --k times.
    let (episodes, seed) = match web_tasks {
        Some(_) => (1, 0),
        None => (args.episodes, args.seed),
    };
    let (mut tabs, tasks) = args.env.tabs(web_tasks, &args.tasks, parallel)?;
    let mut dataset = args.dataset.as_deref().map(open_dataset).transpose()?;
    let cfg = EvalConfig {
        tasks,
        episodes,
        k: args.k,
        seed,
        max_steps: args.max_steps,
        reflection: args.reflection.clone(),
        judge,
    };
    let bar = episode_bar((cfg.tasks.len() * episodes * args.k) as u64);
    // The first SIGINT/SIGTERM ends the episodes at work unrecorded; the episodes
    // done are written below (a second signal ends the process at once).
    let stop = rmsweb::eval::stop::on_signals()?;
    let mut policies = stoppable(policies, &stop);
    let mut solved = 0usize;
    let mut done = 0usize;
    let mut on_episode = |r: &rmsweb::eval::EpisodeRecord| {
        done += 1;
        solved += usize::from(r.success);
        bar.set_message(format!(
            "{} ok {solved}/{done}",
            rmsweb::util::sanitize::clean_line(&r.task)
        ));
        bar.inc(1);
    };
    let result = if parallel > 1 {
        rmsweb::eval::parallel::evaluate_parallel(
            &mut tabs,
            policies,
            &cfg,
            dataset.as_mut(),
            &mut on_episode,
        )
    } else {
        let mut policy = policies.pop().context("no policy")?;
        evaluate(
            &mut tabs[0],
            policy.as_mut(),
            &cfg,
            dataset.as_mut(),
            &mut on_episode,
        )
    };
    bar.finish_and_clear();
    // Cut short (a stop, the browser gone): what was done is still written.
    let (report, failure) = match result {
        Ok(r) => (r, None),
        Err(e) => match e.downcast_ref::<CutShort>() {
            Some(c) => (c.0.as_ref().clone(), Some(e)),
            None => return Err(e),
        },
    };
    print!("{}", table(&report));
    written(&args, &report, failure)
}

/// The checks of `eval`'s arguments that need the live-web tasks read (`live`): a
/// dataset for them, known tasks, and `--k`.
fn check_args(args: &Args, live: bool) -> Result<()> {
    if live && args.dataset.is_none() {
        bail!(
            "--tasks-file needs --dataset: the episodes' screenshots and the judge's verdicts are kept there"
        );
    }
    check_tasks(&args.tasks, &args.policy.policy, "evaluated")?;
    if args.k == 0 {
        bail!("--k must be at least 1");
    }
    if args.k > 1 && args.policy.policy == "local" && args.policy.temperature == 0.0 {
        eprintln!(
            "note: --k {} with a greedy local policy (--temperature 0): every attempt repeats the first",
            args.k
        );
    }
    Ok(())
}

/// The MiniWoB tasks to play (`eval`, `collect`): `miniwob:<name>` or a bare name,
/// and one the scripted teacher knows when it plays. `verb` says what is done live.
pub(super) fn check_tasks(tasks: &[String], policy: &str, verb: &str) -> Result<()> {
    for t in tasks {
        if !t.starts_with("miniwob:") && t.contains(':') {
            bail!("task {t:?}: only miniwob:<name> tasks can be {verb} live");
        }
        if policy == "scripted" && !ScriptedTeacher::supports(t) {
            bail!(
                "task {t:?}: the scripted teacher does not know it (it knows: {})",
                rmsweb::policy::scripted::SUPPORTED_TASKS.join(", ")
            );
        }
    }
    Ok(())
}

/// The dataset the episodes are appended to (created when new).
fn open_dataset(d: &std::path::Path) -> Result<Dataset> {
    Dataset::create(d, "rmsweb-eval", "episodes written by rmsweb eval")
        .with_context(|| format!("opening dataset {}", d.display()))
}

/// The policies, each stopping at `stop` (the first SIGINT/SIGTERM).
fn stoppable(
    policies: Vec<Box<dyn Policy + Send>>,
    stop: &Arc<AtomicBool>,
) -> Vec<Box<dyn Policy + Send>> {
    policies
        .into_iter()
        .map(|inner| {
            Box::new(Stoppable {
                inner,
                stop: stop.clone(),
            }) as Box<dyn Policy + Send>
        })
        .collect()
}

/// The progress bar over every episode to play.
fn episode_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes {elapsed} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Says where the results went (`--out`, `--dataset`); then the error that cut the
/// run short, if one did, or the live-web episodes left unjudged.
fn written(args: &Args, report: &EvalReport, failure: Option<anyhow::Error>) -> Result<()> {
    if let Some(out) = &args.out {
        write_report(out, report)?;
        println!(
            "results written to {}{}",
            out.display(),
            if failure.is_some() {
                " (the episodes done before it stopped)"
            } else {
                ""
            }
        );
    }
    if let Some(d) = &args.dataset {
        println!(
            "{} trajectories appended to {}",
            report.episodes_total,
            d.display()
        );
    }
    if let Some(e) = failure {
        return Err(e);
    }
    unjudged(
        report.episodes.iter().map(|e| e.reason.as_str()),
        args.dataset.as_deref(),
    )
}

/// A browser tab of either kind of task.
pub type Tab = Box<dyn EpisodeEnv + Send>;

/// `env` and `n - 1` more tabs of its browser, one per worker.
fn tabs_of<E: EpisodeEnv + Send + 'static>(
    env: E,
    n: usize,
    open_tab: fn(&E) -> Result<E>,
) -> Result<Vec<Tab>> {
    let mut tabs: Vec<Tab> = Vec::new();
    for _ in 1..n {
        tabs.push(Box::new(open_tab(&env)?));
    }
    tabs.insert(0, Box::new(env));
    Ok(tabs)
}
