//! Small helpers shared by every stage.

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
