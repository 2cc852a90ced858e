//! `rmsweb eval --tasks-file` on live-web tasks, which have no checker: each episode
//! plays from its task's website (a loopback page here) and an LLM judge (a
//! loopback stub) scores it; the verdict decides the episode, is stored in the
//! dataset and stands for a later `rmsweb judge`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// A loopback site answering every request with one product page; returns its origin.
fn site() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let page = "<!doctype html><html><head><title>Part W-132</title></head><body>\
                <h1>Part W-132</h1><p>Colour: red</p><button>Add to cart</button></body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    origin
}

/// The endpoint's answers: the agent reports the colour at once; the judge lists a
/// key point, scores every page 4, and passes an attempt only at a colour task.
fn stub(prompt: &str) -> String {
    if prompt.contains("List the key points") {
        "1. The part's requested attribute is reported.".into()
    } else if prompt.contains("Score 1 (nothing relevant)") {
        "Score: 4\nReason: the page shows the part.".into()
    } else if prompt.contains("You decide whether a web agent completed a task") {
        if prompt.contains("Task: Find the colour") {
            "Thoughts: the colour red is on the page and was reported.\nStatus: success".into()
        } else {
            "Thoughts: the agent reported a colour, not the price.\nStatus: failure".into()
        }
    } else {
        r#"{"thinking": "The page says Colour: red.", "evaluation_previous_goal": "", "memory": "", "next_goal": "report it", "action": [{"done": {"text": "red", "success": true}}]}"#.into()
    }
}

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `rmsweb CMD --tasks-file TASKS` with the chat policy and the judge both at `url`
/// (no retries), then `extra`.
fn live(cmd: &str, tasks: &Path, url: &str, judge_model: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        cmd,
        "--tasks-file",
        tasks.to_str().unwrap(),
        "--policy",
        "chat",
        "--base-url",
        url,
        "--retries",
        "0",
        "--judge-url",
        url,
        "--judge-model",
        judge_model,
    ];
    args.extend_from_slice(extra);
    rmsweb(&args)
}

/// `rmsweb judge` over dataset `ds` with the stub judge model at `url`.
fn judge(ds: &str, url: &str) -> Output {
    rmsweb(&[
        "judge",
        "--dataset",
        ds,
        "--llm-url",
        url,
        "--model",
        "stub-judge",
        "--retries",
        "0",
    ])
}

/// The dataset's trajectories, as JSON.
fn trajectories(ds: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(ds.join("trajectories.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tasks_file(dir: &Path, origin: &str) -> std::path::PathBuf {
    let path = dir.join("tasks.jsonl");
    let task = |id: &str, what: &str| {
        serde_json::json!({"task_id": id, "website": format!("{origin}/parts/w-132"),
            "domain": "parts", "category": "shopping",
            "instruction": format!("Find the {what} of part W-132."), "source": "test"})
        .to_string()
    };
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n",
            task("w132-colour", "colour"),
            task("w132-price", "price")
        ),
    )
    .unwrap();
    path
}

#[test]
fn live_web_episodes_are_judged_and_their_verdicts_stand() {
    let dir = tempfile::tempdir().unwrap();
    let origin = site();
    let (url, seen) = crate::mine_judge::endpoint_with(200, stub);
    let tasks = tasks_file(dir.path(), &origin);
    let ds = dir.path().join("ds");
    let out = dir.path().join("results.json");
    let (t, d, o) = (
        tasks.to_str().unwrap(),
        ds.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let common = [
        "eval",
        "--tasks-file",
        t,
        "--policy",
        "chat",
        "--base-url",
        &url,
        "--model",
        "stub-agent",
        "--retries",
        "0",
        "--max-steps",
        "3",
    ];

    // Without a judge, or without a dataset, nothing runs: a site scores nothing.
    let o1 = rmsweb(&common);
    assert!(!o1.status.success());
    assert!(
        text(&o1.stderr).contains("--judge-url"),
        "{}",
        text(&o1.stderr)
    );
    let mut judged: Vec<&str> = common.to_vec();
    judged.extend(["--judge-url", &url, "--judge-model", "stub-judge"]);
    let o2 = rmsweb(&judged);
    assert!(!o2.status.success());
    assert!(
        text(&o2.stderr).contains("--dataset"),
        "{}",
        text(&o2.stderr)
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing was asked");

    judged.extend(["--dataset", d, "--out", o]);
    let run = rmsweb(&judged);
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["episodes_total"], 2, "{report}");
    assert_eq!(report["pass_at_1"], 0.5, "{report}");
    for e in report["episodes"].as_array().unwrap() {
        let colour = e["task"] == "w132-colour";
        assert_eq!(e["success"], colour, "{e}");
        let verdict = if colour { "success" } else { "failure" };
        let reason = e["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!("judge stub-judge: {verdict}")),
            "{reason}"
        );
        assert!(reason.contains("the agent called done"), "{reason}");
    }

    // The trajectories name the judge, start at the task's site and keep their
    // screenshots.
    let trajs = trajectories(&ds);
    assert_eq!(trajs.len(), 2);
    for tr in &trajs {
        assert_eq!(tr["outcome"]["judge"], "stub-judge", "{tr}");
        let step = &tr["steps"][0];
        assert!(
            step["state"]["url"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{origin}/parts/w-132")),
            "{step}"
        );
        let shot = step["state"]["screenshot"].as_str().unwrap();
        assert!(ds.join(shot).is_file(), "{shot}");
    }
    // The verdicts are stored and stand: `rmsweb judge` asks nothing again.
    let verdicts = std::fs::read_to_string(ds.join("judge/verdicts.jsonl")).unwrap();
    assert_eq!(verdicts.lines().count(), 2, "{verdicts}");
    let asked = seen.lock().unwrap().len();
    let again = judge(d, &url);
    let said = text(&again.stdout);
    assert!(again.status.success(), "{said}\n{}", text(&again.stderr));
    assert!(said.contains("2 standing verdicts reused"), "{said}");
    assert_eq!(seen.lock().unwrap().len(), asked);
}

#[test]
fn a_task_whose_website_a_browser_cannot_open_is_refused_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    std::fs::write(
        &tasks,
        r#"{"task_id":"leak","website":"file:///etc/passwd","domain":"x","category":"x","instruction":"Read it.","source":"t"}"#,
    )
    .unwrap();
    let o = rmsweb(&[
        "eval",
        "--tasks-file",
        tasks.to_str().unwrap(),
        "--policy",
        "chat",
        "--judge-url",
        "http://127.0.0.1:9/v1",
        "--judge-model",
        "j",
        "--dataset",
        dir.path().join("ds").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("task leak") && err.contains("not an http(s) URL"),
        "{err}"
    );
}

/// `rmsweb collect --tasks-file`: each attempt is judged before its retry is
/// decided; a failure is retried with a reflection, a success is not.
#[test]
fn live_web_collection_retries_what_the_judge_fails() {
    let dir = tempfile::tempdir().unwrap();
    let origin = site();
    let (url, _seen) = crate::mine_judge::endpoint_with(200, stub);
    let tasks = tasks_file(dir.path(), &origin);
    let ds = dir.path().join("ds");
    let report = dir.path().join("yield.json");
    let o = live(
        "collect",
        &tasks,
        &url,
        "stub-judge",
        &[
            "--rounds",
            "2",
            "--max-steps",
            "3",
            // Two workers, each judging its own attempts.
            "--parallel",
            "2",
            "--dataset",
            ds.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let trajs = trajectories(&ds);
    let attempts = |task: &str| -> Vec<&serde_json::Value> {
        trajs.iter().filter(|t| t["task_id"] == task).collect()
    };
    // The colour task passed at once; the price task failed twice, its second
    // attempt carrying a reflection on the first.
    let colour = attempts("w132-colour");
    assert_eq!(colour.len(), 1);
    assert_eq!(colour[0]["outcome"]["success"], true);
    let price = attempts("w132-price");
    assert_eq!(price.len(), 2);
    assert!(
        price
            .iter()
            .all(|t| t["outcome"]["success"] == false && t["outcome"]["judge"] == "stub-judge")
    );
    assert!(price[0]["reflection"].is_null());
    assert!(
        price[1]["reflection"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{}",
        price[1]
    );
    let verdicts = std::fs::read_to_string(ds.join("judge/verdicts.jsonl")).unwrap();
    assert_eq!(verdicts.lines().count(), 3, "{verdicts}");
    let y: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(y["with_reflection"]["attempts_total"], 3, "{y}");
}

/// The same against `rmsweb serve` on a tiny random checkpoint, as agent and judge:
/// the judge's schemas are enforced while decoding, so every question reads and the
/// episode gets a verdict, however meaningless.
#[test]
fn live_web_evaluation_runs_against_rmsweb_serve() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir_all(&ck).unwrap();
    // A context long enough for a judge prompt with a page's text.
    crate::serve::write_tiny_checkpoint(&ck, 4096, &[]);
    let server = crate::serve::start(&ck, &dir.path().join("served"));
    let origin = site();
    // One task, one step: a debug build's random model is slow to answer.
    let tasks = tasks_file(dir.path(), &origin);
    let first = std::fs::read_to_string(&tasks).unwrap();
    std::fs::write(&tasks, first.lines().next().unwrap()).unwrap();
    let ds = dir.path().join("ds");
    let out = dir.path().join("results.json");
    let o = rmsweb(&[
        "eval",
        "--tasks-file",
        tasks.to_str().unwrap(),
        "--policy",
        "chat",
        "--base-url",
        &server.base,
        "--model",
        "tiny",
        "--judge-url",
        &server.base,
        "--judge-model",
        "tiny",
        "--max-steps",
        "1",
        "--dataset",
        ds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["episodes_total"], 1, "{report}");
    for e in report["episodes"].as_array().unwrap() {
        assert!(
            e["reason"].as_str().unwrap().starts_with("judge tiny: "),
            "{e}"
        );
    }
    let verdicts = std::fs::read_to_string(ds.join("judge/verdicts.jsonl")).unwrap();
    assert_eq!(verdicts.lines().count(), 1, "{verdicts}");
}

/// A judge that answers without a status decides nothing: the episodes are kept,
/// unjudged and counted as failures, the run exits non-zero naming the fix, and
/// `rmsweb judge` judges them afterwards.
#[test]
fn episodes_the_judge_cannot_decide_are_kept_for_rmsweb_judge() {
    let dir = tempfile::tempdir().unwrap();
    let origin = site();
    let mute = |prompt: &str| {
        if prompt.contains("You decide whether a web agent completed a task") {
            "Thoughts: hard to say.".to_string()
        } else {
            stub(prompt)
        }
    };
    let (url, _) = crate::mine_judge::endpoint_with(200, mute);
    let tasks = tasks_file(dir.path(), &origin);
    let ds = dir.path().join("ds");
    let out = dir.path().join("results.json");
    let d = ds.to_str().unwrap();
    let o = live(
        "eval",
        &tasks,
        &url,
        "mute",
        &[
            "--max-steps",
            "2",
            "--parallel",
            "2",
            "--dataset",
            d,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o.stdout));
    assert!(
        err.contains("2 episodes could not be judged")
            && err.contains(&format!("rmsweb judge --dataset {d}")),
        "{err}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["pass_at_1"], 0.0, "{report}");
    for e in report["episodes"].as_array().unwrap() {
        let reason = e["reason"].as_str().unwrap();
        assert!(reason.starts_with("not judged (mute: "), "{reason}");
        assert!(reason.contains("Status"), "{reason}");
    }
    assert!(!ds.join("judge/verdicts.jsonl").exists());
    // A judge that decides, afterwards, over the kept trajectories.
    let (good, _) = crate::mine_judge::endpoint_with(200, stub);
    let later = judge(d, &good);
    let said = text(&later.stdout);
    assert!(later.status.success(), "{said}\n{}", text(&later.stderr));
    assert!(
        said.contains("judged 2 trajectories with stub-judge (1 success, 1 failure)"),
        "{said}"
    );
}
