//! `rmsweb recipe`: the CI-sized recipe (`recipe-smoke.toml`) end to end on live
//! MiniWoB++ in a real Chromium (needs `.ci/install-env.sh`; without it the test
//! fails saying so), every stage's outputs and the report.json shape checked, then
//! resumed (every unit skipped) and re-run with a changed RL setting (only RL, its
//! evaluations and the report run); and the report table of the Runs tab (`R`) on a
//! constructed recipe folder, as a snapshot.

use crate::tui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use rmsweb::tui::action::{Action, Tab};
use rmsweb::tui::{App, Options, RunsOptions, Theme};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `rmsweb recipe ARGS`; returns (success, stdout, stderr).
fn recipe(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .arg("recipe")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(words: &[&str]) -> BTreeSet<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// `✓ unit   up to date, skipped` / `▶ unit   running (...)` lines of a run's output.
fn unit_lines(stdout: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut skipped, mut ran) = (BTreeSet::new(), BTreeSet::new());
    for l in stdout.lines() {
        let mut w = l.split_whitespace();
        match (w.next(), w.next(), l.contains("up to date, skipped")) {
            (Some("✓"), Some(u), true) => {
                skipped.insert(u.to_string());
            }
            (Some("▶"), Some(u), _) => {
                ran.insert(u.to_string());
            }
            _ => {}
        }
    }
    (skipped, ran)
}

const TASKS: [&str; 2] = ["click-button", "enter-text"];
const VARIANTS: [&str; 5] = [
    "anchor-free",
    "dapo",
    "grpo",
    "salvage-ds",
    "salvage-ds+full-corpus",
];

pub(crate) fn require_live_env() {
    let dir = rmsweb::env::miniwob::resolve_dir(None);
    assert!(
        Path::new(rmsweb::env::DEFAULT_CHROMIUM).exists() && dir.join("core/core.js").is_file(),
        "live environment unavailable: Chromium ({}) or the MiniWoB++ pages ({}) are missing \
         (run `.ci/install-env.sh`)",
        rmsweb::env::DEFAULT_CHROMIUM,
        dir.display()
    );
}

/// Every output of the smoke recipe, stage by stage.
fn check_outputs(out: &Path) {
    // collect: both collections on the same seeds, retries with a reflection only
    // in the reflection arm.
    let mut seeds_of = BTreeMap::new();
    for arm in ["reflection", "baseline"] {
        let trajs = jsonl(&out.join(format!("data/{arm}/trajectories.jsonl")));
        assert!(!trajs.is_empty(), "{arm}: no attempt");
        let ids: BTreeSet<String> = trajs
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            ids.len(),
            TASKS.len() * 4,
            "{arm}: 4 seeds of each task: {ids:?}"
        );
        let reflected = trajs.iter().filter(|t| !t["reflection"].is_null()).count();
        if arm == "baseline" {
            assert_eq!(reflected, 0, "the baseline retries without reflection");
        }
        assert!(trajs.iter().all(|t| t["teacher"] == "scripted-miniwob"));
        let y = json(&out.join(format!("collect/{arm}.json")));
        assert_eq!(y["reflection"], arm == "reflection");
        assert_eq!(y["seeds_total"], 8);
        seeds_of.insert(arm, ids);
        // filter with the recipe's bounds, then flatten.
        let f = json(&out.join(format!("data/{arm}/sft/filter.json")));
        assert_eq!(f["config"]["min_effective_steps"], 1);
        let kept = f["kept"].as_array().unwrap().len();
        assert!(kept > 0, "{arm}: the filter kept nothing");
        let samples = jsonl(&out.join(format!("data/{arm}/sft/samples.jsonl")));
        assert!(
            samples.len() >= kept,
            "{arm}: {} samples of {kept} kept",
            samples.len()
        );
        // sft: a finished run folder with a loadable checkpoint.
        let run = out.join(format!("runs/sft-{arm}"));
        assert_eq!(json(&run.join("status.json"))["state"], "finished");
        assert!(run.join("recipe-unit.json").is_file());
        let toml = std::fs::read_to_string(run.join("run.toml")).unwrap();
        assert!(toml.contains(&format!("data/{arm}")), "{toml}");
        assert!(toml.contains("max_steps = 4"), "{toml}");
    }
    assert_eq!(seeds_of["reflection"], seeds_of["baseline"], "same seeds");
    // sft-collect: the pool holds the teacher's attempts and the SFT policy's on the
    // same instances (two seeds of each task type).
    let pool = jsonl(&out.join("data/pool/trajectories.jsonl"));
    let by_teacher = |name: &str| -> BTreeSet<String> {
        pool.iter()
            .filter(|t| t["teacher"] == name)
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    let teacher = by_teacher("scripted-miniwob");
    let sft = by_teacher("local:sft-reflection");
    assert_eq!(teacher, seeds_of["reflection"]);
    assert_eq!(
        sft.len(),
        TASKS.len(),
        "one seed of each task type: {sft:?}"
    );
    assert!(sft.is_subset(&teacher), "{sft:?} vs {teacher:?}");
    assert_eq!(json(&out.join("collect/sft-policy.json"))["seeds_total"], 2);
    // mine: at least one pair (the RL variants on mined prompts need it).
    let pairs = jsonl(&out.join("data/pool/mined/pairs.jsonl"));
    assert!(!pairs.is_empty());
    assert!(out.join("data/pool/mined/report.json").is_file());
    // rl: every variant from the SFT run of the reflection collection, on the pool.
    for v in VARIANTS {
        let run = out.join(format!("runs/rl-{v}-s1"));
        assert_eq!(json(&run.join("status.json"))["state"], "finished", "{v}");
        let toml = std::fs::read_to_string(run.join("run.toml")).unwrap();
        let (mode, prompts) = v.split_once('+').unwrap_or((v, "mined"));
        for want in [
            format!("mode = \"{mode}\""),
            format!("prompts = \"{prompts}\""),
            "seed = 1".to_string(),
            "runs/sft-reflection".to_string(),
            "data/pool".to_string(),
        ] {
            assert!(toml.contains(&want), "{v}: {want} not in\n{toml}");
        }
        assert!(!jsonl(&run.join("metrics.jsonl")).is_empty());
    }
    check_checkpoint_choice(out);
    // eval: every policy on the held-out seed 1000 of each task type.
    let mut names = vec!["sft-reflection".to_string(), "sft-baseline".to_string()];
    names.extend(VARIANTS.iter().map(|v| format!("rl-{v}-s1")));
    for n in &names {
        let e = json(&out.join(format!("eval/{n}.json")));
        assert_eq!(e["episodes_total"], 2, "{n}");
        let seeds: BTreeSet<u64> = e["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["seed"].as_u64().unwrap())
            .collect();
        assert_eq!(seeds, [1000].into(), "{n}");
        assert_eq!(
            jsonl(&out.join(format!("eval/{n}/trajectories.jsonl"))).len(),
            2
        );
    }
}

/// `[rl.validation]`: every complete checkpoint of each RL run was evaluated on the
/// validation seed 2000 of each task type, and the held-out evaluation used the best
/// (ties: the earlier step), as its record, report.json and report.md say.
fn check_checkpoint_choice(out: &Path) {
    let recs = records(out);
    for v in VARIANTS {
        let name = format!("rl-{v}-s1");
        let steps = rmsweb::train::run::RunDir::open(out.join("runs").join(&name))
            .unwrap()
            .complete_checkpoints();
        assert!(steps.len() >= 2, "{v}: a checkpoint every step");
        let mut best: Option<(u64, f64)> = None;
        let mut listed = Vec::new();
        for (step, _) in &steps {
            let e = json(&out.join(format!("eval/validation/{name}/step-{step}.json")));
            assert_eq!(e["episodes_total"], 2, "{v} step {step}");
            for ep in e["episodes"].as_array().unwrap() {
                assert_eq!(ep["seed"], 2000, "{v} step {step}");
            }
            let p = e["pass_at_1"].as_f64().unwrap();
            if best.is_none_or(|(_, b)| p > b) {
                best = Some((*step, p));
            }
            listed.push(serde_json::json!({ "step": step, "pass1": p }));
        }
        let chosen = best.unwrap().0;
        let summary = &recs[&format!("eval-rl/{name}")]["summary"];
        assert_eq!(summary["validation"]["chosen"], chosen, "{v}");
        assert_eq!(summary["validation"]["steps"], Value::Array(listed), "{v}");
        assert_eq!(
            summary["checkpoint"],
            format!("runs/{name}/checkpoints/step-{chosen}"),
            "{v}"
        );
    }
}

/// report.json has exactly the shape, and its figures match the stages'.
fn check_report(out: &Path) {
    let r = json(&out.join("report.json"));
    assert_eq!(
        keys(&r),
        set(&["tasks", "eval_seeds", "sft", "rl", "reflection", "per_task"])
    );
    assert_eq!(r["tasks"], serde_json::json!(TASKS));
    assert_eq!(r["eval_seeds"], serde_json::json!([1000, 1]));
    let policy = |p: &Value, eval: &str| {
        assert_eq!(keys(p), set(&["pass1", "episodes", "checkpoint"]));
        let e = json(&out.join(format!("eval/{eval}.json")));
        assert_eq!(p["pass1"], e["pass_at_1"], "{eval}");
        assert_eq!(p["episodes"], 2);
        let ck = p["checkpoint"].as_str().unwrap();
        assert!(out.join(ck).join("config.json").is_file(), "{ck}");
    };
    policy(&r["sft"], "sft-reflection");
    assert_eq!(keys(&r["rl"]), set(&VARIANTS));
    for v in VARIANTS {
        policy(&r["rl"][v], &format!("rl-{v}-s1"));
    }
    assert_eq!(keys(&r["reflection"]), set(&["with", "without"]));
    for (side, eval) in [("with", "sft-reflection"), ("without", "sft-baseline")] {
        let a = &r["reflection"][side];
        assert_eq!(keys(a), set(&["pass1", "steps_solved"]));
        let e = json(&out.join(format!("eval/{eval}.json")));
        assert_eq!(a["pass1"], e["pass_at_1"]);
        assert_eq!(a["steps_solved"], e["mean_steps_solved"]);
    }
    assert_eq!(keys(&r["per_task"]), set(&TASKS));
    let mut cols = set(&VARIANTS);
    cols.insert("sft".into());
    for t in TASKS {
        assert_eq!(keys(&r["per_task"][t]), cols);
        for c in &cols {
            let x = r["per_task"][t][c].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x));
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "Table 2 analog",
        "95% interval",
        "Decoding: greedy, grounded",
        "Table 3 analog",
        "steps saved",
        "REFLECTION_MISTAKE_FACTOR",
        "Yield per collection round",
        "Training dynamics",
        "std-gate share",
        "log-prob gap",
        "rollout log-ppl",
        "Time per stage",
        "rl-salvage-ds+full-corpus-s1",
    ] {
        assert!(md.contains(want), "report.md lacks {want:?}:\n{md}");
    }
    assert!(!md.contains("Incomplete"), "{md}");
    // The checkpoint each RL row uses is named with its validation scores.
    assert!(md.contains("Checkpoint choice on validation seeds"), "{md}");
    for v in VARIANTS {
        let ck = r["rl"][v]["checkpoint"].as_str().unwrap();
        let step = ck.rsplit("step-").next().unwrap();
        assert!(
            md.contains(&format!("| rl-{v}-s1 | {step} | ")),
            "{v}: chosen step {step} not in report.md:\n{md}"
        );
    }
    // Each variant's row pairs its held-out episodes with the SFT policy's by task and
    // seed: what only SFT solved and what only the variant solved.
    let solved = |name: &str| -> BTreeMap<(String, u64), bool> {
        json(&out.join(format!("eval/{name}.json")))["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let key = (
                    e["task"].as_str().unwrap().to_string(),
                    e["seed"].as_u64().unwrap(),
                );
                (key, e["success"].as_bool().unwrap())
            })
            .collect()
    };
    let sft = solved("sft-reflection");
    for v in VARIANTS {
        let rl = solved(&format!("rl-{v}-s1"));
        let lost = sft.iter().filter(|(k, ok)| **ok && !rl[*k]).count();
        let gained = sft.iter().filter(|(k, ok)| !**ok && rl[*k]).count();
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {v} |")))
            .unwrap_or_else(|| panic!("no Table 2 row for {v}:\n{md}"));
        assert!(
            row.contains(&format!("| {lost} / {gained} (")),
            "{v}: {row}"
        );
    }
    for f in ["pass1.png", "yield.png", "dynamics.png"] {
        let p = out.join("figures").join(f);
        assert!(
            p.is_file(),
            "{} missing (a TrueType font is needed: install fonts-dejavu-core, as .ci/install-env.sh does)",
            p.display()
        );
        let img = image::open(&p).unwrap();
        assert!(img.width() >= 600 && img.height() >= 300, "{f}");
    }
}

fn records(out: &Path) -> BTreeMap<String, Value> {
    std::fs::read_dir(out.join("stages"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let v = json(&p);
            (v["unit"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn smoke_recipe_runs_end_to_end_then_resumes_and_reruns_only_what_changed() {
    require_live_env();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("recipe");
    let out_s = out.to_str().unwrap();
    let config = repo().join("recipe-smoke.toml");
    let config_s = config.to_str().unwrap();

    let t = std::time::Instant::now();
    let (ok, stdout, stderr) = recipe(&["run", "--config", config_s, "--out", out_s]);
    assert!(ok, "recipe run failed:\n{stdout}\n{stderr}");
    eprintln!(
        "smoke recipe: {:.1} s end to end",
        t.elapsed().as_secs_f64()
    );
    let (skipped, ran) = unit_lines(&stdout);
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(ran.len(), 23, "{ran:?}");
    check_outputs(&out);
    check_report(&out);
    // Each run was started from the config the recipe resolved and wrote into its
    // folder: the trainer's run.toml holds exactly those values.
    for run in std::fs::read_dir(out.join("runs")).unwrap() {
        let run = run.unwrap().path();
        let table = |f: &str| -> toml::Table {
            toml::from_str(&std::fs::read_to_string(run.join(f)).unwrap()).unwrap()
        };
        assert_eq!(
            table("recipe-config.toml"),
            table("run.toml"),
            "{}",
            run.display()
        );
    }
    let first = records(&out);
    assert_eq!(first.len(), 23);
    for (u, r) in &first {
        for o in r["outputs"].as_array().unwrap() {
            assert!(out.join(o.as_str().unwrap()).exists(), "{u}: {o}");
        }
    }

    // Again: every unit is up to date and nothing is rewritten.
    let (ok, stdout, stderr) = recipe(&["run", "--config", config_s, "--out", out_s]);
    assert!(ok, "{stdout}\n{stderr}");
    let (skipped, ran) = unit_lines(&stdout);
    assert!(ran.is_empty(), "{ran:?}");
    assert_eq!(skipped.len(), 23, "{stdout}");
    assert_eq!(records(&out), first);

    // One more RL step: only RL, its evaluations and the report are stale ...
    let text = std::fs::read_to_string(&config).unwrap();
    let changed_text = text.replacen(
        "[rl]\npreset = \"tiny\"\nsteps = 2",
        "[rl]\npreset = \"tiny\"\nsteps = 3",
        1,
    );
    assert_ne!(
        changed_text, text,
        "recipe-smoke.toml's [rl] block moved; update this test"
    );
    let changed = d.path().join("changed.toml");
    std::fs::write(&changed, changed_text).unwrap();
    let changed_s = changed.to_str().unwrap();
    // ... so a report alone is refused, naming what it needs ...
    let (ok, stdout, stderr) = recipe(&[
        "run", "--config", changed_s, "--out", out_s, "--stages", "report",
    ]);
    assert!(!ok, "{stdout}");
    assert!(
        stderr.contains("needs rl/")
            && stderr.contains("add its stage `rl`")
            && stderr.contains("or the unit `rl/"),
        "{stderr}"
    );
    // ... one variant and its evaluation can run alone, named by unit id ...
    let one = ["rl/salvage-ds/s1", "eval-rl/rl-salvage-ds-s1"];
    let (ok, stdout, stderr) = recipe(&[
        "run",
        "--config",
        changed_s,
        "--out",
        out_s,
        "--stages",
        &one.join(","),
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    let (_, ran) = unit_lines(&stdout);
    assert_eq!(ran, set(&one), "{stdout}");
    assert!(stdout.contains("out of date but not selected"), "{stdout}");
    // ... and a full run redoes exactly the rest of those units.
    let (ok, stdout, stderr) = recipe(&["run", "--config", changed_s, "--out", out_s]);
    assert!(ok, "{stdout}\n{stderr}");
    let (skipped, ran) = unit_lines(&stdout);
    let expect: BTreeSet<String> = first
        .keys()
        .filter(|u| u.starts_with("rl/") || u.starts_with("eval-rl/") || *u == "report")
        .cloned()
        .collect();
    assert_eq!(ran, &expect - &set(&one));
    assert_eq!(skipped.len(), 23 - expect.len() + one.len());
    let second = records(&out);
    for (u, r) in &second {
        assert_eq!(r == &first[u], !expect.contains(u), "{u}");
    }
    for v in VARIANTS {
        let m = jsonl(&out.join(format!("runs/rl-{v}-s1/metrics.jsonl")));
        assert_eq!(m.last().unwrap()["step"], 3, "{v}");
    }
    check_report(&out);

    // The report renders again on its own from what is there.
    std::fs::remove_file(out.join("report.md")).unwrap();
    let (ok, stdout, stderr) = recipe(&["report", "--out", out_s]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(out.join("report.md").is_file());
}

#[test]
fn recipe_configs_are_checked_before_anything_runs() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    std::fs::write(
        &bad,
        "tasks = [\"click-button\"]\n[rl]\nvariants = [\"ppo\"]\n",
    )
    .unwrap();
    let out = d.path().join("out");
    let (ok, _, stderr) = recipe(&[
        "run",
        "--config",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("rl.variants[0]") && stderr.contains("ppo"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is created for a bad config");
    // The shipped configs load.
    for f in ["recipe.toml", "recipe-smoke.toml", "recipe-smollm2.toml"] {
        rmsweb::recipe::RecipeConfig::load(&repo().join(f))
            .unwrap_or_else(|e| panic!("{f}: {e:#}"));
    }
    let (ok, _, stderr) = recipe(&["run", "--out", out.to_str().unwrap(), "--stages", "train"]);
    assert!(
        !ok && stderr.contains("unknown stage or unit `train`"),
        "{stderr}"
    );
}

/// A recipe folder as `rmsweb recipe run` leaves it, with a report.json written
/// from known figures and one run in its runs/.
fn constructed_recipe(root: &Path) -> PathBuf {
    let dir = root.join("recipe-demo");
    std::fs::create_dir_all(dir.join("runs/sft-reflection")).unwrap();
    std::fs::write(
        dir.join("recipe.toml"),
        "tasks = [\"click-button\", \"enter-text\", \"login-user\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("runs/sft-reflection/run.toml"),
        "kind = \"sft\"\npreset = \"tiny\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("runs/sft-reflection/metrics.jsonl"),
        "{\"step\": 1, \"data\": {\"sft/loss\": 1.5}}\n",
    )
    .unwrap();
    let p = |x: f64, n: usize, ck: &str| serde_json::json!({"pass1": x, "episodes": n, "checkpoint": ck});
    let report = serde_json::json!({
        "tasks": ["click-button", "enter-text", "login-user"],
        "eval_seeds": [10000, 10],
        "sft": p(0.6, 30, "runs/sft-reflection/checkpoints/step-40"),
        "rl": {
            "dapo": p(0.6333333333333333, 30, "runs/rl-dapo-s1/checkpoints/step-20"),
            "salvage-ds": p(0.7, 30, "runs/rl-salvage-ds-s1/checkpoints/step-20"),
            "salvage-ds+full-corpus": {"pass1": null, "episodes": 0, "checkpoint": null},
        },
        "reflection": {
            "with": {"pass1": 0.6, "steps_solved": 1.8},
            "without": {"pass1": 0.5, "steps_solved": 2.4},
        },
        "per_task": {
            "click-button": {"sft": 1.0, "dapo": 1.0, "salvage-ds": 0.9, "salvage-ds+full-corpus": null},
            "enter-text": {"sft": 0.5, "dapo": 0.6, "salvage-ds": 0.8, "salvage-ds+full-corpus": null},
            "login-user": {"sft": 0.3, "dapo": 0.3, "salvage-ds": 0.4, "salvage-ds+full-corpus": null},
        },
    });
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
    dir
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.draw(f)).unwrap();
    t.backend().to_string()
}

#[test]
fn runs_tab_opens_the_recipe_report_as_a_table() {
    let data = tui::fixtures();
    let d = tempfile::tempdir().unwrap();
    let dir = constructed_recipe(d.path());
    // `--runs DIR` of a recipe folder shows its runs/.
    let runs = rmsweb::recipe::runs_folder(&dir);
    assert_eq!(runs, dir.join("runs"));
    let mut app = App::new(Options {
        dataset: data.path().to_path_buf(),
        annotator: "tester".into(),
        theme: Theme::load("dark").unwrap(),
        picker: ratatui_image::picker::Picker::halfblocks(),
    })
    .unwrap();
    app.wait_loaded();
    app.set_runs(RunsOptions {
        root: Some(runs),
        now: Some("2026-11-29T12:30:00Z".parse().unwrap()),
        ..Default::default()
    });
    app.update(Action::SwitchTab(Tab::Runs));
    app.views.runs.poll_now();
    app.handle_key(key(KeyCode::Char('R')));
    app.handle_key(key(KeyCode::Char('j')));
    let s = screen(&mut app, 120, 30);
    let body = s
        .trim_end()
        .rsplit_once('\n')
        .map_or(s.as_str(), |(b, _)| b);
    insta::assert_snapshot!("recipe_report_table", body);
    // While open it has the keys: `q` closes it instead of quitting, `2` stays.
    app.handle_key(key(KeyCode::Char('2')));
    assert_eq!(app.tab, Tab::Runs);
    for (w, h) in [(1, 1), (20, 5), (60, 12), (220, 70)] {
        screen(&mut app, w, h);
    }
    app.handle_key(key(KeyCode::Char('q')));
    assert!(!app.should_quit());
    assert!(!screen(&mut app, 120, 30).contains("Recipe report"));

    // Runs that are no recipe's say so; a broken report.json names the file.
    let plain = tempfile::tempdir().unwrap();
    app.set_runs(RunsOptions {
        root: Some(plain.path().to_path_buf()),
        ..Default::default()
    });
    app.views.runs.poll_now();
    app.handle_key(key(KeyCode::Char('R')));
    assert!(
        app.shared
            .message
            .as_deref()
            .unwrap_or("")
            .contains("not a recipe's"),
        "{:?}",
        app.shared.message
    );
    std::fs::write(dir.join("report.json"), "{\"tasks\": 3}").unwrap();
    app.set_runs(RunsOptions {
        root: Some(dir.join("runs")),
        ..Default::default()
    });
    app.views.runs.poll_now();
    app.handle_key(key(KeyCode::Char('R')));
    let m = app.shared.message.clone().unwrap_or_default();
    assert!(
        m.contains("report.json") && m.contains("rmsweb recipe report"),
        "{m}"
    );
}

/// The smoke recipe with a `tiny-vl` SFT: the policy sees each step's screenshot in
/// every stage after SFT (evaluation, its own collection, RL), and the RL checkpoint
/// is a Qwen3-VL folder.
#[test]
fn smoke_recipe_with_a_tiny_vl_policy_trains_rl_that_sees_screenshots() {
    require_live_env();
    let d = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("recipe-smoke.toml")).unwrap();
    let vl_text = text
        .replacen("[sft]\npreset = \"tiny\"", "[sft]\npreset = \"tiny-vl\"", 1)
        .replacen(
            "tiny = { vocab_size",
            "vision = { hidden_size = 32, intermediate_size = 64, num_heads = 2, \
             num_position_embeddings = 64, mrope_section = [6, 5, 5] }\n\
             tiny = { vocab_size",
            1,
        )
        .replacen(
            "[rl]\npreset = \"tiny\"",
            "[rl]\npreset = \"tiny\"\nvariants = [\"salvage-ds\"]",
            1,
        );
    let markers = ["tiny-vl", "vision = {", "variants = [\"salvage-ds\"]"];
    assert!(
        markers.iter().all(|m| vl_text.matches(m).count() == 1),
        "recipe-smoke.toml's [sft] or [rl] block moved; update this test"
    );
    let config = d.path().join("vl.toml");
    std::fs::write(&config, vl_text).unwrap();
    let out = d.path().join("recipe");
    let (ok, stdout, stderr) = recipe(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "recipe run failed:\n{stdout}\n{stderr}");
    let sft_log = std::fs::read_to_string(out.join("runs/sft-reflection/stdout.log")).unwrap();
    assert!(!sft_log.contains(" 0 with a screenshot"), "{sft_log}");
    let rl = out.join("runs/rl-salvage-ds-s1");
    let rl_log = std::fs::read_to_string(rl.join("stdout.log")).unwrap();
    assert!(
        rl_log.contains("a Qwen3-VL policy") && !rl_log.contains(": 0 of"),
        "{rl_log}"
    );
    assert!(rmsweb::model::vl::is_vl_folder(
        &rl.join("checkpoints/step-2")
    ));
    let report = json(&out.join("report.json"));
    assert!(report["rl"]["salvage-ds"]["pass1"].is_number(), "{report}");
}
