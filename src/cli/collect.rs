//! `rmsweb collect`: reflection-conditioned multi-round collection on live MiniWoB++
//! tasks, every attempt appended to a dataset, with a yield report (table and JSON)
//! and optionally the same seeds run without reflection for comparison. Live-web
//! tasks (`--tasks-file`) have each attempt scored by an LLM judge (`--judge-url`)
//! before its retry is decided.

use super::eval::{EnvArgs, PolicyArgs, Tab};
use super::live_tasks::{JudgeArgs, live_tasks};
use anyhow::{Context, Result, bail};
use rmsweb::collect::parallel::{Worker, collect_parallel};
use rmsweb::collect::{
    CollectConfig, CollectReport, HeuristicReflector, LlmReflector, Reflector, collect,
    compare_table, table,
};
use rmsweb::policy::Policy;
use rmsweb::policy::chat::{ChatClient, ChatConfig};
use rmsweb::trajectory::Dataset;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `rmsweb collect`.
#[derive(clap::Args)]
pub struct Args {
    /// Comma-separated tasks: `miniwob:click-button,miniwob:enter-text`.
    #[arg(long, value_delimiter = ',', required_unless_present = "tasks_file")]
    pub tasks: Vec<String>,
    /// Live-web tasks instead: a JSON Lines file of task records (`task_id`,
    /// `website`, `instruction`), each one instance (`--seeds` and `--seed-start`
    /// do not apply) whose attempts the judge scores (`--judge-url`, which this
    /// needs).
    #[arg(long, conflicts_with = "tasks")]
    pub tasks_file: Option<PathBuf>,
    /// Seeds per task.
    #[arg(long, default_value_t = 10)]
    pub seeds: usize,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub seed_start: u64,
    /// Attempts per (task, seed).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Retry successes longer than this × the shortest known success of the same task instance (task + seed).
    #[arg(long, default_value_t = 1.5)]
    pub detour_factor: f64,
    /// Retry without reflections (the baseline).
    #[arg(long)]
    pub no_reflection: bool,
    /// Also run the same seeds without reflection and report both side by side
    /// (the baseline's attempts go to the dataset too, with no reflection).
    #[arg(long, conflicts_with = "no_reflection")]
    pub compare_no_reflection: bool,
    /// Step limit per attempt.
    #[arg(long, default_value_t = 10)]
    pub max_steps: usize,
    /// Instances (task, seed) played side by side, each in its own tab of one browser;
    /// with `--policy local` their steps are decoded together by one batching engine.
    /// The attempts are those of one at a time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub parallel: u64,
    /// Dataset folder every attempt is appended to (created if missing).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Write the yield report JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// LLM reflector endpoint (up to /v1); without it the heuristic reflector is used.
    #[arg(long, requires = "reflector_model")]
    pub reflector_url: Option<String>,
    /// LLM reflector model name.
    #[arg(long, requires = "reflector_url")]
    pub reflector_model: Option<String>,
    #[command(flatten)]
    pub policy: Box<PolicyArgs>,
    #[command(flatten)]
    pub env: Box<EnvArgs>,
    #[command(flatten)]
    pub judge: Box<JudgeArgs>,
}

/// The JSON written by `--report`.
#[derive(Serialize)]
struct ReportFile<'a> {
    with_reflection: Option<&'a CollectReport>,
    without_reflection: Option<&'a CollectReport>,
}

fn reflector(args: &Args) -> Result<Box<dyn Reflector + Send>> {
    match (&args.reflector_url, &args.reflector_model) {
        (Some(url), Some(model)) => {
            let client = ChatClient::new(ChatConfig {
                base_url: url.clone(),
                model: model.clone(),
                api_key_env: args.policy.api_key_env.clone(),
                temperature: 0.0,
                max_tokens: Some(256),
                ..Default::default()
            })?;
            Ok(Box::new(LlmReflector {
                client,
                fallback: HeuristicReflector,
            }))
        }
        _ => Ok(Box::new(HeuristicReflector)),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    if args.seeds == 0 || args.rounds == 0 || args.max_steps == 0 {
        bail!("--seeds, --rounds and --max-steps must be at least 1");
    }
    if !(args.detour_factor >= 1.0 && args.detour_factor.is_finite()) {
        bail!("--detour-factor must be a number of at least 1");
    }
    let (web_tasks, judge) =
        live_tasks(args.tasks_file.as_deref(), &args.judge, &args.policy.policy)?;
    super::eval::check_tasks(&args.tasks, &args.policy.policy, "collected")?;
    let parallel = args.parallel as usize;
    let mut policies = args.policy.build_side_by_side(parallel)?;
    let mut reflectors = (0..parallel)
        .map(|_| reflector(&args))
        .collect::<Result<Vec<_>>>()?;
    // A site has no seeds: each live-web task is one instance.
    let (seeds, seed_start) = match web_tasks {
        Some(_) => (1, 0),
        None => (args.seeds, args.seed_start),
    };
    let (mut envs, tasks) = args.env.tabs(web_tasks, &args.tasks, parallel)?;
    let mut dataset = Dataset::create(
        &args.dataset,
        "rmsweb-collect",
        "attempts written by rmsweb collect",
    )
    .with_context(|| format!("opening dataset {}", args.dataset.display()))?;
    let base = CollectConfig {
        tasks,
        seeds,
        seed_start,
        rounds: args.rounds,
        detour_factor: args.detour_factor,
        // Both passes of a comparison start from the same prior knowledge.
        known_shortest: rmsweb::collect::known_shortest(&dataset)?,
        reflection: !args.no_reflection,
        max_steps: args.max_steps,
        judge,
    };
    let mut runs = vec![base.clone()];
    if args.compare_no_reflection {
        runs.push(CollectConfig {
            reflection: false,
            ..base
        });
    }
    let mut reports = Vec::new();
    for cfg in &runs {
        let report = collect_pass(cfg, &mut envs, &mut policies, &mut reflectors, &mut dataset)?;
        print!("{}", table(&report));
        reports.push(report);
    }
    let (on, off) = match (base_reflection(&args), reports.as_slice()) {
        (true, [a, b]) => (Some(a), Some(b)),
        (true, [a]) => (Some(a), None),
        (false, [a]) => (None, Some(a)),
        _ => (None, None),
    };
    if let (Some(a), Some(b)) = (on, off) {
        println!("\nwith vs without reflection (same seeds):");
        print!("{}", compare_table(a, b));
    }
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&ReportFile {
            with_reflection: on,
            without_reflection: off,
        })?;
        rmsweb::util::fs::write_atomic(path, text.as_bytes())?;
        println!("report written to {}", path.display());
    }
    let n: usize = reports.iter().map(|r| r.attempts_total).sum();
    println!("{n} attempts appended to {}", args.dataset.display());
    super::live_tasks::unjudged(
        reports
            .iter()
            .flat_map(|r| r.attempts.iter().map(|a| a.reason.as_str())),
        Some(&args.dataset),
    )
}

/// One collection pass (reflection on or off) over every tab, with its progress bar.
fn collect_pass(
    cfg: &CollectConfig,
    envs: &mut [Tab],
    policies: &mut [Box<dyn Policy + Send>],
    reflectors: &mut [Box<dyn Reflector + Send>],
    dataset: &mut Dataset,
) -> Result<CollectReport> {
    let parallel = envs.len();
    let bar = indicatif::ProgressBar::new((cfg.tasks.len() * cfg.seeds) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} {bar:30} {pos}/{len} seeds {elapsed} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix(if cfg.reflection {
        "reflection on "
    } else {
        "reflection off"
    });
    let (mut attempts, mut ok) = (0usize, 0usize);
    let rounds = cfg.rounds as u32;
    let mut on_attempt = |a: &rmsweb::collect::AttemptRecord| {
        attempts += 1;
        ok += usize::from(a.success);
        bar.set_message(format!(
            "{} s{} round {} — {ok}/{attempts} attempts ok",
            rmsweb::util::sanitize::clean_line(&a.task),
            a.seed,
            a.round
        ));
        if a.ends_seed(rounds) {
            bar.inc(1);
        }
    };
    let report = if parallel > 1 {
        let workers = envs
            .iter_mut()
            .zip(policies.iter_mut())
            .zip(reflectors.iter_mut())
            .map(|((env, policy), reflector)| Worker {
                env: env.as_mut(),
                policy: policy.as_mut(),
                reflector: reflector.as_mut(),
            })
            .collect();
        collect_parallel(workers, cfg, Some(dataset), &mut on_attempt)?
    } else {
        collect(
            envs[0].as_mut(),
            policies[0].as_mut(),
            reflectors[0].as_mut(),
            cfg,
            Some(dataset),
            &mut on_attempt,
        )?
    };
    bar.finish_and_clear();
    Ok(report)
}

fn base_reflection(args: &Args) -> bool {
    !args.no_reflection
}
