//! Public task lists into `tasks.jsonl`: WebVoyager (JSON Lines of
//! `{web_name, id, ques, web}`), Online-Mind2Web (a JSON array or JSON Lines of
//! `{task_id, confirmed_task, website, reference_length, level}`), WebArena (the JSON
//! array of `{task_id, sites, start_url | start_urls, intent, ...}` that ships in the
//! `webarena-verified` wheel as `assets/dataset/test.raw.json` and
//! `webarena-verified.json`) and rmsweb's own Task records (another dataset's
//! `tasks.jsonl`).
//!
//! The public formats have no category; it is filled from a small table of well-known
//! sites (empty for the rest). Online-Mind2Web's `level` and `reference_length`, and
//! WebArena's evaluation specs, have no Task field and are not kept.

use super::commit::Journal;
use super::{ImportError, ImportErrors, read_input};

/// Size limits of a task-list import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Files over this many bytes are refused before they are read.
    pub file_bytes: u64,
    /// Lines (JSON Lines records) over this many bytes are refused.
    pub line_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            file_bytes: super::MAX_FILE_BYTES,
            line_bytes: MAX_RECORD_BYTES,
        }
    }
}
use crate::trajectory::jsonl::MAX_RECORD_BYTES;
use crate::trajectory::{Dataset, Task};
use anyhow::Result;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::path::Path;

/// The task-list formats `rmsweb import tasks` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskFormat {
    /// WebVoyager JSON Lines: `web_name, id, ques, web`.
    Webvoyager,
    /// Online-Mind2Web JSON array or JSON Lines: `task_id, confirmed_task, website, ...`.
    OnlineMind2web,
    /// WebArena JSON array (`test.raw.json`, `webarena-verified.json`): `task_id,
    /// sites, start_url | start_urls, intent, ...`.
    Webarena,
    /// rmsweb Task records, one a line (a dataset's `tasks.jsonl`).
    Jsonl,
}

/// A WebArena task id: a number in the published files, a string accepted too.
#[derive(Deserialize)]
#[serde(untagged)]
enum WebArenaId {
    Number(u64),
    Text(String),
}

#[derive(Deserialize)]
struct WebArenaTask {
    task_id: WebArenaId,
    intent: String,
    #[serde(default)]
    sites: Vec<String>,
    #[serde(default)]
    start_url: Option<String>,
    #[serde(default)]
    start_urls: Vec<String>,
}

impl WebArenaTask {
    fn into_task(self) -> Task {
        let id = match self.task_id {
            WebArenaId::Number(n) => n.to_string(),
            WebArenaId::Text(s) => s,
        };
        let website = self
            .start_url
            .or_else(|| self.start_urls.into_iter().next())
            .unwrap_or_default();
        let site = self.sites.first().map(|s| slug(s)).unwrap_or_default();
        Task {
            task_id: format!("webarena-{id}"),
            category: category_of(&site).to_string(),
            domain: self
                .sites
                .iter()
                .map(|s| slug(s))
                .collect::<Vec<_>>()
                .join("+"),
            website,
            instruction: self.intent,
            source: format!("webarena:{id}"),
        }
    }
}

#[derive(Deserialize)]
struct WebVoyagerTask {
    web_name: String,
    id: String,
    ques: String,
    web: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Mind2WebTask {
    task_id: String,
    confirmed_task: String,
    website: String,
    #[serde(default)]
    reference_length: Option<u32>,
    #[serde(default)]
    level: Option<String>,
}

/// What `import_tasks` did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskImportReport {
    pub added: Vec<Task>,
    /// Tasks identical to ones already in the dataset (not repeated).
    pub already_present: usize,
}

/// Reads a task list into Task records, each with the line it came from. Errors
/// name the line (or, in a JSON array, the line the element starts on) and field;
/// duplicate ids are refused with both line numbers.
pub fn parse_task_file(
    path: &Path,
    format: TaskFormat,
    limits: Limits,
) -> Result<Vec<(usize, Task)>, Vec<ImportError>> {
    let bytes = read_input(path, limits.file_bytes).map_err(|e| vec![e])?;
    let records = split_records(&bytes, path, limits.line_bytes).map_err(|e| vec![e])?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (line, raw) in records {
        let task = match format {
            TaskFormat::Webvoyager => parse_one::<WebVoyagerTask>(raw, path, line).map(|t| Task {
                category: category_of(&t.web_name).to_string(),
                domain: slug(&t.web_name),
                source: format!("webvoyager:{}", t.id),
                task_id: t.id,
                website: t.web,
                instruction: t.ques,
            }),
            TaskFormat::OnlineMind2web => parse_one::<Mind2WebTask>(raw, path, line).map(|t| {
                let domain = site_name(&t.website);
                Task {
                    category: category_of(&domain).to_string(),
                    domain,
                    source: format!("online-mind2web:{}", t.task_id),
                    task_id: t.task_id,
                    website: t.website,
                    instruction: t.confirmed_task,
                }
            }),
            TaskFormat::Webarena => {
                parse_one::<WebArenaTask>(raw, path, line).map(WebArenaTask::into_task)
            }
            TaskFormat::Jsonl => parse_one::<Task>(raw, path, line),
        };
        match task {
            Ok(t) => {
                if let Some(first) = first_line.get(&t.task_id) {
                    errors.push(ImportError {
                        file: path.to_path_buf(),
                        location: format!("line {line}"),
                        field: id_field(format).into(),
                        message: format!(
                            "duplicate task id `{}` (first on line {first})",
                            t.task_id
                        ),
                    });
                    continue;
                }
                first_line.insert(t.task_id.clone(), line);
                out.push((line, t));
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn id_field(format: TaskFormat) -> &'static str {
    match format {
        TaskFormat::Webvoyager => "id",
        TaskFormat::OnlineMind2web | TaskFormat::Webarena | TaskFormat::Jsonl => "task_id",
    }
}

fn parse_one<T: DeserializeOwned>(raw: &[u8], path: &Path, line: usize) -> Result<T, ImportError> {
    crate::trajectory::jsonl::parse_record(raw, path, line).map_err(|e| ImportError {
        file: path.to_path_buf(),
        location: format!("line {line}"),
        field: e.field,
        message: e.message,
    })
}

/// Splits a JSON array or JSON Lines file into records with their 1-based line.
fn split_records<'a>(
    bytes: &'a [u8],
    path: &Path,
    max_line: usize,
) -> Result<Vec<(usize, &'a [u8])>, ImportError> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    let line_of = |off: usize| 1 + memchr::memchr_iter(b'\n', &bytes[..off]).count();
    match start {
        None => Ok(Vec::new()),
        Some(s) if bytes[s] == b'[' => split_array(bytes, s + 1, path, &line_of),
        Some(_) => {
            let mut out = Vec::new();
            for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if line.len() > max_line {
                    return Err(ImportError {
                        file: path.to_path_buf(),
                        location: format!("line {}", i + 1),
                        field: "(record)".into(),
                        message: format!(
                            "line is {} bytes, over the {max_line}-byte limit",
                            line.len()
                        ),
                    });
                }
                out.push((i + 1, line));
            }
            Ok(out)
        }
    }
}

/// Walks the elements of a JSON array, noting the line each starts on.
fn split_array<'a>(
    bytes: &'a [u8],
    mut pos: usize,
    path: &Path,
    line_of: &dyn Fn(usize) -> usize,
) -> Result<Vec<(usize, &'a [u8])>, ImportError> {
    let err = |off: usize, message: String| ImportError {
        file: path.to_path_buf(),
        location: format!("line {}", line_of(off.min(bytes.len()))),
        field: "(json)".into(),
        message,
    };
    let skip_ws = |mut p: usize| {
        while p < bytes.len() && bytes[p].is_ascii_whitespace() {
            p += 1;
        }
        p
    };
    let mut out = Vec::new();
    pos = skip_ws(pos);
    if bytes.get(pos) == Some(&b']') {
        return Ok(out);
    }
    loop {
        pos = skip_ws(pos);
        let mut stream = serde_json::Deserializer::from_slice(&bytes[pos..])
            .into_iter::<serde::de::IgnoredAny>();
        match stream.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(err(pos, format!("malformed JSON: {e}"))),
            None => return Err(err(pos, "the array is not closed".into())),
        }
        let end = pos + stream.byte_offset();
        out.push((line_of(pos), &bytes[pos..end]));
        pos = skip_ws(end);
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b']') => {
                if bytes[pos + 1..].iter().any(|b| !b.is_ascii_whitespace()) {
                    return Err(err(pos + 1, "unexpected text after the array".into()));
                }
                return Ok(out);
            }
            _ => {
                return Err(err(
                    pos,
                    "expected `,` or `]` after an array element".into(),
                ));
            }
        }
    }
}

/// Imports a task list into the dataset (created if missing), all or nothing.
/// Tasks identical to ones present are skipped; an id present with different
/// content is refused.
pub fn import_tasks(
    dataset: &Path,
    file: &Path,
    format: TaskFormat,
    limits: Limits,
) -> Result<TaskImportReport> {
    let parsed = parse_task_file(file, format, limits).map_err(ImportErrors)?;
    let mut journal = Journal::default();
    journal.create_dir_all(dataset)?;
    let lock = super::commit::lock_dataset(dataset);
    let result = lock.and_then(|_lock| add_tasks(dataset, file, format, parsed, &mut journal));
    if result.is_err() {
        journal.undo();
    }
    result
}

fn add_tasks(
    dataset: &Path,
    file: &Path,
    format: TaskFormat,
    parsed: Vec<(usize, Task)>,
    journal: &mut Journal,
) -> Result<TaskImportReport> {
    let mut present: HashMap<String, (usize, Task)> = HashMap::new();
    if dataset.join("tasks.jsonl").exists() {
        let ds = Dataset::open(dataset)?;
        let f = ds.tasks_file();
        for i in 0..f.len() {
            let t: Task = f.get(i)?;
            let line = f.span(i).map_or(0, |s| s.line as usize);
            present.insert(t.task_id.clone(), (line, t));
        }
    }
    let mut report = TaskImportReport::default();
    let mut errors = Vec::new();
    for (line, t) in parsed {
        match present.get(&t.task_id) {
            Some((_, old)) if *old == t => report.already_present += 1,
            Some((old_line, _)) => errors.push(ImportError {
                file: file.to_path_buf(),
                location: format!("line {line}"),
                field: id_field(format).into(),
                message: format!(
                    "task id `{}` is already in the dataset with different content (tasks.jsonl line {old_line})",
                    t.task_id
                ),
            }),
            None => report.added.push(t),
        }
    }
    if !errors.is_empty() {
        return Err(ImportErrors(errors).into());
    }
    journal.will_create(&dataset.join("dataset.toml"));
    let name = dataset
        .file_name()
        .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
    Dataset::create(dataset, &name, "created by rmsweb import tasks")?;
    journal.append(&dataset.join("tasks.jsonl"), &report.added)?;
    Ok(report)
}

/// A short site name from a URL or site label: `https://www.allrecipes.com/x` →
/// `allrecipes`; `Google Flights` → `google-flights`.
pub fn site_name(website: &str) -> String {
    let w = website.trim();
    if w.is_empty() {
        return String::new();
    }
    let host = url::Url::parse(w)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .or_else(|| {
            // `example.com/path` without a scheme.
            let first = w.split('/').next().unwrap_or(w);
            first.contains('.').then(|| first.to_string())
        });
    match host {
        Some(h) => {
            let labels: Vec<&str> = h
                .split('.')
                .filter(|l| !l.is_empty() && *l != "www")
                .collect();
            let name = match labels.len() {
                0 => h.as_str(),
                1 => labels[0],
                n => {
                    // `bbc.co.uk` → `bbc`; `maps.google.com` → `google`.
                    let second = labels[n - 2];
                    if n >= 3 && matches!(second, "co" | "com" | "org" | "ac" | "gov" | "net") {
                        labels[n - 3]
                    } else {
                        second
                    }
                }
            };
            slug(name)
        }
        None => slug(w),
    }
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The category of well-known benchmark sites (by WebVoyager name or site name).
pub fn category_of(site: &str) -> &'static str {
    match slug(site).as_str() {
        "allrecipes" => "food",
        "amazon" | "apple" | "ebay" | "walmart" | "target" | "ikea" | "bestbuy" => "shopping",
        "arxiv" | "huggingface" | "github" | "wolfram-alpha" | "wolframalpha" => "research",
        "bbc-news" | "bbc" | "cnn" | "nytimes" | "reuters" => "news",
        "booking" | "google-flights" | "expedia" | "kayak" | "tripadvisor" | "airbnb"
        | "united" | "delta" => "travel",
        "cambridge-dictionary" | "cambridge" | "wikipedia" => "reference",
        "coursera" | "khanacademy" => "education",
        "espn" | "nba" | "nfl" => "sports",
        "google-map" | "google-maps" => "maps",
        "google-search" | "google" | "bing" => "search",
        // WebArena's self-hosted sites.
        "shopping" => "shopping",
        "shopping-admin" => "business",
        "gitlab" => "development",
        "reddit" => "social",
        "map" => "maps",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_names() {
        assert_eq!(
            site_name("https://www.allrecipes.com/recipes"),
            "allrecipes"
        );
        assert_eq!(site_name("https://www.bbc.co.uk/news"), "bbc");
        assert_eq!(site_name("Google Flights"), "google-flights");
        assert_eq!(site_name("localhost"), "localhost");
        assert_eq!(site_name(""), "");
    }

    #[test]
    fn array_elements_get_their_lines() {
        let bytes = b"[\n {\"a\": 1},\n {\"a\": [2,\n 3]}\n]\n";
        let recs = split_records(bytes, Path::new("x.json"), 1 << 20).unwrap();
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2, 3]);
        assert!(split_records(b"[{\"a\":1} {\"a\":2}]", Path::new("x"), 99).is_err());
        assert!(split_records(b"[{\"a\":1},", Path::new("x"), 99).is_err());
        assert!(split_records(b"[]", Path::new("x"), 99).unwrap().is_empty());
    }
}
