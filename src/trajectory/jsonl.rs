//! JSON Lines on disk: a line-offset index (records are read and parsed only
//! when asked for), errors that name file, line and field, and crash-safe appends.

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
}

/// Bytes read at once while indexing.
const SCAN_CHUNK: usize = 1 << 20;

impl JsonlFile {
    /// Indexes `path`; a missing file is an empty one.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let empty = |file| JsonlFile {
            path: path.to_path_buf(),
            file,
            spans: Vec::new(),
            torn_tail: None,
        };
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty(None)),
            Err(e) => return Err(anyhow::anyhow!("{}: {e}", path.display())),
        };
        let (spans, torn_tail) = index_lines(&mut file)
            .map_err(|e| anyhow::anyhow!("{}: reading: {e}", path.display()))?;
        Ok(JsonlFile {
            spans,
            torn_tail,
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

    /// The line number of an incomplete last line, if the file has one.
    pub fn torn_tail(&self) -> Option<u32> {
        self.torn_tail
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
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        self.file.as_ref()?.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
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

/// Finds every non-blank complete line, reading through a buffer.
fn index_lines(r: &mut impl Read) -> std::io::Result<(Vec<LineSpan>, Option<u32>)> {
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
    let torn = (start < pos && !blank).then_some(line);
    Ok((spans, torn))
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

/// A temporary file in `dir` created with mode 0666 less the umask, as any new file
/// (tempfile's default, 0600, would leave every output file private to its owner).
fn temp_file_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let mut b = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b.tempfile_in(dir)
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
    let mut tmp =
        temp_file_in(dir).with_context(|| format!("temporary file in {}", dir.display()))?;
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

    #[cfg(unix)]
    #[test]
    fn atomic_writes_get_the_mode_of_any_new_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        // A file created plainly gets 0666 less the umask; so must an atomic write.
        let plain = d.path().join("plain");
        File::create(&plain).unwrap();
        let atomic = d.path().join("atomic.json");
        write_atomic(&atomic, b"{}").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
        assert_eq!(std::fs::read(&atomic).unwrap(), b"{}");
    }

    #[test]
    fn index_skips_blank_lines_and_reports_torn_tail() {
        let (spans, torn) =
            index_lines(&mut &b"{\"a\":1}\n\n  \n{\"a\":2}\r\n{\"a\":"[..]).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].line, 4);
        assert_eq!(spans[1].len, 7);
        assert_eq!(torn, Some(5));
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
        let (spans, torn) = whole;
        let lens: Vec<u32> = spans.iter().map(|s| s.len).collect();
        assert_eq!(lens, vec![7, 9, 7]);
        assert_eq!(
            spans.iter().map(|s| s.line).collect::<Vec<_>>(),
            vec![1, 4, 6]
        );
        assert_eq!(torn, Some(7));
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
