//! JSON Lines on disk: a line-offset index (records are read and parsed only
//! when asked for), errors that name file, line and field, and crash-safe appends.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
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

/// A read-only line index over a JSON Lines file. Blank lines are skipped. A final
/// line without its newline is a record when it parses as JSON (a writer that does
/// not end its last line; the next [`append`] adds the newline), and otherwise a
/// torn append: left out and reported by [`JsonlFile::torn_tail`].
///
/// Opening reads the file once through a buffer to find line starts; records are
/// read back with positioned reads when asked for, so memory holds the index only
/// (16 bytes a record), never the file.
#[derive(Debug)]
pub struct JsonlFile {
    path: PathBuf,
    file: Option<File>,
    spans: Vec<LineSpan>,
    torn_tail: Option<u32>,
    unterminated: bool,
}

/// Bytes read at once while indexing.
const SCAN_CHUNK: usize = 1 << 20;

impl JsonlFile {
    /// Indexes `path`; a missing file is an empty one. Only a regular file is read
    /// (a FIFO or a device is refused at once, never waited on).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let empty = |file| JsonlFile {
            path: path.to_path_buf(),
            file,
            spans: Vec::new(),
            torn_tail: None,
            unterminated: false,
        };
        let mut file = match crate::util::fs::open_regular(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty(None)),
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
        };
        let (mut spans, tail) = index_lines(&mut file)
            .map_err(|e| anyhow::anyhow!("{}: reading: {e}", path.display()))?;
        let mut torn_tail = None;
        let mut unterminated = false;
        if let Some(tail) = tail {
            let parses = tail.len as usize <= MAX_RECORD_BYTES
                && read_exact_at(&file, tail.offset, tail.len as usize)
                    .is_some_and(|raw| is_complete_json(&raw));
            if parses {
                spans.push(tail);
                unterminated = true;
            } else {
                torn_tail = Some(tail.line);
            }
        }
        Ok(JsonlFile {
            spans,
            torn_tail,
            unterminated,
            ..empty(Some(file))
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

    /// The line number of an incomplete last line (one that does not parse), if the
    /// file has one.
    pub fn torn_tail(&self) -> Option<u32> {
        self.torn_tail
    }

    /// Whether the last record is complete but has no newline after it (it is read
    /// like any other; the next append adds the newline).
    pub fn last_record_unterminated(&self) -> bool {
        self.unterminated
    }

    /// Where record `i` lies.
    pub fn span(&self, i: usize) -> Option<LineSpan> {
        self.spans.get(i).copied()
    }

    /// The raw bytes of record `i` (`None` past the end or when the file cannot be read).
    pub fn raw(&self, i: usize) -> Option<Vec<u8>> {
        let s = self.spans.get(i)?;
        self.read_at(s.offset, s.len as usize)
    }

    /// At most the first `n` bytes of record `i` (cheap peeks such as the id).
    pub fn head(&self, i: usize, n: usize) -> Option<Vec<u8>> {
        let s = self.spans.get(i)?;
        self.read_at(s.offset, n.min(s.len as usize))
    }

    fn read_at(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        read_exact_at(self.file.as_ref()?, offset, len)
    }

    /// Parses record `i`.
    pub fn get<T: DeserializeOwned>(&self, i: usize) -> Result<T, RecordError> {
        let span = self
            .spans
            .get(i)
            .ok_or_else(|| RecordError::record(&self.path, 0, format!("no record number {i}")))?;
        let line = span.line as usize;
        if span.len as usize > MAX_RECORD_BYTES {
            return Err(RecordError::record(
                &self.path,
                line,
                format!(
                    "record is {} bytes, over the {} MiB limit",
                    span.len,
                    MAX_RECORD_BYTES >> 20
                ),
            ));
        }
        let raw = self
            .raw(i)
            .ok_or_else(|| RecordError::record(&self.path, line, "cannot read the record"))?;
        parse_record(&raw, &self.path, line)
    }

    /// Parses every record, in order, stopping at the first error.
    pub fn all<T: DeserializeOwned>(&self) -> Result<Vec<T>, RecordError> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
}

fn read_exact_at(file: &File, offset: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// Whether `bytes` hold exactly one complete JSON value (whitespace around it allowed).
fn is_complete_json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// Finds every non-blank line ended by a newline, reading through a buffer, and the
/// span of a non-blank last line without one.
fn index_lines(r: &mut impl Read) -> std::io::Result<(Vec<LineSpan>, Option<LineSpan>)> {
    let mut spans = Vec::new();
    let mut buf = vec![0u8; SCAN_CHUNK];
    let mut pos = 0u64; // file offset of buf[0]
    let mut start = 0u64; // offset of the current line
    let mut line = 1u32;
    let mut blank = true; // the current line so far is whitespace only
    let mut last_byte = b'\n';
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        let mut from = 0usize;
        for nl in memchr::memchr_iter(b'\n', chunk) {
            blank &= chunk[from..nl].iter().all(u8::is_ascii_whitespace);
            let end = pos + nl as u64;
            if !blank {
                // Drop a `\r` before the newline.
                let cr =
                    u64::from(nl > 0 && chunk[nl - 1] == b'\r' || nl == 0 && last_byte == b'\r');
                spans.push(LineSpan {
                    offset: start,
                    len: (end - start - cr).min(u64::from(u32::MAX)) as u32,
                    line,
                });
            }
            start = end + 1;
            line += 1;
            blank = true;
            from = nl + 1;
        }
        blank &= chunk[from..].iter().all(u8::is_ascii_whitespace);
        last_byte = chunk[n - 1];
        pos += n as u64;
    }
    let tail = (start < pos && !blank).then(|| LineSpan {
        offset: start,
        len: (pos - start).min(u64::from(u32::MAX)) as u32,
        line,
    });
    Ok((spans, tail))
}

/// The length of `record` as one JSON line, without its newline (nothing is kept).
pub fn serialized_len<T: Serialize>(record: &T) -> anyhow::Result<usize> {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, record)?;
    Ok(c.0)
}

/// The refusal of a record the reader would refuse for its size.
fn too_big(path: &Path, n: usize, len: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: record {n} would be {}, over the {} limit of a record; nothing was written",
        path.display(),
        crate::util::human_bytes(len as u64),
        crate::util::human_bytes(MAX_RECORD_BYTES as u64)
    )
}

/// Appends records to a JSON Lines file as one write under an exclusive lock, then
/// fsyncs. Every record is checked first: one the reader would refuse (over
/// [`MAX_RECORD_BYTES`]) fails the append before anything is written. A last line
/// left without its newline is settled first: a complete record gets its newline, a
/// torn one (a crash mid-append, it does not parse) is cut off, so no half-written
/// record survives and two writers never interleave partial lines.
/// Returns the number of bytes of torn tail removed (0 normally).
pub fn append<T: Serialize>(path: &Path, records: &[T]) -> anyhow::Result<u64> {
    let mut buf = Vec::new();
    for (n, r) in records.iter().enumerate() {
        let before = buf.len();
        serde_json::to_writer(&mut buf, r)?;
        if buf.len() - before > MAX_RECORD_BYTES {
            return Err(too_big(path, n + 1, buf.len() - before));
        }
        buf.push(b'\n');
    }
    append_raw(path, &buf)
}

/// Appends already serialized lines (each ending in `\n`); see [`append`].
pub fn append_raw(path: &Path, buf: &[u8]) -> anyhow::Result<u64> {
    use anyhow::Context;
    for (n, line) in buf.split_inclusive(|&b| b == b'\n').enumerate() {
        if line.len() - 1 > MAX_RECORD_BYTES {
            return Err(too_big(path, n + 1, line.len() - 1));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = crate::util::fs::open_regular_rw(path)
        .with_context(|| format!("opening {} for append", path.display()))?;
    let what = path.display().to_string();
    crate::util::lock::lock_exclusive(&file, crate::util::lock::stderr_notice(&what))
        .with_context(|| format!("locking {}", path.display()))?;
    let removed = settle_tail(&mut file)?;
    file.seek(SeekFrom::End(0))?;
    file.write_all(buf)
        .with_context(|| format!("appending to {}", path.display()))?;
    file.sync_data()
        .with_context(|| format!("syncing {}", path.display()))?;
    file.unlock().ok();
    Ok(removed)
}

/// Settles the bytes after the last newline: a complete JSON record gets its newline,
/// anything else is cut off. Returns the number of bytes cut.
fn settle_tail(file: &mut File) -> anyhow::Result<u64> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let mut pos = len;
    let mut chunk = vec![0u8; 64 * 1024];
    let keep = loop {
        let start = pos.saturating_sub(chunk.len() as u64);
        let n = (pos - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &chunk[..n]) {
            break start + i as u64 + 1;
        }
        if start == 0 {
            break 0;
        }
        pos = start;
    };
    if keep == len {
        return Ok(0);
    }
    let tail_len = len - keep;
    let tail = if tail_len <= MAX_RECORD_BYTES as u64 {
        read_exact_at(file, keep, tail_len as usize)
    } else {
        None
    };
    match tail {
        Some(t) if t.iter().all(u8::is_ascii_whitespace) => {
            file.set_len(keep)?;
            Ok(tail_len)
        }
        Some(t) if is_complete_json(&t) => {
            file.seek(SeekFrom::End(0))?;
            file.write_all(b"\n")?;
            Ok(0)
        }
        _ => {
            file.set_len(keep)?;
            Ok(tail_len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_skips_blank_lines_and_finds_the_unterminated_tail() {
        let (spans, tail) =
            index_lines(&mut &b"{\"a\":1}\n\n  \n{\"a\":2}\r\n{\"a\":"[..]).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].line, 4);
        assert_eq!(spans[1].len, 7);
        assert_eq!(tail.map(|t| (t.line, t.len)), Some((5, 5)));
    }

    /// A reader that hands out `n` bytes at a time, to cross chunk boundaries.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn index_is_the_same_whatever_the_read_sizes() {
        let text = b"{\"a\":1}\r\n  \n\n{\"bb\":22}\n \t\r\n{\"c\":3}\r\n{\"torn\"";
        let whole = index_lines(&mut &text[..]).unwrap();
        for n in 1..8 {
            assert_eq!(
                index_lines(&mut Trickle(text, n)).unwrap(),
                whole,
                "reads of {n}"
            );
        }
        let (spans, tail) = whole;
        let lens: Vec<u32> = spans.iter().map(|s| s.len).collect();
        assert_eq!(lens, vec![7, 9, 7]);
        assert_eq!(
            spans.iter().map(|s| s.line).collect::<Vec<_>>(),
            vec![1, 4, 6]
        );
        assert_eq!(tail.map(|t| t.line), Some(7));
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
    fn a_complete_last_record_without_newline_is_kept_and_terminated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"a\":2}").unwrap();
        let f = JsonlFile::open(&p).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f.torn_tail(), None);
        assert!(f.last_record_unterminated());
        assert_eq!(f.get::<serde_json::Value>(1).unwrap()["a"], 2);
        let removed = append(&p, &[serde_json::json!({"a": 3})]).unwrap();
        assert_eq!(removed, 0);
        assert_eq!(
            std::fs::read(&p).unwrap(),
            b"{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"
        );
        // A tail of blanks is not a record: it is dropped.
        std::fs::write(&p, b"{\"a\":1}\n  ").unwrap();
        assert_eq!(JsonlFile::open(&p).unwrap().len(), 1);
        append(&p, &[serde_json::json!({"a": 2})]).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n{\"a\":2}\n");
    }

    #[test]
    fn records_the_reader_would_refuse_are_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n").unwrap();
        let big = serde_json::json!({"text": "x".repeat(MAX_RECORD_BYTES)});
        let e = append(&p, &[serde_json::json!({"a": 2}), big]).unwrap_err();
        assert!(e.to_string().contains("record 2 would be 64.0 MiB"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n");
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
