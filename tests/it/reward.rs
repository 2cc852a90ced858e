//! `rmsweb reward score` and `rmsweb reward batch`, run as the built binary.

use rmsweb::action::Action;
use rmsweb::trajectory::{Dataset, Element, ModelOutput, Outcome, State, Step, Trajectory};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .expect("the rmsweb binary runs")
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/reward")
        .join(name)
}

fn stdout_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn batch_scores_every_line_in_order_and_reports_malformed_ones() {
    let o = rmsweb(&["reward", "batch", data("cases.jsonl").to_str().unwrap()]);
    assert!(!o.status.success(), "a failed line makes the run fail");
    let lines = stdout_lines(&o);
    let got: Vec<(u64, Option<f64>, Option<&str>)> = lines
        .iter()
        .map(|l| {
            (
                l["line"].as_u64().unwrap(),
                l["score"].as_f64(),
                l["rule"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, Some(0.7), Some("click.equivalent_element")),
            (2, Some(0.7), Some("navigate.normalized_url")),
            (3, Some(0.0), Some("parse.invalid")),
            (4, None, None),
            (5, Some(0.3), Some("done.wrong_success_flag")),
            (7, Some(0.0), Some("index.absent")),
            (8, None, None),
        ]
    );
    assert_eq!(lines[0]["level"], "core");
    assert_eq!(
        lines[0]["reason"],
        r#"index 14 is a <a> "Next" like target 13"#
    );
    assert!(
        lines[3]["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON"),
        "{}",
        lines[3]
    );
    assert!(
        lines[6]["error"]
            .as_str()
            .unwrap()
            .starts_with("elements[0].index"),
        "{}",
        lines[6]
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("5 lines scored, 2 failed (line 4, 8)"),
        "{err}"
    );
}

#[test]
fn batch_reads_stdin_and_succeeds_when_every_line_scores() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["reward", "batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let case = json!({"target": {"name": "search", "params": {"query": "hotels paris 2024"}},
                      "candidate": "search(\"hotels paris 2025\")"});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{case}\n{case}\n").as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = stdout_lines(&o);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["line"], 2);
    assert_eq!(lines[1]["rule"], "key_tokens.mismatch");
    assert_eq!(lines[1]["score"], 0.3);
}

#[test]
fn batch_config_changes_thresholds_and_unknown_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("c.jsonl");
    std::fs::write(
        &cases,
        json!({"target": {"name": "search", "params": {"query": "cheap flights paris"}},
               "candidate": "search(\"cheap flights paris tonight\")"})
        .to_string(),
    )
    .unwrap();
    let cfg = dir.path().join("reward.toml");
    std::fs::write(&cfg, "search_jaccard = 0.75\n").unwrap();
    let run = |cfg: Option<&PathBuf>| {
        let mut args = vec!["reward", "batch", cases.to_str().unwrap()];
        if let Some(c) = cfg {
            args.extend(["--config", c.to_str().unwrap()]);
        }
        rmsweb(&args)
    };
    assert_eq!(stdout_lines(&run(None))[0]["score"], 0.3);
    assert_eq!(stdout_lines(&run(Some(&cfg)))[0]["score"], 0.7);
    std::fs::write(&cfg, "search_jacard = 0.75\n").unwrap();
    let o = run(Some(&cfg));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("reward.toml") && err.contains("search_jacard"),
        "{err}"
    );
}

#[test]
fn score_prints_a_readable_decision_and_json() {
    let target = r#"{"name": "done", "params": {"text": "It costs $120", "success": true}}"#;
    let o = rmsweb(&[
        "reward",
        "score",
        "--target",
        target,
        "--candidate",
        r#"done("It costs $125", true)"#,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("score  0.3 (type)"), "{out}");
    assert!(out.contains("rule   key_tokens.mismatch"), "{out}");
    assert!(out.contains("[120] missing"), "{out}");
    assert!(out.contains("element checks skipped"), "{out}");
    let o = rmsweb(&[
        "reward",
        "score",
        "--target",
        target,
        "--candidate",
        "nonsense",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["score"], 0.0);
    assert_eq!(v["level"], "wrong");
    assert_eq!(v["rule"], "parse.invalid");
    let o = rmsweb(&[
        "reward",
        "score",
        "--target",
        "{not json",
        "--candidate",
        "click(1)",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--target is neither JSON actions nor an action"),
        "{err}"
    );
    // The short form a candidate takes is a target too, and scores as its JSON.
    let score = |target: &str| {
        let o = rmsweb(&[
            "reward",
            "score",
            "--target",
            target,
            "--candidate",
            "click(3)",
            "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()["score"].clone()
    };
    assert_eq!(score("click(3)"), 1.0);
    assert_eq!(score(r#"{"name": "click", "params": {"index": 3}}"#), 1.0);
    assert_eq!(
        score("click(4)"),
        score(r#"{"name": "click", "params": {"index": 4}}"#)
    );
}

#[test]
fn score_reads_the_candidate_from_stdin_and_never_prints_control_characters() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args([
            "reward",
            "score",
            "--target",
            r#"{"name": "input", "params": {"index": 1, "text": "ok"}}"#,
            "--candidate",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all("reasoning\n```json\n{\"action\": [{\"input_text\": {\"index\": 1, \"text\": \"\\u001b]0;pwned\\u0007\\u001b[31mred\"}}]}\n```".as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("score  0.3 (type)"), "{out}");
    assert!(out.contains("red"), "{out}");
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n'),
        "control characters reached the terminal: {out:?}"
    );
}

#[test]
fn score_takes_elements_and_target_from_a_dataset_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = Dataset::create(dir.path(), "t", "").unwrap();
    let el = |index, tag: &str, text: &str, href: &str| Element {
        index,
        tag: tag.into(),
        text: text.into(),
        attrs: [("href".to_string(), href.to_string())].into(),
        ..Element::default()
    };
    let step = Step {
        index: 0,
        state: State {
            elements: vec![
                el(3, "a", "Docs", "/docs"),
                el(4, "a", "Docs", "/docs"),
                el(5, "a", "Blog", "/blog"),
            ],
            ..State::default()
        },
        output: ModelOutput {
            actions: vec![Action::new("click", json!({"index": 3}))],
            ..ModelOutput::default()
        },
        result: vec![],
        timing: None,
        ..Default::default()
    };
    ds.append_trajectories(&[Trajectory {
        id: "tr-1".into(),
        task_id: "task".into(),
        attempt: 1,
        round: 1,
        reflection: None,
        source: "test".into(),
        teacher: String::new(),
        outcome: Outcome::default(),
        steps: vec![step],
    }])
    .unwrap();
    let state = format!("{}:tr-1:0", dir.path().display());
    let score = |cand: &str| {
        let o = rmsweb(&[
            "reward",
            "score",
            "--state",
            &state,
            "--candidate",
            cand,
            "--json",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    assert_eq!(score("click(4)")["rule"], "click.equivalent_element");
    assert_eq!(score("click(5)")["score"], 0.3);
    assert_eq!(score("click(9)")["rule"], "index.absent");
    // An explicit target overrides the step's action; the elements still come from it.
    let o = rmsweb(&[
        "reward",
        "score",
        "--state",
        &state,
        "--target",
        r#"{"name": "click", "params": {"index": 5}}"#,
        "--candidate",
        "click(5)",
        "--json",
    ]);
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap()["score"],
        1.0
    );
    let o = rmsweb(&[
        "reward",
        "score",
        "--state",
        &format!("{}:tr-1:7", dir.path().display()),
        "--candidate",
        "click(1)",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("none has index 7"));
    let o = rmsweb(&[
        "reward",
        "score",
        "--state",
        &format!("{}:nope:0", dir.path().display()),
        "--candidate",
        "click(1)",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no trajectory with id \"nope\""));
}
