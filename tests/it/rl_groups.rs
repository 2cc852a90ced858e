//! `rmsweb rl groups` per FORMATS.md.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

fn run(input: &str, extra: &[&str]) -> (bool, Vec<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["rl", "groups", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.success(), lines)
}

#[test]
fn decisions_advantages_and_salvage_summary() {
    let mut input = String::new();
    input.push_str("{\"group\": \"acc\", \"rewards\": [1, 0, 0, 0]}\n");
    input.push_str("{\"group\": \"flat\", \"rewards\": [0.7, 0.7, 0.7, 0.7]}\n");
    input.push_str("{\"group\": \"weak\", \"rewards\": [0.3, 0, 0.3, 0]}\n");
    // 15 more std-gated groups → D = 17 rejected → S = 16
    for i in 0..15 {
        input.push_str(&format!("{{\"group\": {i}, \"rewards\": [0, 0]}}\n"));
    }
    let (ok, lines) = run(&input, &[]);
    assert!(ok);
    assert_eq!(lines.len(), 19);
    assert_eq!(lines[0]["decision"], "accepted");
    let adv = lines[0]["advantages"].as_array().unwrap();
    assert!((adv[0].as_f64().unwrap() - 1.5).abs() < 1e-5);
    assert!((adv[1].as_f64().unwrap() + 0.5).abs() < 1e-5);
    assert_eq!(lines[1]["decision"], "std_gate");
    assert!(lines[1].get("advantages").is_none());
    assert_eq!(lines[2]["decision"], "competence_gate");
    assert_eq!(lines[3]["group"], 0);
    let s = &lines[18]["summary"];
    assert_eq!(s["groups"], 18);
    assert_eq!(s["accepted"], 1);
    assert_eq!(s["std_gate"], 16);
    assert_eq!(s["competence_gate"], 1);
    assert_eq!(s["salvage"], 16);
}

#[test]
fn thresholds_and_modes_change_the_gates() {
    let input = "{\"group\": \"g\", \"rewards\": [0.3, 0, 0.3, 0]}\n";
    let (_, lines) = run(input, &["--r-comp", "0.3"]);
    assert_eq!(lines[0]["decision"], "accepted");
    let (_, lines) = run(input, &["--eps-sigma", "0.2"]);
    assert_eq!(lines[0]["decision"], "std_gate");
    let (_, lines) = run(input, &["--mode", "dapo"]);
    assert_eq!(lines[0]["decision"], "accepted");
    assert_eq!(lines[1]["summary"]["salvage"], 0);
}

#[test]
fn a_malformed_line_is_reported_and_the_rest_still_decided() {
    let input = "{\"group\": 1, \"rewards\": [1, 0]}\nnot json\n{\"group\": 2, \"rewards\": [1, \"x\"]}\n{\"group\": 3, \"rewards\": []}\n";
    let (ok, lines) = run(input, &[]);
    assert!(!ok);
    assert_eq!(lines[0]["decision"], "accepted");
    assert_eq!(lines[1]["line"], 2);
    assert!(lines[1]["error"].as_str().unwrap().contains("not JSON"));
    assert!(lines[2]["error"].as_str().unwrap().contains("rewards[1]"));
    assert_eq!(lines[3]["line"], 4);
    assert_eq!(lines[4]["summary"]["groups"], 1);
}
