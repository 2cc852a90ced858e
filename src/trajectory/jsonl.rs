//! JSON Lines on disk: a line-offset index over a memory map (records are parsed only
//! when asked for), errors that name file, line and field, and crash-safe appends.

use memmap2::Mmap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Records longer than this are refused rather than parsed.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// A record that could not be read, with where it is and which field is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: {field}: {message}", file.display())]
pub struct RecordError {
    pub file: PathBuf,
    /// 1-based line number (or history item number, for imports).
    pub line: usize,
    /// Dotted path of the offending field (`steps[3].state.url`), or `(record)`.
    pub field: String,
    pub message: String,
}

impl RecordError {
    /// An error about a whole record.
    pub fn record(file: &Path, line: usize, message: impl Into<String>) -> Self {
        RecordError {
            file: file.to_path_buf(),
            line,
            field: "(record)".into(),
            message: message.into(),
        }
    }
}

/// Parses one JSON record, reporting the path of the field that failed.
/// A record carrying `"schema"` with a major version other than 1 is refused.
pub fn parse_record<T: DeserializeOwned>(
    bytes: &[u8],
    file: &Path,
    line: usize,
) -> Result<T, RecordError> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(RecordError::record(
            file,
            line,
            format!(
                "record is {} bytes, over the {} MiB limit",
                bytes.len(),
                MAX_RECORD_BYTES >> 20
            ),
        ));
    }
    if memchr::memmem::find(bytes, b"\"schema\"").is_some() {
        check_schema(bytes, file, line)?;
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        RecordError {
            file: file.to_path_buf(),
            line,
            field: if field == "." || field.is_empty() {
                "(record)".into()
            } else {
                field
            },
            message: inner.to_string(),
        }
    })?;
    Ok(value)
}

fn check_schema(bytes: &[u8], file: &Path, line: usize) -> Result<(), RecordError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(default)]
        schema: Option<serde_json::Value>,
    }
    // A malformed record is reported by the typed parse that follows.
    let Ok(probe) = serde_json::from_slice::<Probe>(bytes) else {
        return Ok(());
    };
    match probe.schema {
        None => Ok(()),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(1) => Ok(()),
        Some(other) => Err(RecordError {
            file: file.to_path_buf(),
            line,
            field: "schema".into(),
            message: format!(
                "schema version {other} is not supported by this rmsweb (it reads schema 1)"
            ),
        }),
    }
}

/// Where one record lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSpan {
    pub offset: u64,
    pub len: u32,
    /// 1-based line number in the file.
    pub line: u32,
}

/// A read-only line index over a JSON Lines file. Blank lines are skipped; a final
/// line without its newline (a torn append) is left out and reported.
#[derive(Debug)]
pub struct JsonlFile {
    path: PathBuf,
    map: Option<Mmap>,
    spans: Vec<LineSpan>,
    torn_tail: Option<u32>,
}

impl JsonlFile {
    /// Indexes `path`; a missing file is an empty one.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(JsonlFile {
                    path: path.to_path_buf(),
                    map: None,
                    spans: Vec::new(),
                    torn_tail: None,
                });
            }
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
        };
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(JsonlFile {
                path: path.to_path_buf(),
                map: None,
                spans: Vec::new(),
                torn_tail: None,
            });
        }
        // SAFETY: the file is only ever appended to (never rewritten in place) by
        // rmsweb; the index covers the length seen at open.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| anyhow::anyhow!("{}: cannot map: {e}", path.display()))?;
        let (spans, torn_tail) = index_lines(&map);
        Ok(JsonlFile {
            path: path.to_path_buf(),
            map: Some(map),
            spans,
            torn_tail,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of records (non-blank complete lines).
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the file holds no records.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The line number of an incomplete last line, if the file has one.
    pub fn torn_tail(&self) -> Option<u32> {
        self.torn_tail
    }

    /// Where record `i` lies.
    pub fn span(&self, i: usize) -> Option<LineSpan> {
        self.spans.get(i).copied()
    }

    /// The raw bytes of record `i`.
    pub fn raw(&self, i: usize) -> Option<&[u8]> {
        let s = self.spans.get(i)?;
        let map = self.map.as_ref()?;
        Some(&map[s.offset as usize..s.offset as usize + s.len as usize])
    }

    /// Parses record `i`.
    pub fn get<T: DeserializeOwned>(&self, i: usize) -> Result<T, RecordError> {
        let span = self
            .spans
            .get(i)
            .ok_or_else(|| RecordError::record(&self.path, 0, format!("no record number {i}")))?;
        let raw = self.raw(i).unwrap_or_default();
        parse_record(raw, &self.path, span.line as usize)
    }

    /// Parses every record, in order, stopping at the first error.
    pub fn all<T: DeserializeOwned>(&self) -> Result<Vec<T>, RecordError> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

fn index_lines(bytes: &[u8]) -> (Vec<LineSpan>, Option<u32>) {
    let mut spans = Vec::new();
    let mut start = 0usize;
    let mut line = 1u32;
    for nl in memchr::memchr_iter(b'\n', bytes) {
        push_span(&mut spans, bytes, start, nl, line);
        start = nl + 1;
        line += 1;
    }
    let torn = (start < bytes.len() && !bytes[start..].iter().all(u8::is_ascii_whitespace))
        .then_some(line);
    (spans, torn)
}

fn push_span(spans: &mut Vec<LineSpan>, bytes: &[u8], start: usize, end: usize, line: u32) {
    let body = &bytes[start..end];
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    if body.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    spans.push(LineSpan {
        offset: start as u64,
        len: body.len().min(u32::MAX as usize) as u32,
        line,
    });
}

/// Appends records to a JSON Lines file as one write under an exclusive lock, then
/// fsyncs. A torn last line left by an earlier crash is cut off first, so no
/// half-written record survives and two writers never interleave partial lines.
/// Returns the number of bytes of torn tail removed (0 normally).
pub fn append<T: Serialize>(path: &Path, records: &[T]) -> anyhow::Result<u64> {
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r)?;
        buf.push(b'\n');
    }
    append_raw(path, &buf)
}

/// Appends already serialized lines (each ending in `\n`); see [`append`].
pub fn append_raw(path: &Path, buf: &[u8]) -> anyhow::Result<u64> {
    use anyhow::Context;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("opening {} for append", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    let removed = cut_torn_tail(&mut file)?;
    file.seek(SeekFrom::End(0))?;
    file.write_all(buf)
        .with_context(|| format!("appending to {}", path.display()))?;
    file.sync_data()
        .with_context(|| format!("syncing {}", path.display()))?;
    file.unlock().ok();
    Ok(removed)
}

fn cut_torn_tail(file: &mut File) -> anyhow::Result<u64> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let mut pos = len;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let start = pos.saturating_sub(chunk.len() as u64);
        let n = (pos - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &chunk[..n]) {
            let keep = start + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(len - keep);
        }
        if start == 0 {
            file.set_len(0)?;
            return Ok(len);
        }
        pos = start;
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync,
/// rename, then fsync of the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("renaming into {}", path.display()))?;
    if let Ok(d) = File::open(dir) {
        d.sync_all().ok();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_skips_blank_lines_and_reports_torn_tail() {
        let (spans, torn) = index_lines(b"{\"a\":1}\n\n  \n{\"a\":2}\r\n{\"a\":");
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].line, 4);
        assert_eq!(spans[1].len, 7);
        assert_eq!(torn, Some(5));
    }

    #[test]
    fn errors_name_line_and_field() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct R {
            inner: Vec<I>,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct I {
            n: u32,
        }
        let e = parse_record::<R>(br#"{"inner":[{"n":1},{"n":"x"}]}"#, Path::new("f.jsonl"), 7)
            .unwrap_err();
        assert_eq!(e.line, 7);
        assert_eq!(e.field, "inner[1].n");
        assert!(e.to_string().starts_with("f.jsonl:7: inner[1].n:"));
    }

    #[test]
    fn unknown_schema_is_refused() {
        let e =
            parse_record::<serde_json::Value>(br#"{"schema":2}"#, Path::new("f"), 1).unwrap_err();
        assert_eq!(e.field, "schema");
    }

    #[test]
    fn append_cuts_a_torn_tail_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"a\":").unwrap();
        let removed = append(&p, &[serde_json::json!({"a": 2})]).unwrap();
        assert_eq!(removed, 5);
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n{\"a\":2}\n");
    }
}
