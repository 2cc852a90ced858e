//! `rmsweb annotate export` and `rmsweb annotate counts` on a dataset with events.

use rmsweb::annotate::{AnnotationEvent, AnnotationLog, Op};
use rmsweb::mine::pair::{LabelSource, MinedPair};
use serde_json::{Value, json};
use std::process::Command;

/// Runs the binary with `args`.
pub fn rmsweb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(args)
        .output()
        .unwrap()
}

fn ev(who: &str, pair: &str, op: Op, value: Value) -> AnnotationEvent {
    AnnotationEvent::now(who, pair, op, value, Value::Null)
}

#[test]
fn export_writes_accepted_and_edited_pairs_with_corrections() {
    let d = crate::tui::dataset();
    let log = AnnotationLog::for_dataset(d.path());
    for e in [
        ev(
            "ann",
            "login-s2",
            Op::EditTarget,
            json!({"name": "input", "params": {"index": 2, "text": "x"}}),
        ),
        ev("ann", "login-s2", Op::Relabel, json!("wrong_input_value")),
        ev("ann", "search-s2", Op::Accept, Value::Null),
        ev("bob", "hostile-s0", Op::Accept, Value::Null),
        ev("bob", "hostile-s0", Op::Reject, Value::Null),
    ] {
        log.append(&e).unwrap();
    }
    let root = d.path().to_str().unwrap();
    let out = rmsweb(&["annotate", "export", root]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(d.path().join("mined/pairs.corrected.jsonl")).unwrap();
    let pairs: Vec<MinedPair> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&str> = pairs.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["login-s2", "search-s2"],
        "rejected and pending pairs are left out"
    );
    assert_eq!(pairs[0].target_action.str_param("text"), Some("x"));
    assert_eq!(pairs[0].failure_mode.category, "wrong_input_value");
    assert_eq!(pairs[0].failure_mode.source, LabelSource::Annotator);
    assert_eq!(
        pairs[1].failure_mode.source,
        LabelSource::Judge,
        "not relabelled: label kept"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("2 of 3 pairs") && stdout.contains("1 rejected"),
        "{stdout}"
    );

    // --out elsewhere; undoing bob's reject brings the pair back.
    log.append(&ev("bob", "hostile-s0", Op::Undo, json!("reject")))
        .unwrap();
    let other = d.path().join("out/c.jsonl");
    let out = rmsweb(&["annotate", "export", root, "--out", other.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(other).unwrap().lines().count(), 3);
}

#[test]
fn export_refuses_a_log_with_an_unusable_event_and_names_it() {
    let d = crate::tui::dataset();
    AnnotationLog::for_dataset(d.path())
        .append(&ev("ann", "login-s2", Op::EditTarget, json!("click it")))
        .unwrap();
    let out = rmsweb(&["annotate", "export", d.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("annotations.jsonl") && err.contains("event 1") && err.contains("edit_target"),
        "{err}"
    );
    assert!(!d.path().join("mined/pairs.corrected.jsonl").exists());
}

#[test]
fn a_malformed_log_line_is_reported_with_file_line_and_field() {
    let d = crate::tui::dataset();
    let log = AnnotationLog::for_dataset(d.path());
    log.append(&ev("ann", "login-s2", Op::Accept, Value::Null))
        .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .and_then(|mut f| {
            std::io::Write::write_all(
                &mut f,
                b"{\"ts\":\"t\",\"annotator\":\"a\",\"pair_id\":\"p\",\"op\":\"approve\"}\n",
            )
        })
        .unwrap();
    let e = log.read().unwrap_err().to_string();
    assert!(e.contains("annotations.jsonl:2: op:"), "{e}");
}

#[test]
fn counts_per_annotator_and_op() {
    let d = crate::tui::dataset();
    let log = AnnotationLog::for_dataset(d.path());
    for e in [
        ev("ann", "a", Op::Accept, Value::Null),
        ev("ann", "b", Op::Accept, Value::Null),
        ev("ann", "b", Op::Undo, json!("accept")),
        ev("bob", "a", Op::Note, json!("hm")),
    ] {
        log.append(&e).unwrap();
    }
    let out = rmsweb(&["annotate", "counts", d.path().to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({"ann": {"accept": 2, "undo": 1}, "bob": {"note": 1}})
    );
    let out = rmsweb(&["annotate", "counts", d.path().to_str().unwrap()]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("ann") && l.trim_end().ends_with('3')),
        "{table}"
    );
}

#[test]
fn two_processes_appending_at_once_keep_every_line_whole() {
    // Two real processes (this test binary re-run as a child) append concurrently.
    if let Ok(path) = std::env::var("RMSWEB_APPEND_CHILD") {
        let log = AnnotationLog::at(path.into());
        let who = std::env::var("RMSWEB_APPEND_WHO").unwrap();
        for i in 0..100 {
            let e = ev(
                &who,
                &format!("p{i}"),
                Op::Note,
                json!(format!("{who}{}", "y".repeat(30_000))),
            );
            log.append(&e).unwrap();
        }
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("annotations.jsonl");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["p1", "p2"]
        .iter()
        .map(|who| {
            Command::new(&exe)
                .args([
                    "annotate::two_processes_appending_at_once_keep_every_line_whole",
                    "--exact",
                    "--nocapture",
                ])
                .env("RMSWEB_APPEND_CHILD", &path)
                .env("RMSWEB_APPEND_WHO", who)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let ev = AnnotationLog::at(path).read().unwrap();
    assert_eq!(ev.len(), 200);
    assert!(
        ev.iter()
            .all(|e| e.value.as_str().is_some_and(|v| v.len() == 30_002))
    );
}

/// Two annotators who disagree leave the pair out of the export as a conflict (bob's
/// later reject does not silently win); a reviewer's settle decides it, and both
/// export and counts say so.
#[test]
fn conflicts_are_left_out_until_settled_and_reported() {
    let d = crate::tui::dataset();
    let log = AnnotationLog::for_dataset(d.path());
    for e in [
        ev("alice", "login-s2", Op::Accept, Value::Null),
        ev("bob", "login-s2", Op::Reject, Value::Null),
        ev("alice", "search-s2", Op::Relabel, json!("loop_stall")),
        ev("bob", "search-s2", Op::Reject, Value::Null),
        ev("carol", "search-s2", Op::Settle, json!("accept")),
    ] {
        log.append(&e).unwrap();
    }
    let root = d.path().to_str().unwrap();
    let out = rmsweb(&["annotate", "export", root]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("1 of 3 pairs")
            && stdout.contains("1 settled by a reviewer")
            && stdout.contains("1 left out unsettled"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(d.path().join("mined/pairs.corrected.jsonl")).unwrap();
    let pairs: Vec<MinedPair> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(pairs.len(), 1);
    assert_eq!(
        pairs[0].id, "search-s2",
        "the settled pair, not the conflict"
    );
    assert_eq!(pairs[0].failure_mode.category, "loop_stall");
    let counts = rmsweb(&["annotate", "counts", root]);
    let stdout = String::from_utf8_lossy(&counts.stdout);
    assert!(stdout.contains("conflicts: 1 open, 1 settled"), "{stdout}");
}
