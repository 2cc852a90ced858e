//! Small helpers shared by every stage.

pub mod duration;
pub mod fs;
pub mod image;
pub mod json;
pub mod kappa;
pub mod lines;
pub mod lock;
pub mod new_folder;
pub mod report;
pub mod sanitize;
pub mod sorted_set;
pub mod toml_keys;
pub mod user_data;

/// Reads a JSON file; errors name the file, and the line and column of bad JSON.
pub fn read_json_file(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    let text = fs::read_record(path).context("reading a JSON file")?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: invalid JSON at line {}, column {}: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// A TOML error of `text` on one short line: `line L, column C: message`, the
/// message quoted at most 200 bytes (toml's own rendering repeats the whole source
/// line, which may be megabytes).
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = sanitize::excerpt(e.message().trim());
    match e.span() {
        Some(span) => {
            let at = span.start.min(text.len());
            let before = text.as_bytes()[..at].iter();
            let line = 1 + before.clone().filter(|&&b| b == b'\n').count();
            let column = 1 + before.rev().take_while(|&&b| b != b'\n').count();
            format!("line {line}, column {column}: {message}")
        }
        // The one error toml gives without a place: a key of 80 parts or more.
        None if message == "recursion limit" => {
            "a dotted key or nesting 80 levels deep or more (the TOML reader's limit)".into()
        }
        None => message,
    }
}

/// Deserializes TOML `text`; an error names the field and quotes at most 200
/// bytes, with its line and column when `lines` (a file someone wrote) and without
/// them for text rmsweb put together itself (`--set` overrides), whose lines point
/// nowhere the user can see.
pub fn from_toml_text<T: serde::de::DeserializeOwned>(
    text: &str,
    lines: bool,
) -> anyhow::Result<T> {
    let say = |e: &toml::de::Error| {
        if lines {
            toml_error(text, e)
        } else {
            sanitize::excerpt(e.message().trim())
        }
    };
    let de = toml::Deserializer::parse(text).map_err(|e| anyhow::anyhow!("{}", say(&e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = sanitize::excerpt(&e.path().to_string());
        anyhow::anyhow!("field `{field}`: {}", say(e.inner()))
    })
}

/// "a string", "a list", ... for messages about a JSON value of the wrong type.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A byte count for messages: `512 B`, `34.0 MiB`, `1.2 GiB` (whole units without decimals).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn toml_errors_are_one_short_line() {
        let text = format!("a = 1\nb = \"{}\x1b\"\n", "x".repeat(1 << 20));
        let e = toml::from_str::<toml::Table>(&text).unwrap_err();
        let m = super::toml_error(&text, &e);
        assert!(m.starts_with("line 2, column "), "{m}");
        assert!(m.len() < 300 && !m.contains('\x1b'), "{m}");
        let deep = format!("{} = 1\n", vec!["k"; 100].join("."));
        let e = toml::from_str::<toml::Table>(&deep).unwrap_err();
        assert!(super::toml_error(&deep, &e).contains("80 levels"));
    }

    #[test]
    fn byte_counts_read_naturally() {
        assert_eq!(super::human_bytes(4), "4 B");
        assert_eq!(super::human_bytes(64 << 20), "64 MiB");
        assert_eq!(super::human_bytes(71_303_168 + 512 * 1024), "68.5 MiB");
    }
}
