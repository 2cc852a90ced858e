//! Incremental reader of a `metrics.jsonl` file (FORMATS.md, verl's file-logger
//! line format `{"step": N, "data": {"key": value, ...}}`).
//!
//! Each [`MetricsTail::poll`] reads only the bytes appended since the last call. A
//! last line without its newline stays pending until the newline arrives. A file
//! that was truncated or rewritten (smaller than the offset, another inode — an
//! atomic rename — or different first bytes) is reread from the start and the
//! caller is told to drop what it had ([`Batch::reset`]). A missing file or folder
//! is a [`TailState`], never an error; malformed lines are counted and reported
//! with their line number and do not stop the reader.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How many leading bytes are remembered to notice a rewrite in place.
const HEAD_LEN: usize = 256;
/// The most bytes read in one poll (a huge file is ingested over several polls,
/// so one poll never holds the whole file in memory).
const MAX_READ: usize = 1 << 20;

/// One metrics line: the optimizer step and its numeric values. Booleans count as
/// 0/1; nested objects and short lists are flattened into `key/sub` and `key/0`
/// keys; a null, NaN or infinite value (verl's file logger writes NaN as `null`,
/// Python's `json` writes `NaN`) is a gap; text and long lists are skipped and named.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    pub step: u64,
    pub data: Vec<(String, f64)>,
    /// Keys whose value was null, NaN or infinite this step.
    pub gaps: Vec<String>,
    /// Keys whose value is not a number (text, a list longer than [`MAX_LIST`]).
    pub skipped: Vec<String>,
}

/// Lists up to this long are flattened (`key/0`, `key/1`, ...); longer ones are skipped.
pub const MAX_LIST: usize = 16;
/// Nesting deeper than this is skipped.
const MAX_DEPTH: usize = 4;

fn flatten(prefix: &str, v: &serde_json::Value, depth: usize, r: &mut Record) {
    use serde_json::Value;
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.is_finite() => r.data.push((prefix.to_string(), x)),
            _ => r.gaps.push(prefix.to_string()),
        },
        Value::Bool(b) => r.data.push((prefix.to_string(), f64::from(u8::from(*b)))),
        Value::Null => r.gaps.push(prefix.to_string()),
        Value::String(t) => {
            let t = t.trim().to_ascii_lowercase();
            if matches!(
                t.as_str(),
                "nan" | "inf" | "-inf" | "infinity" | "-infinity"
            ) {
                r.gaps.push(prefix.to_string());
            } else {
                r.skipped.push(prefix.to_string());
            }
        }
        Value::Object(m) if depth < MAX_DEPTH => {
            for (k, x) in m {
                flatten(&format!("{prefix}/{k}"), x, depth + 1, r);
            }
        }
        Value::Array(a) if depth < MAX_DEPTH && a.len() <= MAX_LIST => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{prefix}/{i}"), x, depth + 1, r);
            }
        }
        _ => r.skipped.push(prefix.to_string()),
    }
}

/// `text` with the bare `NaN`, `Infinity` and `-Infinity` tokens that Python's
/// `json` writes (outside strings) turned into `null`; None when there are none.
fn python_nans_to_null(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut last, mut found) = (0, 0, false);
    while i < b.len() {
        match b[i] {
            b'"' => {
                // Skip the string, escapes included.
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'N' | b'I' | b'-' => {
                let rest = &text[i..];
                let tok = ["-Infinity", "Infinity", "NaN"]
                    .into_iter()
                    .find(|t| rest.starts_with(t));
                if let Some(t) = tok {
                    out.push_str(&text[last..i]);
                    out.push_str("null");
                    i += t.len();
                    last = i;
                    found = true;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    found.then(|| {
        out.push_str(&text[last..]);
        out
    })
}

/// A line that could not be read, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub file: PathBuf,
    pub line: u64,
    pub error: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.error)
    }
}

/// Where the file stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailState {
    /// Not created yet (its folder exists).
    Waiting,
    /// Read up to the end.
    Live,
    /// The file, or its folder, disappeared after it had been read.
    Vanished,
    /// Its folder does not exist and never did while watched.
    Missing,
}

/// What one poll found.
#[derive(Debug, Default)]
pub struct Batch {
    /// The file was truncated or rewritten: drop everything read before; `records`
    /// start again from the file's first line.
    pub reset: bool,
    pub records: Vec<Record>,
    pub malformed: Vec<Malformed>,
    /// Modification time of the file when this batch was read.
    pub mtime: Option<SystemTime>,
    /// More bytes are waiting (the read was capped); poll again soon.
    pub more: bool,
}

/// An incremental reader of one metrics file.
#[derive(Debug)]
pub struct MetricsTail {
    path: PathBuf,
    offset: u64,
    inode: Option<u64>,
    head: Vec<u8>,
    pending: Vec<u8>,
    /// Line number of the first byte of `pending`.
    line: u64,
    state: TailState,
    seen: bool,
    /// The file vanished after being read: whatever appears next is a new file.
    reset_pending: bool,
    malformed_total: u64,
}

impl MetricsTail {
    /// A reader of `path`, positioned at its start.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        MetricsTail {
            path: path.into(),
            offset: 0,
            inode: None,
            head: Vec::new(),
            pending: Vec::new(),
            line: 1,
            state: TailState::Waiting,
            seen: false,
            reset_pending: false,
            malformed_total: 0,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state after the latest poll.
    pub fn state(&self) -> TailState {
        self.state
    }

    /// Bytes consumed so far (complete lines only).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Malformed lines seen since the file was last (re)started.
    pub fn malformed_total(&self) -> u64 {
        self.malformed_total
    }

    fn restart(&mut self) {
        self.offset = 0;
        self.inode = None;
        self.head.clear();
        self.pending.clear();
        self.line = 1;
        self.malformed_total = 0;
    }

    /// Reads what was appended since the last poll.
    pub fn poll(&mut self) -> Batch {
        let mut batch = Batch::default();
        let (mut file, meta) = match File::open(&self.path).and_then(|f| {
            let m = f.metadata()?;
            Ok((f, m))
        }) {
            Ok(x) => x,
            Err(_) => {
                let folder_exists = self.path.parent().is_none_or(|p| p.is_dir());
                self.state = match (self.seen, folder_exists) {
                    (true, _) => TailState::Vanished,
                    (false, true) => TailState::Waiting,
                    (false, false) => TailState::Missing,
                };
                if self.seen && (self.offset > 0 || !self.pending.is_empty()) {
                    // Keep what was read on screen; whatever comes back is new.
                    self.restart();
                    self.reset_pending = true;
                }
                return batch;
            }
        };
        self.seen = true;
        self.state = TailState::Live;
        batch.mtime = meta.modified().ok();
        let rewritten = meta.len() < self.offset
            || self.inode.is_some_and(|i| i != meta.ino())
            || (!self.head.is_empty() && !self.head_matches(&mut file));
        if rewritten {
            self.restart();
            batch.reset = true;
        }
        if std::mem::take(&mut self.reset_pending) {
            batch.reset = true;
        }
        self.inode = Some(meta.ino());
        let start = self.offset + self.pending.len() as u64;
        if meta.len() <= start {
            return batch;
        }
        let want = ((meta.len() - start) as usize).min(MAX_READ);
        let mut buf = Vec::with_capacity(want);
        if file.seek(SeekFrom::Start(start)).is_err()
            || (&mut file).take(want as u64).read_to_end(&mut buf).is_err()
        {
            return batch;
        }
        batch.more = (start + buf.len() as u64) < meta.len();
        if self.head.len() < HEAD_LEN && start < HEAD_LEN as u64 {
            let take = (HEAD_LEN - self.head.len()).min(buf.len());
            if start as usize == self.head.len() {
                self.head.extend_from_slice(&buf[..take]);
            }
        }
        self.pending.extend_from_slice(&buf);
        self.consume_lines(&mut batch);
        batch
    }

    fn head_matches(&self, file: &mut File) -> bool {
        let mut now = vec![0u8; self.head.len()];
        file.seek(SeekFrom::Start(0)).is_ok()
            && file.read_exact(&mut now).is_ok()
            && now == self.head
    }

    fn consume_lines(&mut self, batch: &mut Batch) {
        let Some(last_nl) = memchr::memrchr(b'\n', &self.pending) else {
            return;
        };
        let complete: Vec<u8> = self.pending.drain(..=last_nl).collect();
        self.offset += complete.len() as u64;
        for raw in complete[..complete.len() - 1].split(|&b| b == b'\n') {
            let n = self.line;
            self.line += 1;
            let text = String::from_utf8_lossy(raw);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            match parse_line(text) {
                Ok(r) => batch.records.push(r),
                Err(error) => {
                    self.malformed_total += 1;
                    batch.malformed.push(Malformed {
                        file: self.path.clone(),
                        line: n,
                        error,
                    });
                }
            }
        }
    }
}

/// Parses one metrics line; the error names the field at fault.
pub fn parse_line(text: &str) -> Result<Record, String> {
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => python_nans_to_null(text)
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| format!("not JSON: {e}"))?,
    };
    let obj = v
        .as_object()
        .ok_or_else(|| format!("expected an object, found {}", crate::util::json_kind(&v)))?;
    let step = match obj.get("step") {
        Some(s) => s
            .as_u64()
            .or_else(|| {
                s.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| format!("field `step`: expected a non-negative integer, found {s}"))?,
        None => return Err("field `step`: missing".into()),
    };
    let mut r = Record {
        step,
        ..Default::default()
    };
    match obj.get("data") {
        Some(serde_json::Value::Object(m)) => {
            for (k, v) in m {
                flatten(k, v, 0, &mut r);
            }
        }
        Some(other) => {
            return Err(format!(
                "field `data`: expected an object, found {}",
                crate::util::json_kind(other)
            ));
        }
        None => return Err("field `data`: missing".into()),
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn parse_line_names_the_field() {
        let r = parse_line(r#"{"step": 3, "data": {"a": 1.5, "b": true, "c": "x"}}"#).unwrap();
        assert_eq!(r.step, 3);
        assert_eq!(r.data, vec![("a".into(), 1.5), ("b".into(), 1.0)]);
        assert_eq!(r.skipped, vec!["c".to_string()]);
        assert!(
            parse_line(r#"{"data": {}}"#)
                .unwrap_err()
                .contains("`step`")
        );
        assert!(
            parse_line(r#"{"step": -1, "data": {}}"#)
                .unwrap_err()
                .contains("`step`")
        );
        assert!(
            parse_line(r#"{"step": 1, "data": 2}"#)
                .unwrap_err()
                .contains("`data`")
        );
        assert!(parse_line("[1]").unwrap_err().contains("object"));
    }

    #[test]
    fn gaps_nested_values_and_python_nans() {
        // verl (orjson) writes NaN as null; nested dicts and short lists flatten.
        let r = parse_line(
            r#"{"step": 1, "data": {"x": null, "d": {"a": 1, "b": {"c": 2}}, "l": [1, 2], "big": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0], "s": "nan"}}"#,
        )
        .unwrap();
        assert_eq!(
            r.data,
            vec![
                ("d/a".into(), 1.0),
                ("d/b/c".into(), 2.0),
                ("l/0".into(), 1.0),
                ("l/1".into(), 2.0)
            ]
        );
        assert_eq!(r.gaps, vec!["s".to_string(), "x".to_string()]);
        assert_eq!(r.skipped, vec!["big".to_string()]);
        // Python's json writes bare NaN / Infinity (not JSON); a "NaN" inside a string stays.
        let r = parse_line(
            r#"{"step": 2, "data": {"a": NaN, "b": -Infinity, "c": 1, "t": "NaN here"}}"#,
        )
        .unwrap();
        assert_eq!(r.data, vec![("c".into(), 1.0)]);
        assert_eq!(r.gaps, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(r.skipped, vec!["t".to_string()]);
        assert!(parse_line(r#"{"step": 2, "data": {"a": Nope}}"#).is_err());
    }

    #[test]
    fn reads_only_appended_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("metrics.jsonl");
        let mut t = MetricsTail::new(&p);
        assert_eq!(t.poll().records.len(), 0);
        assert_eq!(t.state(), TailState::Waiting);
        let mut f = std::fs::File::create(&p).unwrap();
        writeln!(f, r#"{{"step": 1, "data": {{"x": 1}}}}"#).unwrap();
        let b = t.poll();
        assert_eq!(b.records.len(), 1);
        assert!(!b.reset);
        writeln!(f, r#"{{"step": 2, "data": {{"x": 2}}}}"#).unwrap();
        let b = t.poll();
        assert_eq!(b.records.len(), 1);
        assert_eq!(b.records[0].step, 2);
        assert_eq!(t.poll().records.len(), 0);
    }

    #[test]
    fn a_file_bigger_than_one_read_arrives_whole_over_several_polls() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("metrics.jsonl");
        let mut text = String::new();
        let n = 3 * MAX_READ / 40;
        for s in 0..n {
            text.push_str(&format!("{{\"step\": {s}, \"data\": {{\"x\": {s}}}}}\n"));
        }
        std::fs::write(&p, &text).unwrap();
        let mut t = MetricsTail::new(&p);
        let (mut steps, mut polls) = (Vec::new(), 0);
        loop {
            let b = t.poll();
            polls += 1;
            assert!(
                b.malformed.is_empty(),
                "a line cut between reads is kept whole"
            );
            steps.extend(b.records.iter().map(|r| r.step));
            if !b.more {
                break;
            }
        }
        assert!(polls >= 3, "{polls} polls");
        assert_eq!(steps, (0..n as u64).collect::<Vec<_>>());
        assert_eq!(t.offset(), text.len() as u64);
    }
}
