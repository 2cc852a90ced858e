//! `rmsweb eval --parallel N`: episodes played side by side in tabs of one browser, a
//! local model's steps decoded together by the batching engine, give the same
//! episodes as playing them one at a time, and write every trajectory.

use super::serve::write_tiny_checkpoint;
use rmsweb::trajectory::Dataset;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn eval(ckpt: &Path, out: &Path, ds: &Path, parallel: &str) -> Value {
    let o = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args([
            "eval",
            "--tasks",
            "miniwob:click-button,miniwob:enter-text",
            "--episodes",
            "3",
            "--max-steps",
            "3",
            "--policy",
            "local",
            "--grounded",
            "--max-new-tokens",
            "60",
            "--parallel",
            parallel,
            "--checkpoint",
        ])
        .arg(ckpt)
        .arg("--out")
        .arg(out)
        .arg("--dataset")
        .arg(ds)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// What must not depend on how the episodes were scheduled.
fn episodes(r: &Value) -> Vec<(String, u64, bool, u64, String)> {
    r["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap().to_string(),
                e["seed"].as_u64().unwrap(),
                e["success"].as_bool().unwrap(),
                e["steps"].as_u64().unwrap(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn episodes_played_side_by_side_equal_those_played_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("tiny");
    std::fs::create_dir_all(&ckpt).unwrap();
    write_tiny_checkpoint(&ckpt, 8192, &[]);
    let one = eval(
        &ckpt,
        &dir.path().join("one.json"),
        &dir.path().join("ds1"),
        "1",
    );
    let three = eval(
        &ckpt,
        &dir.path().join("three.json"),
        &dir.path().join("ds3"),
        "3",
    );
    assert_eq!(three["episodes_total"], 6);
    assert_eq!(episodes(&one), episodes(&three));
    // Grounded decoding makes the random model act: the episodes took steps.
    assert!(episodes(&three).iter().any(|e| e.3 > 0));
    let ds = Dataset::open(dir.path().join("ds3")).unwrap();
    let trajs: Vec<_> = (0..ds.trajectory_count())
        .map(|i| ds.trajectory(i).unwrap())
        .collect();
    assert_eq!(trajs.len(), 6);
    let mut ids: Vec<&str> = trajs.iter().map(|t| t.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6);
    for t in &trajs {
        for s in &t.steps {
            let shot = s
                .state
                .screenshot
                .as_deref()
                .expect("a screenshot per step");
            assert!(ds.root().join(shot).is_file(), "{shot}");
        }
    }
}
