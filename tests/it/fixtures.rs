//! The bundled `fixtures/` dataset (what the workbench opens by default), built by
//! `fixtures-src/collect.sh` from live MiniWoB++ collection runs: a clean `validate`,
//! real screenshots, successes and failures over several task types, reflection-
//! conditioned retries that later succeed, and mined pairs that point at real steps
//! and are what `rmsweb mine` makes of these trajectories today; one seed collected
//! again live gives the same attempts.

use rmsweb::mine::pair::MinedPair;
use rmsweb::trajectory::{Dataset, Trajectory};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn rmsweb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn trajectories(d: &Dataset) -> Vec<Trajectory> {
    (0..d.trajectory_count())
        .map(|i| d.trajectory(i).unwrap())
        .collect()
}

fn pairs(path: &Path) -> Vec<MinedPair> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                folder_bytes(&p)
            } else {
                p.metadata().unwrap().len()
            }
        })
        .sum()
}

#[test]
fn validate_reports_no_problem_in_the_fixtures() {
    let out = rmsweb(&["validate", root().to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(": 0 errors, 0 warnings"), "{stdout}");
}

#[test]
fn fixtures_are_live_miniwob_runs_with_screenshots_successes_and_failures() {
    let d = Dataset::open(root()).unwrap();
    let tasks = d.tasks().unwrap();
    let types: BTreeSet<&str> = tasks.iter().map(|t| t.category.as_str()).collect();
    assert!(types.len() >= 8, "several task types: {types:?}");
    assert!(tasks.iter().all(|t| t.source.starts_with("miniwob:")));
    let ts = trajectories(&d);
    let by_type = |ok: bool| -> BTreeSet<String> {
        ts.iter()
            .filter(|t| t.outcome.success == ok)
            .map(|t| t.task_id.split('/').nth(1).unwrap_or("").to_string())
            .collect()
    };
    assert!(by_type(true).len() >= 8, "successes: {:?}", by_type(true));
    assert!(by_type(false).len() >= 6, "failures: {:?}", by_type(false));
    assert!(ts.iter().any(|t| t.steps.len() >= 3), "multi-step episodes");
    for t in &ts {
        assert_eq!(t.source, "rmsweb-collect", "{}", t.id);
        assert_eq!(t.teacher, "scripted-miniwob", "{}", t.id);
        assert_eq!(t.outcome.judge.as_deref(), Some("miniwob-page"), "{}", t.id);
        // Stable ids (normalize.py): `<task>-s<seed>-a<round>`, no run time or pid.
        assert!(
            t.id.ends_with(&format!("-a{}", t.round)) && !t.id.starts_with("collect-"),
            "{}",
            t.id
        );
        for s in &t.steps {
            assert!(!s.state.elements.is_empty(), "{} step {}", t.id, s.index);
            assert!(
                s.state.url.starts_with("http://127.0.0.1/miniwob/"),
                "{}",
                s.state.url
            );
            let shot = d.resolve(s.state.screenshot.as_ref().unwrap()).unwrap();
            let bytes = std::fs::read(&shot).unwrap();
            assert_eq!(
                image::guess_format(&bytes).unwrap(),
                image::ImageFormat::Png
            );
            let (w, h) = image::image_dimensions(&shot).unwrap();
            assert!(w >= 100 && h >= 100, "{}: {w}x{h}", shot.display());
            for a in &s.output.actions {
                if let Some(i) = a.target_index() {
                    assert!(s.state.element(i).is_some(), "{} step {}", t.id, s.index);
                }
            }
        }
    }
    let size = folder_bytes(&root());
    assert!(size < 5 << 20, "fixtures are {size} bytes");
}

#[test]
fn a_reflection_on_a_failed_round_leads_to_a_later_success() {
    let d = Dataset::open(root()).unwrap();
    let ts = trajectories(&d);
    let mut retries = 0;
    for t in ts.iter().filter(|t| t.round >= 2) {
        // Every retry carries the reflection on the attempt before it, which exists.
        let reflection = t.reflection.as_deref().unwrap_or("");
        assert!(!reflection.trim().is_empty(), "{} has no reflection", t.id);
        let prev = ts
            .iter()
            .find(|p| p.task_id == t.task_id && p.round + 1 == t.round)
            .unwrap_or_else(|| panic!("{}: no round {} before it", t.id, t.round - 1));
        if !prev.outcome.success {
            retries += 1;
        }
    }
    assert!(retries >= 5, "{retries} retries after a failure");
    // A task whose first round failed and a later, reflection-conditioned round
    // succeeded, through more than one retry.
    let rounds: BTreeMap<&str, Vec<&Trajectory>> = ts.iter().fold(BTreeMap::new(), |mut m, t| {
        m.entry(t.task_id.as_str()).or_insert_with(Vec::new).push(t);
        m
    });
    let recovered: Vec<&str> = rounds
        .iter()
        .filter(|(_, v)| {
            v.iter().any(|t| t.round == 1 && !t.outcome.success)
                && v.iter()
                    .any(|t| t.round >= 2 && t.outcome.success && t.reflection.is_some())
        })
        .map(|(k, _)| *k)
        .collect();
    assert!(recovered.len() >= 5, "{recovered:?}");
    assert!(
        rounds.values().any(|v| v
            .iter()
            .any(|t| t.round == 3 && t.outcome.success && t.reflection.is_some())),
        "a success in round 3"
    );
}

#[test]
fn mined_pairs_contrast_real_steps_and_match_a_fresh_mining() {
    let d = Dataset::open(root()).unwrap();
    let ts = trajectories(&d);
    let committed = pairs(&root().join("mined/pairs.jsonl"));
    assert!(committed.len() >= 10, "{} pairs", committed.len());
    let categories: BTreeSet<&str> = committed
        .iter()
        .map(|p| p.failure_mode.category.as_str())
        .collect();
    assert!(categories.len() >= 3, "{categories:?}");
    for p in &committed {
        let find = |id: &str| ts.iter().find(|t| t.id == id).unwrap();
        let (ok, bad) = (find(&p.success.trajectory), find(&p.loc.trajectory));
        assert!(ok.outcome.success && !bad.outcome.success, "{}", p.id);
        assert_eq!((&ok.task_id, &bad.task_id), (&p.task_id, &p.task_id));
        let step = |t: &Trajectory, i: u32| t.steps.iter().find(|s| s.index == i).unwrap().clone();
        assert_eq!(
            step(ok, p.success.step).output.actions[0],
            p.target_action,
            "{}",
            p.id
        );
        assert_eq!(
            step(bad, p.loc.step).output.actions[0],
            p.loc_action,
            "{}",
            p.id
        );
    }
    // The committed pairs are what mining gives today (else: re-run the last steps
    // of fixtures-src/collect.sh, `rmsweb mine --dataset fixtures --config
    // fixtures-src/mine.toml`).
    let out = tempfile::tempdir().unwrap();
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures-src/mine.toml");
    let run = rmsweb(&[
        "mine",
        "--dataset",
        root().to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let fresh = pairs(&out.path().join("pairs.jsonl"));
    let ids = |v: &[MinedPair]| -> Vec<(String, String)> {
        v.iter()
            .map(|p| (p.id.clone(), p.failure_mode.category.clone()))
            .collect()
    };
    assert_eq!(ids(&fresh), ids(&committed));
}

/// What a trajectory says, without what changes from run to run (ids, the server's
/// port, timing, screenshot bytes, which depend on the machine's fonts).
fn gist(t: &Trajectory) -> serde_json::Value {
    let port = regex::Regex::new(r"http://127\.0\.0\.1:\d+/").unwrap();
    let steps: Vec<serde_json::Value> = t
        .steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "url": port.replace_all(&s.state.url, "http://127.0.0.1/"),
                "elements": s.state.elements.iter()
                    .map(|e| (e.index, e.tag.clone(), e.text.clone()))
                    .collect::<Vec<_>>(),
                "dom_text": s.state.dom_text,
                "output": s.output,
                "result": s.result,
            })
        })
        .collect();
    serde_json::json!({
        "task_id": t.task_id,
        "round": t.round,
        "reflection": t.reflection,
        "outcome": t.outcome,
        "steps": steps,
    })
}

#[test]
fn collecting_login_user_seed_0_again_gives_the_same_attempts() {
    // One line of fixtures-src/collect.sh, live (needs `.ci/install-env.sh`): the
    // fixtures are what today's collector, teacher and reflector produce.
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let out = rmsweb(&[
        "collect",
        "--tasks",
        "miniwob:login-user",
        "--seed-start",
        "0",
        "--seeds",
        "1",
        "--rounds",
        "3",
        "--mistake-rate",
        "0.25",
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "collect failed (is `.ci/install-env.sh` run?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = trajectories(&Dataset::open(&ds).unwrap());
    let bundled: Vec<Trajectory> = trajectories(&Dataset::open(root()).unwrap())
        .into_iter()
        .filter(|t| t.task_id == "miniwob/login-user/s0")
        .collect();
    assert_eq!(fresh.len(), bundled.len(), "rounds of login-user seed 0");
    assert!(bundled.len() >= 2);
    for (f, b) in fresh.iter().zip(&bundled) {
        assert!(f.id.ends_with(&b.id), "{} vs {}", f.id, b.id);
        assert_eq!(
            gist(f),
            gist(b),
            "{}: fixtures/ is stale, rebuild it with fixtures-src/collect.sh",
            b.id
        );
    }
}

/// The bundled RL run was trained on the bundled fixtures themselves: its run.toml
/// names them, and every rollout group's prompt is one of their mined pairs (so the
/// curriculum and the Reward tab find each state's page).
#[test]
fn the_bundled_rl_run_trained_on_the_fixtures_own_pairs() {
    let run = root().join("runs/rl-tiny");
    let cfg: toml::Value =
        toml::from_str(&std::fs::read_to_string(run.join("run.toml")).unwrap()).unwrap();
    assert_eq!(cfg["dataset"].as_str(), Some("fixtures"));
    assert_eq!(cfg["prompts"].as_str(), Some("mined"));
    let ids: BTreeSet<String> = pairs(&root().join("mined/pairs.jsonl"))
        .into_iter()
        .map(|p| p.id)
        .collect();
    let rollouts = std::fs::read_to_string(run.join("rollouts.jsonl")).unwrap();
    let mut prompts = BTreeSet::new();
    for l in rollouts.lines() {
        let g: serde_json::Value = serde_json::from_str(l).unwrap();
        prompts.insert(g["prompt_id"].as_str().unwrap().to_string());
    }
    assert!(!prompts.is_empty());
    let strangers: Vec<&String> = prompts.difference(&ids).collect();
    assert!(
        strangers.is_empty(),
        "prompts not mined here: {strangers:?}"
    );
    assert!(
        !run.join("checkpoints").exists(),
        "kept small: no checkpoints"
    );
}

/// The README's picture is there and is a terminal-shaped PNG
/// (`scripts/workbench-picture.sh` renders it).
#[test]
fn the_readme_picture_is_a_terminal_capture() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    assert!(readme.contains("](docs/workbench.png)"));
    let img = image::open(repo.join("docs/workbench.png")).unwrap();
    assert!(
        img.width() > img.height() && img.width() >= 800,
        "{}x{}",
        img.width(),
        img.height()
    );
}
