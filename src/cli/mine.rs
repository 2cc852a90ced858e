//! `rmsweb mine`: failure-mode mining of critical steps, `rmsweb mine explain` and
//! `rmsweb mine eval-labels`.

use anyhow::{Context, Result, bail};
use rmsweb::mine::explain::{explain_pair_id, explain_trajectories, render};
use rmsweb::mine::{HeuristicJudge, Judge, LlmJudge, MineConfig, mine_dataset, write_output};
use rmsweb::trajectory::Dataset;
use std::path::PathBuf;

/// Arguments of `rmsweb mine`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Box<MineCommand>>,
    /// Dataset folder to mine.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
    /// Output folder (default: DATASET/mined).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads (default: all cores). The output does not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the report as one JSON object instead of the summary table.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// Whether the command talks to an LLM judge over HTTP (`--judge-url` given).
    pub fn opens_sockets(&self) -> bool {
        let sub = self.command.as_deref().map(|c| match c {
            MineCommand::Explain(a) => &a.common,
            MineCommand::EvalLabels(a) => &a.common,
        });
        self.common.judge_url.is_some() || sub.is_some_and(|c| c.judge_url.is_some())
    }
}

/// Options shared by mining and explaining.
#[derive(clap::Args, Clone)]
pub struct Common {
    /// Mining configuration (TOML; every key optional).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// OpenAI-compatible endpoint of the LLM judge (e.g. http://127.0.0.1:8000/v1).
    /// Without it the heuristic labeller is used.
    #[arg(long, requires = "judge_model")]
    pub judge_url: Option<String>,
    /// Model name for the LLM judge.
    #[arg(long, requires = "judge_url")]
    pub judge_model: Option<String>,
    /// Environment variable holding the judge endpoint's API key (none: no key sent).
    #[arg(long, requires = "judge_url")]
    pub judge_api_key_env: Option<String>,
}

/// `rmsweb mine` subcommands.
#[derive(clap::Subcommand)]
pub enum MineCommand {
    /// Every candidate step pair of one trajectory pair, its score parts and why it
    /// won or was rejected.
    Explain(ExplainArgs),
    /// Precision and recall per category of the labeller (heuristic, or the LLM judge
    /// with --judge-url) against hand-labelled pairs.
    EvalLabels(EvalLabelsArgs),
}

/// Arguments of `rmsweb mine eval-labels`.
#[derive(clap::Args)]
pub struct EvalLabelsArgs {
    /// Labels files (JSON Lines: dataset, success, loc, category, note), or folders
    /// of them (every `*.jsonl` inside), e.g. tests/data/labels.
    #[arg(required = true)]
    pub labels: Vec<PathBuf>,
    #[command(flatten)]
    pub common: Common,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rmsweb mine explain`.
#[derive(clap::Args)]
pub struct ExplainArgs {
    /// Dataset folder.
    #[arg(long = "dataset", value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// `PAIR_ID` (a mined pair id, `SUCCESS@i~LOC@j`; or give --success and --loc) with
    /// --dataset; the older spelling `DATASET [PAIR_ID]` is still accepted.
    #[arg(value_name = "PAIR_ID", num_args = 0..=2)]
    pub args: Vec<String>,
    /// Success trajectory id.
    #[arg(long, requires = "loc")]
    pub success: Option<String>,
    /// Loc trajectory id (a failure, or a longer success for a detour).
    #[arg(long, requires = "success")]
    pub loc: Option<String>,
    #[command(flatten)]
    pub common: Common,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn config(c: &Common) -> Result<MineConfig> {
    match &c.config {
        Some(p) => MineConfig::load(p),
        None => Ok(MineConfig::default()),
    }
}

fn judge(c: &Common) -> Result<Box<dyn Judge>> {
    match (&c.judge_url, &c.judge_model) {
        (Some(url), Some(model)) => judge_over_http(url, model, c.judge_api_key_env.as_deref()),
        _ => Ok(Box::new(HeuristicJudge)),
    }
}

/// The LLM judge over the project's OpenAI-compatible chat client: the judge's prompt
/// goes out as one user message; transport and parse failures fall back to the
/// heuristic label with a note (see `label_pair`).
fn judge_over_http(url: &str, model: &str, key_env: Option<&str>) -> Result<Box<dyn Judge>> {
    use rmsweb::policy::chat::{ChatClient, ChatConfig};
    use rmsweb::policy::prompt::ChatMessage;
    let client = ChatClient::new(ChatConfig {
        base_url: url.to_string(),
        model: model.to_string(),
        api_key_env: key_env.map(str::to_owned),
        max_tokens: Some(256),
        ..ChatConfig::default()
    })?;
    Ok(Box::new(LlmJudge::new(Box::new(move |prompt: &str| {
        client.complete(&[ChatMessage {
            role: "user".into(),
            content: prompt.to_string(),
            image: None,
        }])
    }))))
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    if let Some(cmd) = args.command {
        return match *cmd {
            MineCommand::Explain(e) => explain(e),
            MineCommand::EvalLabels(e) => eval_labels(e),
        };
    }
    let Some(dataset) = args.dataset else {
        bail!("--dataset is required (or use `rmsweb mine explain`)");
    };
    let cfg = config(&args.common)?;
    let judge = judge(&args.common)?;
    let ds = Dataset::open(&dataset)?;
    let out_dir = args.out.unwrap_or_else(|| dataset.join("mined"));
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} mining {pos}/{len} tasks [{elapsed_precise}] {wide_bar} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let tick = |total: usize| {
        bar.set_length(total as u64);
        bar.inc(1);
    };
    let out = match args.threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .context("starting worker threads")?
            .install(|| mine_dataset(&ds, &cfg, judge.as_ref(), &tick)),
        None => mine_dataset(&ds, &cfg, judge.as_ref(), &tick),
    }?;
    bar.finish_and_clear();
    write_output(&out_dir, &out)?;
    if args.json {
        println!("{}", serde_json::to_string(&out.report)?);
    } else {
        print!("{}", out.report.summary_table());
        println!(
            "wrote {}, {} and {}",
            out_dir.join("pairs.jsonl").display(),
            out_dir.join("dropped.jsonl").display(),
            out_dir.join("report.json").display()
        );
    }
    Ok(())
}

fn explain(a: ExplainArgs) -> Result<()> {
    let cfg = config(&a.common)?;
    let judge = judge(&a.common)?;
    let mut args = a.args.into_iter();
    let (dataset, pair_id) = match a.dataset {
        Some(d) => (d, args.next()),
        None => match args.next() {
            Some(d) => (PathBuf::from(d), args.next()),
            None => bail!(
                "missing arguments: pass --dataset DIR and a PAIR_ID (or --success and --loc)"
            ),
        },
    };
    if args.next().is_some() {
        bail!("too many arguments: expected --dataset DIR and one PAIR_ID");
    }
    let ds = Dataset::open(&dataset)?;
    let e = match (&pair_id, &a.success, &a.loc) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            bail!("give a PAIR_ID or --success and --loc, not both")
        }
        (Some(id), _, _) => explain_pair_id(&ds, id, &cfg, judge.as_ref())?,
        (None, Some(s), Some(l)) => explain_trajectories(&ds, s, l, &cfg, judge.as_ref())?,
        _ => bail!("give a PAIR_ID, or --success and --loc"),
    };
    if a.json {
        println!("{}", serde_json::to_string(&e)?);
    } else {
        print!("{}", render(&e));
    }
    Ok(())
}

fn eval_labels(a: EvalLabelsArgs) -> Result<()> {
    use rmsweb::mine::eval_labels::{evaluate, load_cases, render};
    let cfg = config(&a.common)?;
    let judge = judge(&a.common)?;
    let cases = load_cases(&a.labels, &cfg)?;
    let e = evaluate(&cases, &cfg, judge.as_ref(), a.common.judge_url.is_some())?;
    if a.json {
        println!("{}", serde_json::to_string(&e)?);
    } else {
        print!("{}", render(&e, &cfg));
    }
    Ok(())
}
