//! `rmsweb reward`: score candidate actions with the polarized action-semantic rubric.

use anyhow::{Context, bail};
use clap::Subcommand;
use rmsweb::action::Action;
use rmsweb::action::parse::parse_response;
use rmsweb::reward::batch::{StepRef, parse_targets, run_batch};
use rmsweb::reward::{Decision, RewardConfig, score_against};
use rmsweb::trajectory::Element;
use rmsweb::util::sanitize::clean_line;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Arguments of `rmsweb reward`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score one model response against a target action and explain the decision.
    Score(ScoreArgs),
    /// Score a JSON Lines file of cases, one decision per line.
    ///
    /// Input lines: `{"target": Action or [Action], "candidate": "text", "elements":
    /// [Element]?}`. Output lines, in order: `{"line", "score", "level", "rule",
    /// "reason"}` or `{"line", "error"}`. Blank lines are skipped. Exits non-zero if
    /// any line failed (the others are still scored).
    Batch(BatchArgs),
    /// Put a ground-truth action in place of each response's own action (Salvage-DS's
    /// splice), keeping the response's reasoning and format.
    ///
    /// Input lines: `{"response": "text", "action": Action or [Action]}`. Output lines,
    /// in order: `{"line", "text", "action_span": [start, end] (bytes of text),
    /// "action_text"}` or `{"line", "error"}`. Exits non-zero if any line failed.
    Splice(SpliceArgs),
}

#[derive(clap::Args)]
struct SpliceArgs {
    /// Cases file (JSON Lines); `-` reads stdin.
    cases: PathBuf,
}

#[derive(clap::Args)]
struct ScoreArgs {
    /// Target action as JSON: `{"name": "click", "params": {"index": 12}}`, or a list
    /// of them for a multi-action step; or in any form --candidate takes (`click(12)`,
    /// Browser Use JSON). Default with --state: that step's actions.
    #[arg(long)]
    target: Option<String>,
    /// The model response to score (Browser Use JSON, fenced, or `click(12)`);
    /// `-` reads it from stdin.
    #[arg(long)]
    candidate: String,
    /// Take the elements (and, without --target, the target) from a dataset step:
    /// `DATASET:TRAJECTORY_ID:STEP`.
    #[arg(long, value_name = "D:TRAJ:STEP")]
    state: Option<StepRef>,
    /// Rubric thresholds (TOML); default: the documented defaults.
    #[arg(long, value_name = "reward.toml")]
    config: Option<PathBuf>,
    /// Print one JSON object `{score, level, rule, reason}`.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct BatchArgs {
    /// Cases file (JSON Lines); `-` reads stdin.
    cases: PathBuf,
    /// Rubric thresholds (TOML).
    #[arg(long, value_name = "reward.toml")]
    config: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Score(a) => score(a),
        Command::Batch(a) => batch(a),
        Command::Splice(a) => splice(a),
    }
}

/// A cases file, or stdin for `-`.
fn open_cases(path: &Path) -> anyhow::Result<Box<dyn BufRead>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(f)))
}

fn splice(a: SpliceArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let input = open_cases(&a.cases)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.with_context(|| format!("{}:{n}: reading", a.cases.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec = match splice_line(&line) {
            Ok(s) => serde_json::json!({"line": n, "text": s.text,
                "action_span": [s.action_span.start, s.action_span.end],
                "action_text": &s.text[s.action_span.clone()]}),
            Err(e) => {
                failed.push(n);
                serde_json::json!({"line": n, "error": e})
            }
        };
        writeln!(out, "{rec}")?;
    }
    out.flush()?;
    if !failed.is_empty() {
        bail!(
            "{}: {} lines failed (first: line {})",
            a.cases.display(),
            failed.len(),
            failed[0]
        );
    }
    Ok(())
}

fn splice_line(line: &str) -> Result<rmsweb::action::render::Spliced, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let response = v
        .get("response")
        .ok_or("missing field `response`")?
        .as_str()
        .ok_or("field `response`: expected a string")?;
    let action = v.get("action").cloned().ok_or("missing field `action`")?;
    let targets = parse_targets(action, "action")?;
    Ok(rmsweb::action::render::splice_actions(response, &targets))
}

fn config(path: Option<&Path>) -> anyhow::Result<RewardConfig> {
    path.map_or_else(|| Ok(RewardConfig::default()), RewardConfig::load)
}

fn score(a: ScoreArgs) -> anyhow::Result<()> {
    let cfg = config(a.config.as_deref())?;
    let candidate = if a.candidate == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the candidate from stdin")?;
        s
    } else {
        a.candidate
    };
    let step = a.state.as_ref().map(StepRef::load).transpose()?;
    let targets: Vec<Action> = match (&a.target, &step) {
        (Some(t), _) => target_actions(t)?,
        (None, Some(s)) if !s.output.actions.is_empty() => s.output.actions.clone(),
        (None, Some(_)) => bail!("the --state step has no action; give --target"),
        (None, None) => {
            bail!("give --target JSON, or --state D:TRAJ:STEP to use that step's action")
        }
    };
    let elements: &[Element] = step.as_ref().map_or(&[], |s| &s.state.elements);
    let decision = score_against(&candidate, &targets, elements, &cfg);
    if a.json {
        println!("{}", serde_json::to_string(&decision)?);
    } else {
        print_decision(&decision, &candidate, &targets, elements.len());
    }
    Ok(())
}

fn shorts(actions: &[Action]) -> String {
    let v: Vec<String> = actions.iter().map(Action::short).collect();
    clean_line(&v.join("; ")).into_owned()
}

/// `--target`: actions as JSON (`{"name": .., "params": ..}` or a list), else the
/// forms a candidate takes (`click(12)`, Browser Use JSON).
fn target_actions(text: &str) -> anyhow::Result<Vec<Action>> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text)
        && let Ok(actions) = parse_targets(v, "--target")
    {
        return Ok(actions);
    }
    match parse_response(text) {
        Ok(p) if !p.actions.is_empty() => Ok(p.actions),
        Ok(_) => bail!("--target holds no action"),
        Err(e) => bail!(
            "--target is neither JSON actions nor an action like `click(3)`: {}",
            rmsweb::util::sanitize::clean_line(&e.message)
        ),
    }
}

fn print_decision(d: &Decision, candidate: &str, targets: &[Action], elements: usize) {
    println!("score  {:.1} ({})", d.score, d.level.name());
    println!("rule   {}", clean_line(&d.rule));
    println!("reason {}", clean_line(&d.reason));
    match parse_response(candidate) {
        Ok(p) => println!("candidate {}", shorts(&p.actions)),
        Err(e) => print_error_context(candidate, e.offset),
    }
    println!("target    {}", shorts(targets));
    if elements == 0 {
        println!("(no element list: element checks skipped)");
    } else {
        println!("({elements} elements in the state)");
    }
}

/// The unparsed candidate around the error's byte, with a caret under it.
fn print_error_context(candidate: &str, offset: Option<usize>) {
    const SIDE: usize = 40;
    let at = offset.unwrap_or(0).min(candidate.len());
    let mut from = at.saturating_sub(SIDE);
    while !candidate.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (at + SIDE).min(candidate.len());
    while !candidate.is_char_boundary(to) {
        to += 1;
    }
    let before = clean_line(&candidate[from..at]).into_owned();
    let after = clean_line(&candidate[at..to]).into_owned();
    let lead = if from > 0 { "…" } else { "" };
    let tail = if to < candidate.len() { "…" } else { "" };
    println!("candidate (unparsed) {lead}{before}{after}{tail}");
    if offset.is_some() {
        let pad =
            "candidate (unparsed) ".chars().count() + lead.chars().count() + before.chars().count();
        println!("{}^ byte {at}", " ".repeat(pad));
    }
}

fn batch(a: BatchArgs) -> anyhow::Result<()> {
    let cfg = config(a.config.as_deref())?;
    let input = open_cases(&a.cases)?;
    let stdout = std::io::stdout().lock();
    let summary = run_batch(input, std::io::BufWriter::new(stdout), &cfg)?;
    let name = if a.cases.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        a.cases.display().to_string()
    };
    if summary.failed.is_empty() {
        eprintln!("{name}: {} lines scored", summary.scored);
        Ok(())
    } else {
        let shown: Vec<String> = summary
            .failed
            .iter()
            .take(20)
            .map(usize::to_string)
            .collect();
        let more = if summary.failed.len() > 20 {
            ", ..."
        } else {
            ""
        };
        bail!(
            "{name}: {} lines scored, {} failed (line {}{more})",
            summary.scored,
            summary.failed.len(),
            shown.join(", ")
        )
    }
}
