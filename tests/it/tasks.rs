//! `rmsweb import tasks --format webarena|jsonl` and `rmsweb tasks overlap`: a
//! training task that copies a benchmark task is caught with its evidence, the rest
//! pass, and --drop writes the clean set.

use rmsweb::trajectory::Dataset;
use rmsweb::trajectory::import::tasks::{Limits, TaskFormat, import_tasks};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tasks")
        .join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn imports_webarena_tasks_in_both_published_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("wa");
    let r = import_tasks(
        &ds,
        &data("webarena_sample.json"),
        TaskFormat::Webarena,
        Limits::default(),
    )
    .unwrap();
    assert_eq!(r.added.len(), 4);
    let tasks = Dataset::open(&ds).unwrap().tasks().unwrap();
    assert_eq!(tasks[0].task_id, "webarena-0");
    assert_eq!(tasks[0].source, "webarena:0");
    assert_eq!(tasks[0].website, "__SHOPPING_ADMIN__");
    assert_eq!(tasks[0].domain, "shopping-admin");
    assert_eq!(tasks[0].category, "business");
    assert_eq!(
        tasks[0].instruction,
        "Which product sold the most units in 2021"
    );
    // start_urls (webarena-verified.json) and several sites.
    assert_eq!(tasks[2].website, "__MAP__");
    assert_eq!(tasks[2].domain, "map+wikipedia");
    assert_eq!(tasks[2].category, "maps");
    // A text id.
    assert_eq!(tasks[3].task_id, "webarena-r-7");

    // A dataset's tasks.jsonl imports into another as rmsweb records, unchanged.
    let copy = dir.path().join("copy");
    let r = import_tasks(
        &copy,
        &ds.join("tasks.jsonl"),
        TaskFormat::Jsonl,
        Limits::default(),
    )
    .unwrap();
    assert_eq!(r.added, tasks);
}

#[test]
fn a_webarena_task_without_an_intent_is_refused_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("wa");
    let bad = data("webarena_bad.json");
    let o = rmsweb(&[
        "import",
        "tasks",
        "--format",
        "webarena",
        bad.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("webarena_bad.json") && err.contains("line 3") && err.contains("intent"),
        "{err}"
    );
    assert!(!ds.join("tasks.jsonl").exists(), "nothing imported");
}

const TRAIN: &str = concat!(
    r#"{"task_id":"leak","website":"__SHOPPING_ADMIN__","instruction":"Please find out which product sold the most units in 2021 \u001b[2J now","source":"seed-query"}"#,
    "\n",
    r#"{"task_id":"login","website":"miniwob","instruction":"Enter the username \"bob\" and press login.","source":"miniwob:login-user"}"#,
    "\n",
    r#"{"task_id":"mug","website":"https://shop.example.test","instruction":"Buy a blue mug from the shop","source":"seed-query"}"#,
    "\n",
    r#"{"task_id":"near","website":"https://maps.example.test","instruction":"Walk from the station to the museum and tell me how long it takes","source":"seed-query"}"#,
    "\n",
);

fn train_dataset(dir: &Path) -> PathBuf {
    let file = dir.join("train.jsonl");
    std::fs::write(&file, TRAIN).unwrap();
    let ds = dir.join("train");
    let o = rmsweb(&[
        "import",
        "tasks",
        "--format",
        "jsonl",
        file.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    ds
}

fn overlap(train: &Path, extra: &[&str]) -> Output {
    let bench = data("webarena_sample.json");
    let mut args = vec![
        "tasks",
        "overlap",
        "--train",
        train.to_str().unwrap(),
        "--benchmark",
        bench.to_str().unwrap(),
        "--format",
        "webarena",
    ];
    args.extend_from_slice(extra);
    rmsweb(&args)
}

#[test]
fn a_copied_benchmark_task_is_flagged_with_its_evidence_and_drop_writes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ds = train_dataset(dir.path());
    let report = dir.path().join("overlap.json");
    let o = overlap(&ds, &["--report", report.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(!o.status.success(), "a leak must fail the check\n{out}");
    assert!(
        text(&o.stderr).contains("1 training tasks overlap"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        out.contains("overlap: leak ~ webarena-0  containment 1.00"),
        "{out}"
    );
    assert!(out.contains("\"which product sold the"), "{out}");
    assert!(
        out.contains("1 of 4 training tasks overlap 1 of 4 benchmark tasks"),
        "{out}"
    );
    assert!(
        !out.contains('\u{1b}'),
        "control characters from data reach the terminal"
    );

    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["flagged_pairs"], 1);
    assert_eq!(r["flagged"][0]["train_task_id"], "leak");
    assert_eq!(r["flagged"][0]["benchmark_task_id"], "webarena-0");
    assert_eq!(r["flagged"][0]["same_site"], true);
    assert_eq!(r["benchmark"]["format"], "webarena");
    assert_eq!(r["config"]["ngram"], 4);
    // The walk shares 9 of 17 words with WebArena's task 2: under 0.7.
    let near = r["closest_unflagged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["train_task_id"] == "near")
        .expect("the nearest unflagged pair is reported");
    let j = near["jaccard"].as_f64().unwrap();
    assert!((j - 9.0 / 17.0).abs() < 1e-9, "{j}");

    // --drop writes the other three and succeeds; the kept set is clean.
    let kept = dir.path().join("kept.jsonl");
    let o = overlap(&ds, &["--drop", kept.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("kept 3 training tasks (1 dropped)"));
    let ids: Vec<String> = std::fs::read_to_string(&kept)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["task_id"].to_string())
        .collect();
    assert_eq!(ids, ["\"login\"", "\"mug\"", "\"near\""]);
    let o = overlap(&ds, &["--drop", kept.to_str().unwrap()]);
    assert!(
        !o.status.success(),
        "an existing --drop file is never overwritten"
    );
    assert!(
        text(&o.stderr).contains("kept.jsonl"),
        "{}",
        text(&o.stderr)
    );

    let clean = dir.path().join("clean");
    let o = rmsweb(&[
        "import",
        "tasks",
        "--format",
        "jsonl",
        kept.to_str().unwrap(),
        "--dataset",
        clean.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = overlap(&clean, &[]);
    assert!(o.status.success(), "{}", text(&o.stdout));
    let out = text(&o.stdout);
    assert!(out.contains("0 of 3 training tasks overlap"), "{out}");
    assert!(
        out.contains("closest pairs (under every threshold):"),
        "{out}"
    );
}

#[test]
fn thresholds_come_from_the_config_file_and_a_bad_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ds = train_dataset(dir.path());
    let cfg = dir.path().join("overlap.toml");
    std::fs::write(&cfg, "[overlap]\njaccard = 0.4\n").unwrap();
    let o = overlap(&ds, &["--config", cfg.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(out.contains("overlap: near ~ webarena-2"), "{out}");
    assert!(out.contains("2 of 4 training tasks overlap"), "{out}");

    std::fs::write(&cfg, "[overlap]\nngrams = 3\n").unwrap();
    let o = overlap(&ds, &["--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("overlap.toml") && err.contains("ngrams"),
        "{err}"
    );
}

// ------------------------------------------------------------------ generate

/// The stub generator's answer for each query (by the query text in the prompt).
fn seed_answer(prompt: &str) -> String {
    let query = prompt.rsplit("Query: ").next().unwrap_or_default();
    match query {
        "cheap flights rome" => r#"Here you go: {"tasks": [
            {"website": "https://www.kayak.com", "objective": "Find the cheapest round-trip flight from Boston to Rome in May", "constraints": ["economy", "at most one stop"], "category": "travel"},
            {"website": "https://www.kayak.com/flights", "objective": "find the cheapest round-trip flight from Boston to Rome in May!", "constraints": [], "category": "travel"},
            {"website": "", "objective": "Read about Rome", "category": "travel"}]}"#
            .into(),
        "lasagna" => r#"```json
{"tasks": [{"website": "https://www.allrecipes.com", "objective": "Find a vegetarian lasagna recipe with at least 4.5 stars", "constraints": "more than 100 reviews", "category": "recipes"},
 {"website": "https://www.allrecipes.com", "objective": "", "category": "recipes"},
 {"website": "https://cooking.example.test", "objective": "Save a lasagna recipe \u001b[31mto favourites", "category": "cooking"}]}
```"#
            .into(),
        _ => "I cannot help with that.".into(),
    }
}

fn generate(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let q = dir.join("queries.jsonl");
    let ds = dir.join("seed");
    let mut args = vec![
        "tasks",
        "generate",
        "--queries",
        q.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
        "--llm-url",
        url,
        "--model",
        "stub-gen",
        "--retries",
        "0",
    ];
    args.extend_from_slice(extra);
    rmsweb(&args)
}

#[test]
fn queries_become_checked_deduplicated_tasks_and_a_rerun_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("queries.jsonl"),
        "cheap flights rome\n{\"id\": \"q-las\", \"query\": \"lasagna\"}\nweather\n",
    )
    .unwrap();
    let (url, seen) = crate::mine_judge::endpoint_with(200, seed_answer);
    let o = generate(dir.path(), &url, &[]);
    let out = text(&o.stdout);
    // "weather" gets prose without JSON: that query failed, the run says so.
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("failed: query q3 (line 3): no JSON"), "{out}");
    assert!(
        out.contains("refused: query q1 (line 1) task 3: no website"),
        "{out}"
    );
    assert!(
        out.contains("refused: query q-las (line 2) task 2: no objective"),
        "{out}"
    );
    assert!(
        out.contains("duplicate: seed-q1-2 repeats seed-q1-1"),
        "{out}"
    );
    assert!(
        out.contains("3 tasks kept, 2 refused, 1 duplicates dropped"),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "{out}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    let sent = seen.lock().unwrap()[0].clone();
    assert!(sent.contains("\"model\":\"stub-gen\""), "{sent}");
    // The answer's schema goes as response_format (a schema-enforcing server such
    // as rmsweb serve can answer nothing else).
    assert!(
        sent.contains("\"response_format\":{\"json_schema\""),
        "{sent}"
    );

    let tasks: Vec<serde_json::Value> =
        std::fs::read_to_string(dir.path().join("seed/tasks.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(tasks.len(), 3);
    let t = &tasks[0];
    assert_eq!(t["task_id"], "seed-q1-1");
    assert_eq!(t["domain"], "kayak");
    assert_eq!(t["category"], "travel");
    assert_eq!(t["query"], "cheap flights rome");
    assert_eq!(t["generator"]["model"], "stub-gen");
    assert_eq!(t["generator"]["prompt_version"], "rmsweb-seed-task/1");
    assert_eq!(
        t["instruction"],
        "Find the cheapest round-trip flight from Boston to Rome in May Constraints: economy; at most one stop."
    );
    assert_eq!(tasks[1]["constraints"][0], "more than 100 reviews");
    // "cooking" is not one of the eleven categories.
    assert_eq!(tasks[2]["category"], "");
    assert!(out.contains("  (none)             1"), "{out}");
    assert!(out.contains("  travel             1"), "{out}");
    // The generated set is a dataset the rest of the pipeline reads.
    let ds = Dataset::open(dir.path().join("seed")).unwrap();
    assert_eq!(ds.tasks().unwrap().len(), 3);

    // Again: the two answered queries come from the cache, nothing is added twice,
    // and only the failed one is asked again.
    let o = generate(dir.path(), &url, &[]);
    let out = text(&o.stdout);
    assert!(
        out.contains("3 queries (2 answers from the cache, 1 sent): 0 tasks kept"),
        "{out}"
    );
    assert!(out.contains("3 already present"), "{out}");
    assert_eq!(seen.lock().unwrap().len(), 4);
    assert_eq!(
        Dataset::open(dir.path().join("seed")).unwrap().task_count(),
        3
    );
    // --no-schema leaves the field out, for a server that refuses it.
    generate(dir.path(), &url, &["--no-schema"]);
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert!(!last.contains("response_format"), "{last}");
}

#[test]
fn a_bad_query_file_is_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("queries.jsonl"),
        "{\"id\": \"a\", \"query\": \"x\"}\n{\"id\": \"a\", \"query\": \"y\"}\n",
    )
    .unwrap();
    let (url, seen) = crate::mine_judge::endpoint_with(200, seed_answer);
    let o = generate(dir.path(), &url, &[]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("queries.jsonl") && err.contains("line 2") && err.contains("id"),
        "{err}"
    );
    assert!(err.contains("nothing done"), "{err}");
    assert!(seen.lock().unwrap().is_empty());
    assert!(!dir.path().join("seed").exists());
}
