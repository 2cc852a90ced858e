//! `tasks generate`: anonymized search queries into executable web tasks through
//! an OpenAI-compatible LLM (the paper's seed-task step).
//!
//! Each query's readable answer is cached under the dataset by (query, model,
//! prompt version), so a re-run sends only the queries that failed. A drafted task without a website or an
//! objective is refused with the reason; a near-duplicate (same site, objective
//! words with Jaccard ≥ the threshold against a kept or present task) is dropped
//! and counted. Kept tasks are appended to `tasks.jsonl` in one write, with the
//! source query, the generator's model and the prompt version.

use super::generate_cache::AnswerCache;
use super::queries::Query;
use super::seed_prompt::{Draft, PROMPT_VERSION, parse_answer, prompt};
use crate::reward::normalize::{jaccard, tokens};
use crate::trajectory::import::tasks::site_name;
use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// A task written by `tasks generate`: a Task record (FORMATS.md) plus where it
/// came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedTask {
    pub task_id: String,
    pub website: String,
    pub domain: String,
    pub category: String,
    /// The objective and its constraints as one instruction for the agent.
    pub instruction: String,
    /// `seed-query:<query id>`.
    pub source: String,
    pub objective: String,
    pub constraints: Vec<String>,
    pub query_id: String,
    pub query: String,
    pub generator: Generator,
}

/// Which model and prompt wrote a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    pub model: String,
    pub prompt_version: String,
}

/// How to generate.
#[derive(Debug, Clone)]
pub struct GenerateConfig {
    pub model: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// The categories a task may take (others are recorded as none).
    pub categories: Vec<String>,
    /// Objective-word Jaccard at or above which two tasks on one site are duplicates.
    pub duplicate_jaccard: f64,
}

/// A drafted task or a query that produced none, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub query_id: String,
    /// The query's line in the query file.
    pub line: usize,
    /// 1-based position of the task in the answer (0: the whole answer).
    pub task: usize,
    pub reason: String,
}

/// What a generation did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenerateReport {
    pub queries: usize,
    /// Answers taken from the cache (no request sent).
    pub cached: usize,
    pub kept: Vec<GeneratedTask>,
    pub refused: Vec<Refusal>,
    /// Requests that failed after their retries, or answers with no JSON.
    pub failed: Vec<Refusal>,
    /// (dropped task id, the kept or present task it repeats).
    pub duplicates: Vec<(String, String)>,
    /// Tasks identical to ones already in the dataset.
    pub already_present: usize,
    /// Kept tasks per category (`(none)` for one outside the list).
    pub categories: BTreeMap<String, usize>,
}

/// A query's drafts and whether its answer came from the cache, or why it failed.
type Answer = Result<(Vec<Draft>, bool), String>;

/// Each query's drafts and whether its answer came from the cache, asked
/// `cfg.concurrency` at a time; an error (transport, or an answer without JSON) fails
/// that query. Only a readable answer is cached: one without JSON is asked again next
/// time (another model, a fixed server).
fn ask_all(
    dataset: &Path,
    queries: &[Query],
    cfg: &GenerateConfig,
    complete: &(dyn Fn(&str) -> Result<String> + Sync),
) -> Result<Vec<Answer>> {
    let cache = AnswerCache::new(dataset);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.concurrency.max(1))
        .build()
        .context("starting the request threads")?;
    Ok(pool.install(|| {
        queries
            .par_iter()
            .map(|q| {
                let (text, cached) = match cache.get(&q.text, &cfg.model, PROMPT_VERSION) {
                    Some(a) => (a, true),
                    None => (
                        complete(&prompt(&q.text, &cfg.categories))
                            .map_err(|e| format!("{e:#}"))?,
                        false,
                    ),
                };
                let drafts = parse_answer(&text)?;
                // Only a readable answer is kept: one without JSON is asked again
                // next time (another model, a fixed server).
                if !cached {
                    cache
                        .put(&q.text, &cfg.model, PROMPT_VERSION, &text)
                        .map_err(|e| format!("{e:#}"))?;
                }
                Ok((drafts, cached))
            })
            .collect()
    }))
}

/// Generates tasks for `queries` and appends the kept ones to the dataset (created
/// if missing). `complete` sends one prompt and returns the answer's text.
pub fn generate(
    dataset: &Path,
    queries: &[Query],
    cfg: &GenerateConfig,
    complete: &(dyn Fn(&str) -> Result<String> + Sync),
) -> Result<GenerateReport> {
    let answers = ask_all(dataset, queries, cfg, complete)?;
    let mut seen = Seen::of_dataset(dataset)?;
    let mut report = GenerateReport {
        queries: queries.len(),
        ..GenerateReport::default()
    };
    for (q, answer) in queries.iter().zip(answers) {
        let refuse = |task: usize, reason: String| Refusal {
            query_id: q.id.clone(),
            line: q.line,
            task,
            reason,
        };
        let drafts = match answer {
            Ok((drafts, cached)) => {
                report.cached += usize::from(cached);
                drafts
            }
            Err(e) => {
                report.failed.push(refuse(0, e));
                continue;
            }
        };
        for (k, d) in drafts.into_iter().enumerate() {
            let task = match check(q, k + 1, d, cfg) {
                Ok(t) => t,
                Err(reason) => {
                    report.refused.push(refuse(k + 1, reason));
                    continue;
                }
            };
            match seen.admit(&task, cfg.duplicate_jaccard) {
                Admit::New => {
                    let cat = if task.category.is_empty() { "(none)" } else { &task.category };
                    *report.categories.entry(cat.to_string()).or_default() += 1;
                    report.kept.push(task);
                }
                Admit::Present => report.already_present += 1,
                Admit::Duplicate(of) => report.duplicates.push((task.task_id, of)),
                Admit::IdTaken => report.refused.push(refuse(
                    k + 1,
                    format!(
                        "task id {} is already in the dataset with other content (another model or prompt version?)",
                        task.task_id
                    ),
                )),
            }
        }
    }
    write(dataset, &report.kept)?;
    Ok(report)
}

/// Longest objective or constraint kept (characters).
const MAX_OBJECTIVE_CHARS: usize = 300;
/// Fewest words of an objective (`...`, `Mine` are not objectives).
const MIN_OBJECTIVE_WORDS: usize = 3;
/// Most distinct constraints a task may have.
const MAX_CONSTRAINTS: usize = 8;

/// A draft as a task, or why it is refused.
fn check(q: &Query, k: usize, d: Draft, cfg: &GenerateConfig) -> Result<GeneratedTask, String> {
    if d.website.is_empty() {
        return Err("no website".into());
    }
    let domain = site_name(&d.website);
    if domain.is_empty() || !(d.website.contains('.') || d.website.contains("://")) {
        return Err(format!("website {:?} is not a site", d.website));
    }
    if d.objective.is_empty() {
        return Err("no objective".into());
    }
    let chars = d.objective.chars().count();
    if chars > MAX_OBJECTIVE_CHARS {
        return Err(format!(
            "objective of {chars} characters (at most {MAX_OBJECTIVE_CHARS}: runaway output?)"
        ));
    }
    let words = d
        .objective
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count();
    if words < MIN_OBJECTIVE_WORDS {
        return Err(format!(
            "objective {:?} has {words} words (at least {MIN_OBJECTIVE_WORDS})",
            d.objective
        ));
    }
    // Placeholders ("...") and repeats are not constraints.
    let mut constraints: Vec<String> = Vec::new();
    for c in d.constraints {
        if c.chars().any(char::is_alphanumeric) && !constraints.contains(&c) {
            constraints.push(c);
        }
    }
    if constraints.len() > MAX_CONSTRAINTS {
        return Err(format!(
            "{} distinct constraints (at most {MAX_CONSTRAINTS}: runaway output?)",
            constraints.len()
        ));
    }
    if let Some(c) = constraints
        .iter()
        .find(|c| c.chars().count() > MAX_OBJECTIVE_CHARS)
    {
        return Err(format!(
            "a constraint of {} characters (at most {MAX_OBJECTIVE_CHARS})",
            c.chars().count()
        ));
    }
    let mut instruction = d.objective.clone();
    if !constraints.is_empty() {
        instruction.push_str(&format!(" Constraints: {}.", constraints.join("; ")));
    }
    let category = if cfg.categories.contains(&d.category) {
        d.category
    } else {
        String::new()
    };
    Ok(GeneratedTask {
        task_id: format!("seed-{}-{k}", q.id),
        website: d.website,
        domain,
        category,
        instruction,
        source: format!("seed-query:{}", q.id),
        objective: d.objective,
        constraints,
        query_id: q.id.clone(),
        query: q.text.clone(),
        generator: Generator {
            model: cfg.model.clone(),
            prompt_version: PROMPT_VERSION.into(),
        },
    })
}

enum Admit {
    New,
    Present,
    Duplicate(String),
    IdTaken,
}

/// Tasks present or kept so far: by id (their record) and by site (objective words).
struct Seen {
    by_id: HashMap<String, Value>,
    by_site: HashMap<String, Vec<(Vec<String>, String)>>,
}

impl Seen {
    fn of_dataset(dataset: &Path) -> Result<Seen> {
        let mut seen = Seen {
            by_id: HashMap::new(),
            by_site: HashMap::new(),
        };
        if dataset.join("tasks.jsonl").exists() {
            let ds = crate::trajectory::Dataset::open(dataset)?;
            let records: Vec<Value> = ds.tasks_file().all()?;
            for r in records {
                let text = |k: &str| {
                    r.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let id = text("task_id");
                let objective = r
                    .get("objective")
                    .and_then(Value::as_str)
                    .map_or_else(|| text("instruction"), str::to_owned);
                seen.by_site
                    .entry(site_name(&text("website")))
                    .or_default()
                    .push((tokens(&objective), id.clone()));
                seen.by_id.insert(id, r);
            }
        }
        Ok(seen)
    }

    fn admit(&mut self, t: &GeneratedTask, dup: f64) -> Admit {
        if let Some(r) = self.by_id.get(&t.task_id) {
            let same = serde_json::to_value(t).is_ok_and(|v| v == *r);
            return if same { Admit::Present } else { Admit::IdTaken };
        }
        let words = tokens(&t.objective);
        let site = self.by_site.entry(t.domain.clone()).or_default();
        if let Some((_, of)) = site.iter().find(|(w, _)| jaccard(w, &words) >= dup) {
            return Admit::Duplicate(of.clone());
        }
        site.push((words, t.task_id.clone()));
        self.by_id.insert(
            t.task_id.clone(),
            serde_json::to_value(t).unwrap_or(Value::Null),
        );
        Admit::New
    }
}

fn write(dataset: &Path, kept: &[GeneratedTask]) -> Result<()> {
    if !dataset.join("dataset.toml").exists() {
        let name = dataset
            .file_name()
            .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
        crate::trajectory::Dataset::create(dataset, &name, "created by rmsweb tasks generate")?;
    }
    crate::trajectory::jsonl::append(&dataset.join("tasks.jsonl"), kept)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> GenerateConfig {
        GenerateConfig {
            model: "m".into(),
            concurrency: 1,
            categories: vec!["shopping".into()],
            duplicate_jaccard: 0.9,
        }
    }

    fn draft(objective: &str, constraints: &[&str]) -> Draft {
        Draft {
            website: "https://shoes.example.test".into(),
            objective: objective.into(),
            constraints: constraints.iter().map(|c| c.to_string()).collect(),
            category: "shopping".into(),
        }
    }

    #[test]
    fn placeholders_and_repeats_are_dropped_and_runaway_drafts_refused() {
        let q = Query {
            id: "q".into(),
            text: "running shoes".into(),
            line: 1,
        };
        let t = check(
            &q,
            1,
            draft("Find running shoes", &["...", "size 10", "size 10"]),
            &cfg(),
        )
        .unwrap();
        assert_eq!(t.constraints, vec!["size 10"]);
        assert_eq!(t.instruction, "Find running shoes Constraints: size 10.");
        assert_eq!(
            (t.domain.as_str(), t.category.as_str()),
            ("example", "shopping")
        );

        let many: Vec<String> = (0..9).map(|i| format!("python {i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = check(&q, 1, draft("Find a job", &many), &cfg()).unwrap_err();
        assert!(e.starts_with("9 distinct constraints"), "{e}");
        let e = check(&q, 1, draft(&"tacos-".repeat(60), &[]), &cfg()).unwrap_err();
        assert!(e.starts_with("objective of 360 characters"), "{e}");
        let mut no_site = draft("Find shoes", &[]);
        no_site.website = "shoes".into();
        assert!(
            check(&q, 1, no_site, &cfg())
                .unwrap_err()
                .contains("is not a site")
        );
    }
}
