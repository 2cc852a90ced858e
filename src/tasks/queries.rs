//! The query file of `tasks generate`: one query a line, or JSON Lines of
//! `{"id": ..., "query": ...}` (a line starting with `{` is read as JSON). Blank
//! lines are skipped; a query without an id gets `q{line}`.

use crate::trajectory::import::{ImportError, read_input};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// Largest query file read (bytes).
pub const MAX_QUERY_FILE_BYTES: u64 = 64 << 20;
/// Largest query (bytes); longer ones are refused with their line.
pub const MAX_QUERY_BYTES: usize = 4096;

/// One search query to turn into tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub id: String,
    pub text: String,
    /// 1-based line in the file.
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    #[serde(default)]
    id: Option<serde_json::Value>,
    query: String,
}

/// A line's id and query: a JSON record (`id` text or a number, `q<line>` when
/// absent), or the line itself as the query; `Err((field, message))` when the record
/// is bad.
fn query_of(trimmed: &str, path: &Path, line: usize) -> Result<(String, String), (String, String)> {
    if !trimmed.starts_with('{') {
        return Ok((format!("q{line}"), trimmed.to_string()));
    }
    let r = crate::trajectory::jsonl::parse_record::<Record>(trimmed.as_bytes(), path, line)
        .map_err(|e| (e.field, e.message))?;
    let id = match r.id {
        None => format!("q{line}"),
        Some(serde_json::Value::String(s)) => s,
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err((
                "id".into(),
                format!("expected text or a number, found {other}"),
            ));
        }
    };
    Ok((id, r.query))
}

/// Reads the queries; every bad line is reported with its line and field, and
/// duplicate ids with both lines.
pub fn read_queries(path: &Path) -> Result<Vec<Query>, Vec<ImportError>> {
    let err = |line: usize, field: &str, message: String| ImportError {
        file: path.to_path_buf(),
        location: format!("line {line}"),
        field: field.into(),
        message,
    };
    let bytes = read_input(path, MAX_QUERY_FILE_BYTES).map_err(|e| vec![e])?;
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            return Err(vec![err(line, "(text)", "not UTF-8".into())]);
        }
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.len() > MAX_QUERY_BYTES {
            errors.push(err(
                line,
                "query",
                format!(
                    "{} bytes, over the {MAX_QUERY_BYTES}-byte limit",
                    trimmed.len()
                ),
            ));
            continue;
        }
        let (id, query) = match query_of(trimmed, path, line) {
            Ok(q) => q,
            Err((field, message)) => {
                errors.push(err(line, &field, message));
                continue;
            }
        };
        if query.trim().is_empty() {
            errors.push(err(line, "query", "empty query".into()));
            continue;
        }
        if let Some(&prev) = first.get(&id) {
            errors.push(err(
                line,
                "id",
                format!("duplicate query id `{id}` (first on line {prev})"),
            ));
            continue;
        }
        first.insert(id.clone(), line);
        out.push(Query {
            id,
            text: query.trim().to_string(),
            line,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_json_lines_mix_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.txt");
        std::fs::write(
            &p,
            "cheap flights to rome\n\n{\"id\": 7, \"query\": \"best lasagna recipe\"}\n",
        )
        .unwrap();
        let q = read_queries(&p).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].id.as_str(), q[0].line), ("q1", 1));
        assert_eq!(
            (q[1].id.as_str(), q[1].text.as_str()),
            ("7", "best lasagna recipe")
        );

        std::fs::write(&p, "{\"id\": \"a\", \"query\": \"x\"}\n{\"id\": \"a\", \"query\": \"y\"}\n{\"id\": \"b\"}\n").unwrap();
        let e = read_queries(&p).unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(
            (e[0].location.as_str(), e[0].field.as_str()),
            ("line 2", "id")
        );
        assert_eq!(e[1].location, "line 3");
        assert!(e[1].message.contains("query"), "{e:?}");
    }
}
