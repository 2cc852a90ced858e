//! The curriculum of an RL run: `rmsweb rl curriculum RUN [--json]` on the recorded
//! tiny RL run (checked against the file itself), and the workbench view (`c` on a
//! run in the Runs tab) as a snapshot, with the jump from a state to its pair.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::tui::action::{Action, Tab};
use rmsweb::tui::{App, Options, RunsOptions, Theme};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .current_dir(repo())
        .args(["rl", "curriculum"])
        .args(args)
        .output()
        .unwrap()
}

/// The JSON figures of the recorded run agree with its rollouts.jsonl read here
/// directly: per state and step, accepted if any group was, else competence-rejected
/// if any group was, else mastered when the best reward reaches r_comp, else
/// std-rejected; lower case when a group went to salvage.
#[test]
fn the_cli_json_matches_the_recorded_run() {
    let out = cli(&["fixtures/runs/rl-tiny", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text =
        std::fs::read_to_string(repo().join("fixtures/runs/rl-tiny/rollouts.jsonl")).unwrap();
    let groups: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // (accepted, competence-rejected, best reward, salvaged) per state and step.
    type Seen = (bool, bool, f64, bool);
    let mut want: BTreeMap<String, BTreeMap<u64, Seen>> = BTreeMap::new();
    for g in &groups {
        let e = want
            .entry(g["prompt_id"].as_str().unwrap().to_string())
            .or_default()
            .entry(g["step"].as_u64().unwrap())
            .or_insert((false, false, f64::MIN, false));
        e.0 |= g["gate"] == "accepted";
        e.1 |= g["gate"] == "competence_gate";
        for s in g["samples"].as_array().unwrap() {
            e.2 = e.2.max(s["reward"].as_f64().unwrap());
        }
        e.3 |= g["routed"] == "salvage";
    }
    assert_eq!(v["summary"]["groups"], groups.len());
    assert_eq!(v["summary"]["states"], want.len());
    let cfg: toml::Value = toml::from_str(
        &std::fs::read_to_string(repo().join("fixtures/runs/rl-tiny/run.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        v["steps"].as_array().unwrap().len() as i64,
        cfg["steps"].as_integer().unwrap()
    );
    assert_eq!(v["r_comp"], 0.55);
    for s in v["states"].as_array().unwrap() {
        let id = s["prompt_id"].as_str().unwrap();
        let expect: String = want[id]
            .values()
            .map(|&(acc, comp, best, salv)| {
                let c = if acc {
                    'A'
                } else if comp {
                    'C'
                } else if best >= 0.55 {
                    'M'
                } else {
                    'S'
                };
                if salv { c.to_ascii_lowercase() } else { c }
            })
            .collect();
        let got: String = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let c = match p["phase"].as_str().unwrap() {
                    "accepted" => 'A',
                    "competence_rejected" => 'C',
                    "mastered" => 'M',
                    "std_rejected" => 'S',
                    other => panic!("{other}"),
                };
                if p["salvaged"] == true {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect();
        assert_eq!(got, expect, "{id}");
    }
    for sh in v["shares"].as_array().unwrap() {
        let total: f64 = sh["shares"]
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-9, "{sh}");
    }
}

#[test]
fn the_cli_text_of_the_recorded_run() {
    let out = cli(&["fixtures/runs/rl-tiny"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!("curriculum_rl_tiny", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_folder_without_rollouts_is_a_clear_error() {
    let out = cli(&["fixtures/runs/sft-tiny"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rollouts.jsonl") && err.contains("only RL runs"),
        "{err}"
    );
}

/// A run whose prompts are the bundled fixtures' mined pairs, with a curriculum of
/// known shape: state k is too hard (competence-rejected, salvaged on even steps)
/// until step 2 + k, learns (accepted) for three steps, then is mastered; the last
/// state never gets a reward (std-rejected throughout).
fn curriculum_run(dir: &Path, pair_ids: &[String]) {
    crate::tui_data::copy_dataset("fixtures/runs/rl-tiny", dir);
    let mut lines = Vec::new();
    for step in 1..=10u64 {
        for (k, id) in pair_ids.iter().enumerate() {
            let start = 2 + k as u64;
            let (gate, routed, rewards): (&str, &str, Vec<f64>) = if k + 1 == pair_ids.len() {
                ("std_gate", "discarded", vec![0.0; 8])
            } else if step < start {
                (
                    "competence_gate",
                    if step % 2 == 0 {
                        "salvage"
                    } else {
                        "discarded"
                    },
                    vec![0.0, 0.3, 0.0, 0.3, 0.0, 0.0, 0.3, 0.0],
                )
            } else if step < start + 3 {
                (
                    "accepted",
                    "rl",
                    vec![1.0, 0.3, 1.0, 0.3, 0.3, 1.0, 0.3, 0.3],
                )
            } else {
                ("std_gate", "discarded", vec![1.0; 8])
            };
            let samples: Vec<Value> = rewards
                .iter()
                .map(|r| json!({"text": "click(1)", "action": null, "reward": r, "rule": "x"}))
                .collect();
            lines.push(
                json!({"step": step, "prompt_id": id, "gate": gate, "routed": routed,
                    "gen_batch": 0, "samples": samples})
                .to_string(),
            );
        }
    }
    std::fs::write(dir.join("rollouts.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn screen(app: &mut App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    let s = t.backend().to_string();
    // without the status bar (dataset counts, not this view's)
    s.trim_end()
        .rsplit_once('\n')
        .map_or(s.clone(), |(b, _)| b.to_string())
}

/// The workbench on `data`, loaded.
fn open_app(data: &Path) -> App {
    let mut app = App::new(Options {
        dataset: data.to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::load("dark").unwrap(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    app
}

#[test]
fn snapshot_curriculum_view_and_jump_to_the_pair() {
    let data = crate::tui::fixtures();
    let pairs: Vec<String> = std::fs::read_to_string(data.path().join("mined/pairs.jsonl"))
        .unwrap()
        .lines()
        .take(6)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let runs = tempfile::tempdir().unwrap();
    curriculum_run(&runs.path().join("rl-curriculum"), &pairs);
    let mut app = open_app(data.path());
    app.set_runs(RunsOptions {
        root: Some(runs.path().to_path_buf()),
        now: Some("2026-11-29T12:30:00Z".parse().unwrap()),
        ..Default::default()
    });
    app.update(Action::SwitchTab(Tab::Runs));
    app.views.runs.poll_now();
    app.handle_key(key(KeyCode::Char('c')));
    assert_eq!(
        app.shared.message.as_deref(),
        Some("select an RL run first (j/k)")
    );
    assert!(app.views.runs.select_id("rl-curriculum"));
    app.handle_key(key(KeyCode::Char('c')));
    assert!(app.curriculum.is_some(), "{:?}", app.shared.message);
    let s = screen(&mut app);
    assert!(s.contains("Curriculum 6 states · 10 steps"), "{s}");
    insta::assert_snapshot!("curriculum_view", s);
    // the third state: hard until step 4, accepted 4..6, mastered after
    app.handle_key(key(KeyCode::Char('j')));
    app.handle_key(key(KeyCode::Char('j')));
    let s = screen(&mut app);
    assert!(
        s.contains("competence_rejected → accepted → mastered"),
        "{s}"
    );
    app.handle_key(key(KeyCode::Enter));
    assert_eq!(app.tab, Tab::Pairs);
    let mut sorted = pairs.clone();
    sorted.sort();
    let selected = app.views.pairs.selected(&app.shared).unwrap().id.clone();
    assert_eq!(selected, sorted[2]);
    // back in the Runs tab the view is still open; Esc closes it
    app.handle_key(key(KeyCode::Char('4')));
    assert!(app.curriculum.is_some());
    app.handle_key(key(KeyCode::Esc));
    assert!(app.curriculum.is_none());
}

#[test]
fn a_state_without_a_pair_in_the_dataset_says_so() {
    let data = crate::tui::fixtures();
    let runs = tempfile::tempdir().unwrap();
    curriculum_run(
        &runs.path().join("rl-other"),
        &["elsewhere@1~x@1".into(), "y@2~z@2".into()],
    );
    let mut app = open_app(data.path());
    app.update(Action::OpenCurriculum(runs.path().join("rl-other")));
    assert!(app.curriculum.is_some());
    app.handle_key(key(KeyCode::Enter));
    assert_eq!(app.tab, Tab::Runs);
    let m = app.shared.message.clone().unwrap_or_default();
    assert!(m.contains("no mined pair `elsewhere@1~x@1`"), "{m}");
    // a run without rollouts is refused with the reason
    app.update(Action::CloseCurriculum);
    app.update(Action::OpenCurriculum(
        repo().join("fixtures/runs/sft-tiny"),
    ));
    assert!(app.curriculum.is_none());
    assert!(
        app.shared
            .message
            .clone()
            .unwrap_or_default()
            .contains("only RL runs")
    );
}
