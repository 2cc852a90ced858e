//! `rmsweb eval compare`: evaluations' results paired by task and seed, alone or
//! pooled over several compared evaluations.

use rmsweb::eval::{EpisodeRecord, EvalReport};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn episode(task: &str, seed: u64, success: bool) -> EpisodeRecord {
    EpisodeRecord {
        task: task.into(),
        seed,
        attempt: 1,
        instruction: String::new(),
        success,
        reward: if success { 1.0 } else { -1.0 },
        steps: 1,
        reason: String::new(),
        trajectory_id: format!("{task}-{seed}"),
        seconds: 1.0,
    }
}

fn report(policy: &str, episodes: Vec<EpisodeRecord>) -> EvalReport {
    EvalReport {
        policy: policy.into(),
        k: 1,
        seed: 0,
        max_steps: 10,
        episodes_total: episodes.len(),
        pass_at_1: 0.0,
        pass_at_k: None,
        mean_steps_solved: None,
        elapsed_s: 1.0,
        episodes_per_minute: 1.0,
        tasks: Vec::new(),
        episodes,
        cut_short: None,
    }
}

fn write(path: &Path, r: &EvalReport) {
    std::fs::write(path, serde_json::to_string_pretty(r).unwrap()).unwrap();
}

fn compare(args: &[&Path], json: bool) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmsweb"));
    cmd.args(["eval", "compare"]).args(args);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An unchanged pass@1 can hide solved episodes traded for others: the comparison
/// pairs episodes by task and seed and counts both directions.
#[test]
fn compare_pairs_episodes_and_counts_what_each_policy_solved_alone() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("sft.json"), d.path().join("rl.json"));
    // click-tab: same 4 of 6 solved, but 3 traded for 3 others.
    let base_tab = [true, true, true, true, false, false];
    let new_tab = [false, false, true, false, true, true];
    let mut base: Vec<_> = (0..6)
        .map(|s| episode("miniwob:click-tab", s, base_tab[s as usize]))
        .collect();
    let mut new: Vec<_> = (0..6)
        .map(|s| episode("miniwob:click-tab", s, new_tab[s as usize]))
        .collect();
    // enter-text: 6 gained, none lost; seed 9 only in the new evaluation.
    base.extend((0..8).map(|s| episode("miniwob:enter-text", s, s >= 6)));
    new.extend((0..8).map(|s| episode("miniwob:enter-text", s, true)));
    new.push(episode("miniwob:enter-text", 9, true));
    // Episodes in another order pair all the same.
    new.reverse();
    write(&a, &report("local:sft", base));
    write(&b, &report("local:rl\u{1b}[31m", new));

    let (ok, out, err) = compare(&[&a, &b], true);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let row = |task: &str| -> Value {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["task"] == task)
            .cloned()
            .unwrap_or_else(|| panic!("{task} in {v}"))
    };
    let tab = row("miniwob:click-tab");
    assert_eq!(
        (&tab["paired"], &tab["base_solved"], &tab["new_solved"]),
        (&6.into(), &4.into(), &3.into())
    );
    assert_eq!((&tab["lost"], &tab["gained"]), (&3.into(), &2.into()));
    let text = row("miniwob:enter-text");
    assert_eq!((&text["lost"], &text["gained"]), (&0.into(), &6.into()));
    // 0 vs 6 discordant: 2 / 2^6.
    assert!((text["p_value"].as_f64().unwrap() - 2.0 / 64.0).abs() < 1e-12);
    assert_eq!(v["total"]["paired"], 14);
    assert_eq!(
        (&v["total"]["lost"], &v["total"]["gained"]),
        (&3.into(), &8.into())
    );
    assert_eq!((&v["base_only"], &v["new_only"]), (&0.into(), &1.into()));

    // The table names both policies without the escape sequence a name carried.
    let (ok, table, err) = compare(&[&a, &b], false);
    assert!(ok, "{err}");
    assert!(!table.contains('\u{1b}'), "{table:?}");
    assert!(table.contains("local:sft") && table.contains("local:rl"));
    let line = table
        .lines()
        .find(|l| l.starts_with("click-tab "))
        .unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[1..6], ["6", "0.667", "0.500", "3", "2"]);
    assert!(table.contains("1 only in the new evaluation"), "{table}");
}

#[test]
fn compare_names_the_file_line_and_field_of_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.json"), d.path().join("b.json"));
    write(
        &a,
        &report("x", vec![episode("miniwob:click-tab", 0, true)]),
    );
    let mut v: Value = serde_json::to_value(report(
        "y",
        vec![
            episode("miniwob:click-tab", 0, true),
            episode("miniwob:click-tab", 1, true),
        ],
    ))
    .unwrap();
    v["episodes"][1]["success"] = "yes\u{7}".into();
    std::fs::write(&b, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let (ok, _, err) = compare(&[&a, &b], false);
    assert!(!ok);
    assert!(
        err.contains("b.json") && err.contains("episodes[1].success") && err.contains("line "),
        "{err}"
    );
    assert!(!err.contains('\u{7}'), "{err:?}");
    // No episode in common is an error, not an empty table.
    write(
        &b,
        &report("y", vec![episode("miniwob:click-tab", 5, true)]),
    );
    let (ok, _, err) = compare(&[&a, &b], false);
    assert!(!ok && err.contains("share no episode"), "{err}");
}

/// Several RL seeds against one SFT evaluation: each is listed alone, then the pairs
/// pool (lost and gained add up, each run against the same base episodes).
#[test]
fn compare_pools_several_evaluations_against_one_base() {
    let d = tempfile::tempdir().unwrap();
    let base_path = d.path().join("sft.json");
    let base_ok = [true, true, false, false];
    let base: Vec<_> = (0..4)
        .map(|s| episode("miniwob:click-tab", s, base_ok[s as usize]))
        .collect();
    write(&base_path, &report("local:sft", base));
    // Seed 1 trades one solved episode for another; seed 2 gains both.
    let runs = [
        ("local:rl-s1", [false, true, true, false]),
        ("local:rl-s2\u{7}", [true, true, true, true]),
    ];
    let mut paths = vec![base_path.clone()];
    for (i, (name, ok)) in runs.iter().enumerate() {
        let p = d.path().join(format!("rl{i}.json"));
        let eps = (0..4)
            .map(|s| episode("miniwob:click-tab", s, ok[s as usize]))
            .collect();
        write(&p, &report(name, eps));
        paths.push(p);
    }
    let args: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let (ok, out, err) = compare(&args, true);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let runs_v = v["runs"].as_array().unwrap();
    assert_eq!(runs_v.len(), 2);
    assert_eq!(
        (&runs_v[0]["total"]["lost"], &runs_v[0]["total"]["gained"]),
        (&1.into(), &1.into())
    );
    assert_eq!(
        (&runs_v[1]["total"]["lost"], &runs_v[1]["total"]["gained"]),
        (&0.into(), &2.into())
    );
    let t = &v["total"];
    assert_eq!(
        (&t["paired"], &t["base_solved"], &t["new_solved"]),
        (&8.into(), &4.into(), &6.into())
    );
    assert_eq!((&t["lost"], &t["gained"]), (&1.into(), &3.into()));
    // 1 vs 3 discordant: 2 · (1 + 4) / 16.
    assert!((t["p_value"].as_f64().unwrap() - 10.0 / 16.0).abs() < 1e-12);

    let (ok, table, err) = compare(&args, false);
    assert!(ok, "{err}");
    assert!(!table.contains('\u{7}'), "{table:?}");
    assert!(table.contains("2 evaluations"), "{table}");
    let cols = |start: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start} row:\n{table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(cols("local:rl-s1")[1..6], ["4", "0.500", "0.500", "1", "1"]);
    assert_eq!(cols("all")[1..6], ["8", "0.500", "0.750", "1", "3"]);

    // A compared file sharing no episode with the base is named.
    let stray = d.path().join("stray.json");
    write(
        &stray,
        &report("x", vec![episode("miniwob:click-tab", 99, true)]),
    );
    let (ok, _, err) = compare(&[&base_path, &paths[1], &stray], false);
    assert!(
        !ok && err.contains("stray.json") && err.contains("share no episode"),
        "{err}"
    );
}

/// The bundled SmolLM2 evaluations (fixtures/evals): compare pairs all 240 held-out
/// episodes, and its counts are the ones a recount of the two files gives.
#[test]
fn compare_on_the_bundled_smollm2_evaluations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/evals");
    let base = root.join("smollm2-two-passes.json");
    let new = root.join("smollm2-echo.json");
    let (ok, out, err) = compare(&[&base, &new], true);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let solved = |p: &Path| -> std::collections::BTreeMap<(String, u64), bool> {
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        r["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    (
                        e["task"].as_str().unwrap().to_string(),
                        e["seed"].as_u64().unwrap(),
                    ),
                    e["success"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let (b, n) = (solved(&base), solved(&new));
    assert_eq!(b.len(), 240);
    let lost = b.iter().filter(|(k, s)| **s && !n[*k]).count();
    let gained = b.iter().filter(|(k, s)| !**s && n[*k]).count();
    let total = &v["total"];
    assert_eq!(total["paired"], 240);
    assert_eq!(total["lost"], lost);
    assert_eq!(total["gained"], gained);
    assert!(total["p_value"].as_f64().unwrap() < 0.05, "{total}");
    assert_eq!(v["tasks"].as_array().unwrap().len(), 12);
}
