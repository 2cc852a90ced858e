//! The metrics tail reader on the file changes a live run produces: a line written
//! in two pieces, a file truncated and rewritten (verl's logger on restart, our
//! resume's atomic rewrite), a file or whole run folder that disappears, and a
//! malformed line among good ones.

use rmsweb::runs::monitor::{RunsState, Watcher};
use rmsweb::runs::tail::{MetricsTail, TailState};
use std::io::Write;
use std::path::Path;

fn line(step: u64, loss: f64) -> String {
    format!("{{\"step\": {step}, \"data\": {{\"sft/loss\": {loss}}}}}\n")
}

fn append(p: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.flush().unwrap();
}

#[test]
fn a_partial_last_line_waits_for_its_newline() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("metrics.jsonl");
    let mut t = MetricsTail::new(&p);
    let full = line(1, 2.5);
    let (a, b) = full.split_at(17);
    append(&p, &line(0, 3.0));
    append(&p, a);
    let batch = t.poll();
    assert_eq!(batch.records.len(), 1, "only the complete line");
    assert!(batch.malformed.is_empty(), "the torn line is not an error");
    assert_eq!(t.poll().records.len(), 0, "still waiting");
    append(&p, b);
    let batch = t.poll();
    assert_eq!(batch.records.len(), 1);
    assert_eq!(batch.records[0].step, 1);
    assert_eq!(batch.records[0].data, vec![("sft/loss".to_string(), 2.5)]);
    assert!(!batch.reset);
}

#[test]
fn truncation_and_rewrite_are_reread_from_the_start() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("metrics.jsonl");
    for s in 1..=5 {
        append(&p, &line(s, 1.0));
    }
    let mut t = MetricsTail::new(&p);
    assert_eq!(t.poll().records.len(), 5);

    // Truncated in place and restarted (smaller than what was read).
    std::fs::write(&p, line(1, 9.0)).unwrap();
    let b = t.poll();
    assert!(b.reset);
    assert_eq!(b.records.len(), 1);
    assert_eq!(b.records[0].data[0].1, 9.0);

    // Rewritten in place to a longer file whose first bytes differ.
    let mut text = String::new();
    for s in 1..=8 {
        text.push_str(&line(s, 7.0 + s as f64));
    }
    std::fs::write(&p, &text).unwrap();
    let b = t.poll();
    assert!(b.reset, "different first bytes mean a new file");
    assert_eq!(b.records.len(), 8);

    // Atomically replaced (rename over it) with the same first lines and more.
    text.push_str(&line(9, 1.0));
    let tmp = d.path().join("metrics.jsonl.tmp");
    std::fs::write(&tmp, &text).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    let b = t.poll();
    assert!(b.reset, "another inode is another file");
    assert_eq!(b.records.len(), 9);
    assert_eq!(t.poll().records.len(), 0);

    // The monitor drops the old history on a reset.
    let run = d.path().join("runs/r");
    std::fs::create_dir_all(&run).unwrap();
    let m = run.join("metrics.jsonl");
    for s in 1..=10 {
        append(&m, &line(s, 1.0));
    }
    let mut w = Watcher::new(Some(d.path().join("runs")), &[]);
    let mut st = RunsState::default();
    st.apply(w.poll());
    assert_eq!(st.runs[0].series.last_step(), Some(10));
    std::fs::write(&m, line(1, 4.0) + &line(2, 4.0)).unwrap();
    st.apply(w.poll());
    let r = &st.runs[0];
    assert_eq!(r.series.last_step(), Some(2));
    assert_eq!(r.series.get("sft/loss").unwrap().points().len(), 2);
    assert_eq!(r.resets, 1);
}

#[test]
fn missing_file_and_vanished_folder_are_states() {
    let d = tempfile::tempdir().unwrap();
    let mut t = MetricsTail::new(d.path().join("nope/metrics.jsonl"));
    assert_eq!(t.poll().records.len(), 0);
    assert_eq!(t.state(), TailState::Missing);

    let run = d.path().join("runs/r1");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("status.json"), r#"{"state":"finished","step":2}"#).unwrap();
    let mut w = Watcher::new(Some(d.path().join("runs")), &[d.path().join("gone.jsonl")]);
    let mut st = RunsState::default();
    st.apply(w.poll());
    let r1 = st.runs.iter().find(|r| r.info.id == "r1").unwrap();
    assert_eq!(r1.tail, TailState::Waiting, "no metrics yet");
    append(&run.join("metrics.jsonl"), &line(1, 1.0));
    st.apply(w.poll());
    let r1 = st.runs.iter().find(|r| r.info.id == "r1").unwrap();
    assert_eq!(r1.tail, TailState::Live);

    std::fs::remove_file(run.join("metrics.jsonl")).unwrap();
    st.apply(w.poll());
    let r1 = st.runs.iter().find(|r| r.info.id == "r1").unwrap();
    assert_eq!(r1.tail, TailState::Vanished);
    assert!(!r1.vanished, "the folder is still there");

    std::fs::remove_dir_all(&run).unwrap();
    st.apply(w.poll());
    let r1 = st.runs.iter().find(|r| r.info.id == "r1").unwrap();
    assert!(r1.vanished);
    assert_eq!(
        r1.info.status.state.as_deref(),
        Some("finished"),
        "what was known is kept"
    );
    // The watched file that never existed is listed, waiting.
    let gone = st
        .runs
        .iter()
        .find(|r| r.info.id.ends_with("gone.jsonl"))
        .unwrap();
    assert_eq!(gone.tail, TailState::Waiting);

    // The folder comes back with a new file: read from its start.
    std::fs::create_dir_all(&run).unwrap();
    append(&run.join("metrics.jsonl"), &line(1, 5.0));
    st.apply(w.poll());
    let r1 = st.runs.iter().find(|r| r.info.id == "r1").unwrap();
    assert!(!r1.vanished);
    assert_eq!(r1.series.latest("sft/loss"), Some(5.0));
}

#[test]
fn malformed_lines_are_counted_with_their_line_number() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("metrics.jsonl");
    append(&p, &line(1, 1.0));
    append(&p, "{\"step\": 2, \"data\": {\"sft/loss\": \n");
    append(&p, "{\"step\": \"three\", \"data\": {}}\n");
    append(&p, "\n");
    append(&p, &line(4, 0.5));
    let mut t = MetricsTail::new(&p);
    let b = t.poll();
    assert_eq!(
        b.records.iter().map(|r| r.step).collect::<Vec<_>>(),
        vec![1, 4]
    );
    assert_eq!(b.malformed.len(), 2);
    assert_eq!(b.malformed[0].line, 2);
    assert_eq!(b.malformed[1].line, 3);
    assert!(
        b.malformed[1].error.contains("`step`"),
        "{}",
        b.malformed[1].error
    );
    let shown = b.malformed[0].to_string();
    assert!(shown.contains("metrics.jsonl:2"), "{shown}");
    assert_eq!(t.malformed_total(), 2);
}
