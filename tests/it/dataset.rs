//! The dataset store, `validate`, `stats` and `show`, through the library and the binary.

use rmsweb::action::Action;
use rmsweb::trajectory::{Dataset, Element, ModelOutput, Outcome, State, Step, Task, Trajectory};
use serde_json::json;
use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
}

fn task(id: &str) -> Task {
    Task {
        task_id: id.into(),
        website: "https://shop.test".into(),
        domain: "shopping".into(),
        category: "shopping".into(),
        instruction: format!("buy the thing for {id}"),
        source: "test".into(),
    }
}

fn traj(id: &str, task_id: &str, success: bool, actions: &[Action]) -> Trajectory {
    let mut t = Trajectory {
        id: id.into(),
        task_id: task_id.into(),
        attempt: 1,
        round: 1,
        reflection: None,
        source: "test".into(),
        teacher: "unit".into(),
        outcome: Outcome {
            success,
            ..Default::default()
        },
        steps: actions
            .iter()
            .enumerate()
            .map(|(i, a)| Step {
                index: i as u32,
                state: State {
                    url: format!("https://shop.test/{i}"),
                    title: format!("page {i}"),
                    elements: (0..3)
                        .map(|k| Element {
                            index: k,
                            tag: "button".into(),
                            text: format!("button {k}"),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
                output: ModelOutput {
                    actions: vec![a.clone()],
                    ..Default::default()
                },
                result: vec![],
                timing: None,
                ..Default::default()
            })
            .collect(),
    };
    t.fill_progress();
    t
}

fn click(i: i64) -> Action {
    Action::new("click", json!({ "index": i }))
}

fn sample(dir: &Path) -> Dataset {
    let mut ds = Dataset::create(dir, "sample", "test data").unwrap();
    ds.append_tasks(&[task("a"), task("b")]).unwrap();
    ds.append_trajectories(&[
        traj("a-1", "a", true, &[click(0), click(1), click(2)]),
        traj("a-2", "a", false, &[click(0), click(2)]),
        traj(
            "b-1",
            "b",
            true,
            &[
                click(1),
                Action::new("done", json!({"text": "ok", "success": true})),
            ],
        ),
    ])
    .unwrap();
    ds
}

#[test]
fn appended_records_round_trip_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    let again = Dataset::open(dir.path()).unwrap();
    assert_eq!(again.trajectory_count(), 3);
    assert_eq!(again.meta().name, "sample");
    let t = again.trajectory_by_id("a-2").unwrap().unwrap();
    assert_eq!(t, traj("a-2", "a", false, &[click(0), click(2)]));
    assert_eq!(t.steps[1].state.progress, 1.0);
    assert!(again.trajectory_by_id("zzz").unwrap().is_none());
    let sums: Vec<_> = ds.summaries().into_iter().map(Result::unwrap).collect();
    assert_eq!(sums[2].id, "b-1");
    assert_eq!(sums[2].step_count, 2);
    assert!(sums[2].outcome.success);
    // re-serializing gives the same bytes as the stored line
    let raw = again.trajectories_file().raw(1).unwrap();
    assert_eq!(serde_json::to_vec(&t).unwrap(), raw);
}

#[test]
fn a_torn_line_from_a_crash_is_reported_then_cut_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let path = dir.path().join("trajectories.jsonl");
    let before = std::fs::read(&path).unwrap();
    let mut torn = before.clone();
    torn.extend_from_slice(b"{\"id\":\"half");
    std::fs::write(&path, &torn).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.trajectory_count(), 3);
    assert_eq!(ds.trajectories_file().torn_tail(), Some(4));
    let out = bin().arg("validate").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("trajectories.jsonl:4: (record): incomplete")
    );
    let mut ds = ds;
    ds.append_trajectories(&[traj("b-2", "b", false, &[click(0)])])
        .unwrap();
    assert_eq!(ds.trajectory_count(), 4);
    assert!(ds.trajectories_file().torn_tail().is_none());
    assert!(std::fs::read(&path).unwrap().starts_with(&before));
}

#[test]
fn validate_accepts_a_clean_dataset() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = bin().arg("validate").arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("2 tasks, 3 trajectories, 7 steps"), "{text}");
    assert!(text.contains("0 errors"), "{text}");
}

#[test]
fn validate_names_file_line_and_field_of_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = sample(dir.path());
    let mut abs = traj("c-1", "a", true, &[click(0)]);
    abs.steps[0].state.screenshot = Some("/etc/passwd".into());
    let mut climb = traj("c-2", "nope", true, &[click(0)]);
    climb.steps[0].state.screenshot = Some("../../x.png".into());
    let mut missing = traj("a-1", "a", true, &[click(0), click(9)]);
    missing.steps[1].state.screenshot = Some("screenshots/none.png".into());
    ds.append_trajectories(&[abs, climb, missing]).unwrap();
    let path = dir.path().join("trajectories.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(
        b"{\"id\":\"x\",\"task_id\":\"a\",\"outcome\":{\"success\":\"yes\"},\"steps\":[]}\n",
    );
    bytes.extend_from_slice(b"not json\n");
    std::fs::write(&path, bytes).unwrap();

    let out = bin()
        .args(["validate", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(u64, String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["line"].as_u64().unwrap(),
                f["field"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let has = |line: u64, field: &str, msg: &str| {
        assert!(
            found
                .iter()
                .any(|(l, f, m)| *l == line && f == field && m.contains(msg)),
            "no finding {line} {field} {msg:?} in {found:#?}"
        )
    };
    has(4, "steps[0].state.screenshot", "absolute");
    has(5, "task_id", "not in tasks.jsonl");
    has(5, "steps[0].state.screenshot", "leaves the dataset root");
    has(6, "id", "duplicate trajectory id `a-1`");
    has(6, "steps[1].state.screenshot", "does not exist");
    has(6, "steps[1].output.actions[0].params.index", "index 9");
    has(7, "outcome.success", "invalid type");
    has(8, "(record)", "expected ident");
}

#[test]
fn validate_refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    std::fs::write(
        dir.path().join("dataset.toml"),
        "name = \"x\"\nschema = 2\n",
    )
    .unwrap();
    let out = bin().arg("validate").arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dataset.toml: schema = 2 is not supported"),
        "{err}"
    );
}

#[test]
fn stats_json_counts_successes_steps_and_actions() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = bin()
        .args(["stats", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["tasks"], 2);
    assert_eq!(s["trajectories"], 3);
    assert_eq!(s["successes"], 2);
    assert_eq!(s["steps"], 7);
    assert_eq!(s["actions"]["click"], 6);
    assert_eq!(s["actions"]["done"], 1);
    assert_eq!(s["steps_success"]["max"], 3);
    assert_eq!(s["steps_all"]["min"], 2);
}

#[test]
fn show_prints_the_step_with_the_acted_element_marked_and_hostile_text_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = sample(dir.path());
    let mut t = traj("h-1", "a", false, &[click(1)]);
    t.steps[0].state.title = "evil\u{1b}]0;pwned\u{7}title\u{1b}[2J".into();
    t.steps[0].state.elements[1].text = "Buy\u{1b}[31m now\u{0}".into();
    ds.append_trajectories(&[t]).unwrap();
    let out = bin()
        .args(["show", "--step", "0"])
        .arg(dir.path())
        .arg("h-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("title: eviltitle"), "{text}");
    assert!(text.contains("▶ [1] <button> Buy now\u{FFFD}"), "{text}");
    assert!(text.contains("  [0] <button> button 0"), "{text}");
    assert!(!text.contains('\u{1b}'));
    let out = bin()
        .args(["show", "--step", "5"])
        .arg(dir.path())
        .arg("h-1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has 1 steps; there is no step 5"));
}

#[test]
fn a_folder_without_dataset_toml_opens_as_schema_one() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    std::fs::remove_file(dir.path().join("dataset.toml")).unwrap();
    let ds = Dataset::open(dir.path()).unwrap();
    assert_eq!(ds.meta().schema, 1);
    assert_eq!(ds.trajectory_count(), 3);
}

#[test]
fn curate_filter_writes_every_rejection_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut ds = sample(dir.path());
    let mut stalled = traj("a-3", "a", true, &[click(0), click(0), click(0), click(1)]);
    for s in &mut stalled.steps[..3] {
        s.state.url = "https://shop.test/cart".into();
        s.state.title = "cart".into();
    }
    ds.append_trajectories(&[stalled]).unwrap();
    let out = bin()
        .args(["curate", "filter", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["trajectories"], 4);
    assert_eq!(r["kept"][0]["id"], "a-1");
    assert_eq!(r["kept"].as_array().unwrap().len(), 1);
    assert_eq!(r["counts"]["not_success"], 1);
    assert_eq!(r["counts"]["too_short"], 1);
    assert_eq!(r["counts"]["repeated_action"], 1);
    let stall = &r["rejected"].as_array().unwrap()[2];
    assert_eq!(
        (stall["id"].as_str(), stall["line"].as_u64()),
        (Some("a-3"), Some(4))
    );
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("sft/filter.json")).unwrap())
            .unwrap();
    assert_eq!(saved["kept"], r["kept"]);
}

#[test]
fn a_record_of_hundreds_of_megabytes_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let path = dir.path().join("trajectories.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    f.write_all(b"{\"id\":\"huge\",\"pad\":\"").unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..65 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}\n").unwrap();
    drop(f);
    let ds = Dataset::open(dir.path()).unwrap();
    let err = ds.trajectory(3).unwrap_err();
    assert_eq!(err.line, 4);
    assert!(err.message.contains("over the 64 MiB limit"), "{err}");
    // the records before it are unaffected
    assert_eq!(ds.trajectory(2).unwrap().id, "b-1");
}
