//! `rmsweb judge` against a loopback stub judge: key points, scored evidence and a
//! verdict per trajectory, stored beside the trajectories and reused; the recorded
//! outcome never reaches the judge; `judge eval` against the hand labels.

use std::path::Path;
use std::process::{Command, Output};

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// `rmsweb judge --dataset DS --llm-url URL --model MODEL --retries 0 EXTRA...`.
fn judge(ds: &Path, url: &str, model: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "judge",
        "--dataset",
        ds.to_str().unwrap(),
        "--llm-url",
        url,
        "--model",
        model,
        "--retries",
        "0",
    ];
    args.extend_from_slice(extra);
    rmsweb(&args)
}

/// A copy of the mock-site dataset in `dir`.
fn mocksites(dir: &Path) -> std::path::PathBuf {
    let ds = dir.join("mocksites");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mocksites"),
        &ds,
    );
    ds
}

/// The stub judge: a numbered list for key points, score 4 for every step, and a
/// failure only where the agent gave no final answer.
fn stub(prompt: &str) -> String {
    if prompt.contains("List the key points") {
        "1. The requested item or value is reached.".into()
    } else if prompt.contains("Score 1 (nothing relevant)") {
        "Score: 4\nReason: the page shows the task's item.".into()
    } else if prompt.contains("The agent's final answer: (none)") {
        "Thoughts: no answer was given.\nStatus: failure".into()
    } else {
        "Thoughts: every key point is met.\nStatus: success".into()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_trajectory_gets_a_stored_verdict_that_labels_are_compared_with() {
    let dir = tempfile::tempdir().unwrap();
    let ds = mocksites(dir.path());
    let (url, seen) = crate::mine_judge::endpoint_with(200, stub);
    let judge = |extra: &[&str]| judge(&ds, &url, "stub-judge", extra);
    let o = judge(&[]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("judged 13 trajectories with stub-judge (12 success, 1 failure)"),
        "{out}"
    );
    assert!(out.contains("postbox-send-q3-report-a2: failure"), "{out}");
    let requests = seen.lock().unwrap().clone();
    // Per trajectory: key points, one score per model step, the verdict.
    let steps: usize = std::fs::read_to_string(ds.join("trajectories.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["steps"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert!(
        requests.len() >= 2 * 13 && requests.len() <= 2 * 13 + steps,
        "{}",
        requests.len()
    );
    for r in &requests {
        assert!(
            !r.contains("marked failed at import") && !r.contains("success=true"),
            "the recorded outcome reached the judge: {r}"
        );
        assert!(
            !r.contains("data:image/png;base64"),
            "no images without --vision"
        );
    }
    // Scores and verdicts ask for their JSON schema; key points are free text.
    let with_schema = requests
        .iter()
        .filter(|r| r.contains("\"response_format\""))
        .count();
    assert_eq!(
        with_schema,
        requests.len() - 13,
        "all but the 13 key-point requests"
    );

    let verdicts: Vec<serde_json::Value> = std::fs::read_to_string(ds.join("judge/verdicts.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), 13);
    let v = &verdicts[0];
    assert_eq!(v["judge_model"], "stub-judge");
    assert_eq!(v["prompt_version"], "rmsweb-webjudge/1");
    assert_eq!(
        v["key_points"],
        "1. The requested item or value is reached."
    );
    assert!(v["evidence"][0]["selected"].as_bool().unwrap());
    assert_eq!(v["evidence"][0]["score"], 4);

    // Again: every standing verdict is reused, nothing is sent.
    let o = judge(&[]);
    assert!(
        text(&o.stdout).contains("13 standing verdicts reused"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(seen.lock().unwrap().len(), requests.len());

    // With --vision one trajectory's screenshots go as data URLs.
    let o = judge(&[
        "--vision",
        "--again",
        "--trajectories",
        "buyly-trailrunner-x2-size10-a2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let sent = seen.lock().unwrap();
    assert!(
        sent[requests.len()..]
            .iter()
            .any(|r| r.contains("data:image/png;base64,"))
    );
    drop(sent);

    // The hand labels: 13 of this dataset, 50 of the fixtures.
    let labels = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/judge/labels.jsonl");
    let o = rmsweb(&[
        "judge",
        "eval",
        labels.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    // Labels: 7 success, 6 failure; the stub fails only the unsent email.
    assert!(
        out.contains("label success                7              0"),
        "{out}"
    );
    assert!(
        out.contains("label failure                5              1"),
        "{out}"
    );
    assert!(
        out.contains("13 labels compared (0 without a verdict, 50 of other datasets): accuracy 0.615, Cohen's kappa 0.177"),
        "{out}"
    );
    assert!(
        out.contains("disagree: skyfare-bos-ord-mar14-a1 label failure (searched March 4"),
        "{out}"
    );
}

#[test]
fn a_judge_that_answers_without_a_status_leaves_the_trajectory_unjudged() {
    let dir = tempfile::tempdir().unwrap();
    let ds = mocksites(dir.path());
    let (url, _) = crate::mine_judge::endpoint_with(200, |_| "I am not sure.".to_string());
    let o = judge(
        &ds,
        &url,
        "vague",
        &["--trajectories", "codehub-widgets-newest-bug-a1"],
    );
    assert!(!o.status.success());
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "codehub-widgets-newest-bug-a1: not judged: the verdict has no `Status:` line"
        ),
        "{out}"
    );
    assert!(!ds.join("judge/verdicts.jsonl").exists());
    let o = judge(&ds, &url, "vague", &["--trajectories", "nope"]);
    assert!(
        text(&o.stderr).contains("no trajectory nope"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn the_trajectories_tab_shows_the_standing_verdict_and_its_last_thought() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use rmsweb::tui::{App, Options, Theme};
    let d = crate::tui::mocksites();
    let verdict = serde_json::json!({
        "trajectory_id": "codehub-widgets-newest-bug-a1", "task_id": "x", "success": false,
        "reasoning": "Thoughts: the issue \u{1b}[31mis not labeled bug.\nStatus: failure",
        "key_points": "1. bug", "evidence": [], "judge_model": "stub-judge",
        "prompt_version": "rmsweb-webjudge/1", "content_hash": "", "created_at": ""
    });
    std::fs::create_dir_all(d.path().join("judge")).unwrap();
    std::fs::write(
        d.path().join("judge/verdicts.jsonl"),
        format!("{verdict}\n"),
    )
    .unwrap();
    let mut app = App::new(Options {
        dataset: d.path().to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::load("dark").unwrap(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    let mut t = Terminal::new(TestBackend::new(160, 40)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    let screen = t.backend().to_string();
    assert!(screen.contains("codehub-widgets-newest-bug-a1"), "{screen}");
    assert!(
        screen.contains("Judge: ✗ failure (stub-judge)  the issue is not labeled bug."),
        "{screen}"
    );
    assert!(!screen.contains('\u{1b}'));
}

/// Both LLM commands against `rmsweb serve` on a tiny random checkpoint: the
/// schemas they send are enforced while decoding, so every answer reads, however
/// meaningless its content.
#[test]
fn generate_and_judge_run_against_rmsweb_serve() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir_all(&ck).unwrap();
    // A context long enough for a judge prompt with a page's text.
    crate::serve::write_tiny_checkpoint(&ck, 4096, &[]);
    let server = crate::serve::start(&ck, &dir.path().join("served"));
    let url = server.base.clone();

    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, "cheap flights rome\nlasagna recipe\n").unwrap();
    let seed = dir.path().join("seed");
    let o = rmsweb(&[
        "tasks",
        "generate",
        "--queries",
        queries.to_str().unwrap(),
        "--dataset",
        seed.to_str().unwrap(),
        "--llm-url",
        &url,
        "--model",
        "tiny",
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("2 queries (0 answers from the cache, 2 sent)"),
        "{out}"
    );
    assert!(out.contains("0 queries failed"), "{out}");

    let ds = mocksites(dir.path());
    let o = judge(
        &ds,
        &url,
        "tiny",
        &["--trajectories", "codehub-widgets-newest-bug-a2"],
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(out.contains("judged 1 trajectories with tiny"), "{out}");
}
