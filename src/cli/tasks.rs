//! `rmsweb tasks generate` (seed tasks from search queries through an LLM) and
//! `rmsweb tasks overlap` (the training set's lexical overlap with a benchmark).

use anyhow::{Context, Result, bail};
use rmsweb::tasks::overlap::{Overlap, Pair, find_overlaps};
use rmsweb::tasks::overlap_config::OverlapConfig;
use rmsweb::trajectory::import::InputErrors;
use rmsweb::trajectory::import::tasks::{Limits, TaskFormat, parse_task_file};
use rmsweb::trajectory::{Dataset, Task};
use rmsweb::util::sanitize::clean_line;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `rmsweb tasks`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

/// What to do with task sets.
#[derive(clap::Subcommand)]
pub enum What {
    /// Turn search queries (one a line, or JSON Lines of {"id", "query"}) into web
    /// tasks with a website, an objective and constraints, through any
    /// OpenAI-compatible endpoint (`rmsweb serve` included). Answers are cached in
    /// the dataset by (query, model, prompt version); drafts without a website or an
    /// objective are refused with the reason; near-duplicates are dropped and counted.
    Generate(GenerateArgs),
    /// Lexical overlap of every training task with every benchmark task (word n-gram
    /// containment and Jaccard after the rubric's normalization, lower thresholds on
    /// the same website). Prints each flagged pair with the n-grams it shares and
    /// exits non-zero when any pair crosses a threshold, unless --drop wrote the
    /// training tasks without them.
    Overlap(OverlapArgs),
}

/// Arguments of `rmsweb tasks overlap`.
#[derive(clap::Args)]
pub struct OverlapArgs {
    /// The training dataset (its tasks.jsonl).
    #[arg(long)]
    pub train: PathBuf,
    /// The benchmark's task list.
    #[arg(long)]
    pub benchmark: PathBuf,
    /// Format of the benchmark's task list (jsonl: rmsweb Task records).
    #[arg(long, value_enum)]
    pub format: TaskFormat,
    /// A TOML file whose [overlap] table sets the thresholds (ngram, containment,
    /// jaccard, same_site_containment, same_site_jaccard, max_evidence).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Also write the whole result as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the training tasks that cross no threshold to this new file (rmsweb
    /// Task JSON Lines, for `import tasks --format jsonl`); never over an existing file.
    #[arg(long)]
    pub drop: Option<PathBuf>,
}

/// Arguments of `rmsweb tasks generate`.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// The query file.
    #[arg(long)]
    pub queries: PathBuf,
    /// Dataset folder the tasks are appended to (created if missing).
    #[arg(long)]
    pub dataset: PathBuf,
    #[command(flatten)]
    pub llm: super::llm_args::LlmArgs,
    /// The categories, comma-separated (default: the paper's eleven).
    #[arg(long, value_delimiter = ',')]
    pub categories: Vec<String>,
    /// Objective-word Jaccard at which two tasks on one site are duplicates.
    #[arg(long, default_value_t = 0.9)]
    pub duplicate_jaccard: f64,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Do not send the answer's JSON schema as `response_format` (for a server that
    /// refuses the field).
    #[arg(long)]
    pub no_schema: bool,
}

impl Args {
    /// Whether the command talks to an endpoint (`generate`, not `overlap`).
    pub fn opens_sockets(&self) -> bool {
        matches!(self.what, What::Generate(_))
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Generate(a) => generate(a),
        What::Overlap(a) => overlap(a),
    }
}

/// Prints what `tasks generate` did: each failure, refusal, kept task and
/// duplicate, the totals, and the kept tasks per category.
fn print_generated(
    r: &rmsweb::tasks::generate::GenerateReport,
    categories: &[String],
    dataset: &std::path::Path,
) {
    for f in &r.failed {
        println!("failed: {}", refusal(f));
    }
    for f in &r.refused {
        println!("refused: {}", refusal(f));
    }
    for t in &r.kept {
        println!(
            "task {}: {}",
            clean_line(&t.task_id),
            clean_line(&t.instruction)
        );
    }
    for (id, of) in &r.duplicates {
        println!("duplicate: {} repeats {}", clean_line(id), clean_line(of));
    }
    println!(
        "{} queries ({} answers from the cache, {} sent): {} tasks kept, {} refused, {} duplicates dropped, {} already present, {} queries failed; appended to {}",
        r.queries,
        r.cached,
        r.queries - r.cached,
        r.kept.len(),
        r.refused.len(),
        r.duplicates.len(),
        r.already_present,
        r.failed.len(),
        dataset.join("tasks.jsonl").display()
    );
    println!("categories of the kept tasks:");
    let mut rows: Vec<(String, usize)> = categories
        .iter()
        .map(|c| (c.clone(), r.categories.get(c).copied().unwrap_or(0)))
        .collect();
    if let Some(n) = r.categories.get("(none)") {
        rows.push(("(none)".into(), *n));
    }
    for (c, n) in rows {
        println!("  {:<14} {n:>5}", clean_line(&c));
    }
}

fn generate(a: GenerateArgs) -> Result<()> {
    use rmsweb::tasks::generate::{GenerateConfig, generate};
    use rmsweb::tasks::seed_prompt::CATEGORIES;
    if !(a.duplicate_jaccard > 0.0 && a.duplicate_jaccard <= 1.0) {
        bail!(
            "--duplicate-jaccard {}: must be above 0 and at most 1",
            a.duplicate_jaccard
        );
    }
    let queries = rmsweb::tasks::queries::read_queries(&a.queries).map_err(InputErrors)?;
    let schema = (!a.no_schema).then(rmsweb::tasks::seed_prompt::answer_schema);
    let client = a.llm.client(768, false, schema)?;
    let categories: Vec<String> = if a.categories.is_empty() {
        CATEGORIES.iter().map(|c| c.to_string()).collect()
    } else {
        a.categories
            .iter()
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let cfg = GenerateConfig {
        model: a.llm.model()?.to_string(),
        concurrency: usize::from(a.llm.concurrency),
        categories: categories.clone(),
        duplicate_jaccard: a.duplicate_jaccard,
    };
    let complete = |p: &str| super::llm_args::ask(&client, p, None);
    let r = generate(&a.dataset, &queries, &cfg, &complete)?;
    print_generated(&r, &categories, &a.dataset);
    if let Some(path) = &a.report {
        rmsweb::util::fs::write_atomic(path, &serde_json::to_vec_pretty(&r)?)?;
        println!("report: {}", path.display());
    }
    if !r.failed.is_empty() {
        bail!(
            "{} queries failed (their tasks can be generated by running again)",
            r.failed.len()
        );
    }
    Ok(())
}

/// The JSON report of `tasks overlap --report`.
#[derive(Serialize)]
struct Report<'a> {
    train: Side,
    benchmark: Side,
    config: &'a OverlapConfig,
    flagged_pairs: usize,
    flagged_train_tasks: usize,
    benchmark_tasks_hit: usize,
    candidates: usize,
    seconds: f64,
    flagged: Vec<PairRecord<'a>>,
    closest_unflagged: Vec<PairRecord<'a>>,
}

#[derive(Serialize)]
struct Side {
    path: String,
    tasks: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<String>,
}

#[derive(Serialize)]
struct PairRecord<'a> {
    train_task_id: &'a str,
    benchmark_task_id: &'a str,
    containment: f64,
    jaccard: f64,
    same_site: bool,
    shared_ngrams: &'a [String],
    train_instruction: &'a str,
    benchmark_instruction: &'a str,
}

fn record<'a>(p: &'a Pair, train: &'a [Task], bench: &'a [Task]) -> PairRecord<'a> {
    PairRecord {
        train_task_id: &train[p.train].task_id,
        benchmark_task_id: &bench[p.bench].task_id,
        containment: p.containment,
        jaccard: p.jaccard,
        same_site: p.same_site,
        shared_ngrams: &p.shared,
        train_instruction: &train[p.train].instruction,
        benchmark_instruction: &bench[p.bench].instruction,
    }
}

fn overlap(a: OverlapArgs) -> Result<()> {
    let cfg = match &a.config {
        Some(p) => OverlapConfig::load(p)?,
        None => OverlapConfig::default(),
    };
    if let Some(p) = &a.drop
        && p.exists()
    {
        bail!("--drop {}: the file exists; name a new one", p.display());
    }
    let train = Dataset::open(&a.train)?
        .tasks()
        .with_context(|| format!("reading the tasks of {}", a.train.display()))?;
    let bench: Vec<Task> = parse_task_file(&a.benchmark, a.format, Limits::default())
        .map_err(InputErrors)?
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let started = Instant::now();
    let found = find_overlaps(&train, &bench, &cfg);
    let seconds = started.elapsed().as_secs_f64();
    print_pairs(&found, &train, &bench, &cfg);
    let flagged_train = found.flagged_train();
    println!(
        "{} of {} training tasks overlap {} of {} benchmark tasks ({} pairs flagged, {} scored, {:.2} s; {}-grams, containment ≥ {}, Jaccard ≥ {}, same site ≥ {} / {})",
        flagged_train.len(),
        train.len(),
        found.benchmark_hit(),
        bench.len(),
        found.flagged.len(),
        found.candidates,
        seconds,
        cfg.ngram,
        cfg.containment,
        cfg.jaccard,
        cfg.same_site_containment,
        cfg.same_site_jaccard,
    );
    if let Some(path) = &a.report {
        let report = Report {
            train: side(&a.train, train.len(), None),
            benchmark: side(&a.benchmark, bench.len(), Some(a.format)),
            config: &cfg,
            flagged_pairs: found.flagged.len(),
            flagged_train_tasks: flagged_train.len(),
            benchmark_tasks_hit: found.benchmark_hit(),
            candidates: found.candidates,
            seconds,
            flagged: found
                .flagged
                .iter()
                .map(|p| record(p, &train, &bench))
                .collect(),
            closest_unflagged: found
                .closest
                .iter()
                .map(|p| record(p, &train, &bench))
                .collect(),
        };
        rmsweb::util::fs::write_atomic(path, &serde_json::to_vec_pretty(&report)?)?;
        println!("report: {}", path.display());
    }
    if let Some(path) = &a.drop {
        let kept = write_kept(path, &train, &flagged_train)?;
        println!(
            "kept {kept} training tasks ({} dropped) in {}",
            flagged_train.len(),
            path.display()
        );
        return Ok(());
    }
    if !flagged_train.is_empty() {
        bail!(
            "{} training tasks overlap the benchmark (pairs above; --drop FILE writes the rest)",
            flagged_train.len()
        );
    }
    Ok(())
}

/// `query ID (line N) task K: reason` (no task for a whole answer).
fn refusal(f: &rmsweb::tasks::generate::Refusal) -> String {
    let task = if f.task > 0 {
        format!(" task {}", f.task)
    } else {
        String::new()
    };
    format!(
        "query {} (line {}){task}: {}",
        clean_line(&f.query_id),
        f.line,
        clean_line(&f.reason)
    )
}

fn side(path: &Path, tasks: usize, format: Option<TaskFormat>) -> Side {
    Side {
        path: path.display().to_string(),
        tasks,
        format: format.map(|f| {
            clap::ValueEnum::to_possible_value(&f)
                .map_or_else(String::new, |v| v.get_name().to_string())
        }),
    }
}

fn print_pairs(found: &Overlap, train: &[Task], bench: &[Task], cfg: &OverlapConfig) {
    for p in &found.flagged {
        print_pair("overlap", p, train, bench, cfg);
    }
    if found.flagged.is_empty() && !found.closest.is_empty() {
        println!("closest pairs (under every threshold):");
        for p in &found.closest {
            print_pair("near", p, train, bench, cfg);
        }
    }
}

fn print_pair(label: &str, p: &Pair, train: &[Task], bench: &[Task], cfg: &OverlapConfig) {
    let (t, b) = (&train[p.train], &bench[p.bench]);
    println!(
        "{label}: {} ~ {}  containment {:.2}  Jaccard {:.2}{}",
        clean_line(&t.task_id),
        clean_line(&b.task_id),
        p.containment,
        p.jaccard,
        if p.same_site { "  same site" } else { "" }
    );
    println!("  train:     {}", clean_line(&t.instruction));
    println!("  benchmark: {}", clean_line(&b.instruction));
    if !p.shared.is_empty() {
        let quoted: Vec<String> = p
            .shared
            .iter()
            .map(|g| format!("\"{}\"", clean_line(g)))
            .collect();
        println!("  shared {}-grams: {}", cfg.ngram, quoted.join(", "));
    }
}

/// Writes the training tasks not in `dropped` (sorted indexes) as JSON Lines.
fn write_kept(path: &Path, train: &[Task], dropped: &[usize]) -> Result<usize> {
    let mut out = Vec::new();
    let mut kept = 0;
    for (i, t) in train.iter().enumerate() {
        if dropped.binary_search(&i).is_err() {
            serde_json::to_writer(&mut out, t)?;
            out.push(b'\n');
            kept += 1;
        }
    }
    rmsweb::util::fs::write_atomic(path, &out)?;
    Ok(kept)
}
