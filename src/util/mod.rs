//! Small helpers shared by every stage.

pub mod fs;
pub mod image;
pub mod json;
pub mod lines;
pub mod lock;
pub mod new_folder;
pub mod report;
pub mod sanitize;

/// Reads a JSON file; errors name the file, and the line and column of bad JSON.
pub fn read_json_file(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: invalid JSON at line {}, column {}: {e}",
            path.display(),
            e.line(),
            e.column()
        )
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
    fn byte_counts_read_naturally() {
        assert_eq!(super::human_bytes(4), "4 B");
        assert_eq!(super::human_bytes(64 << 20), "64 MiB");
        assert_eq!(super::human_bytes(71_303_168 + 512 * 1024), "68.5 MiB");
    }
}
