//! The generator's prompt (versioned: a new wording is a new version, so cached
//! answers of the old one are not reused) and the reading of its answer.

use serde::Deserialize;
use serde_json::Value;

/// Version of [`prompt`]'s wording, recorded with every generated task.
pub const PROMPT_VERSION: &str = "rmsweb-seed-task/1";

/// The paper's eleven activity categories, the default spread of `tasks generate`.
pub const CATEGORIES: [&str; 11] = [
    "shopping",
    "travel",
    "recipes",
    "housing",
    "jobs",
    "sports",
    "news",
    "finance",
    "education",
    "health",
    "government",
];

/// The message that asks for tasks from one query.
pub fn prompt(query: &str, categories: &[String]) -> String {
    format!(
        "You turn anonymized web search queries into tasks a browser agent can execute.\n\
         For the query below, write zero to three tasks. Each task names one explicit \
         website (a URL), an objective a person could check was reached on that site, \
         and the constraints the objective must meet (dates, prices, counts, filters). \
         Write no task when the query has no web task in it.\n\
         Give each task one category from: {}.\n\
         Answer with JSON only: {{\"tasks\": [{{\"website\": \"https://...\", \
         \"objective\": \"...\", \"constraints\": [\"...\"], \"category\": \"...\"}}]}}\n\n\
         Query: {query}",
        categories.join(", ")
    )
}

/// The answer's JSON schema, sent as `response_format` so that a server which
/// enforces schemas (`rmsweb serve`, vLLM, llama.cpp) cannot answer anything else.
pub fn answer_schema() -> Value {
    serde_json::json!({
        "type": "json_schema",
        "json_schema": {
            "name": "seed_tasks",
            "schema": {
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "maxItems": 3,
                        "items": {
                            "type": "object",
                            "properties": {
                                "website": {"type": "string"},
                                "objective": {"type": "string"},
                                "constraints": {"type": "array", "items": {"type": "string"}},
                                "category": {"type": "string"}
                            },
                            "required": ["website", "objective", "constraints", "category"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["tasks"],
                "additionalProperties": false
            }
        }
    })
}

/// One task as the generator wrote it, before checking.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Draft {
    pub website: String,
    pub objective: String,
    pub constraints: Vec<String>,
    pub category: String,
}

#[derive(Deserialize)]
struct Answer {
    tasks: Vec<Value>,
}

/// Reads the answer: the JSON object `{"tasks": [...]}` (or a bare array), alone or
/// inside prose or a code fence. Field values that are not text become empty (and
/// the task is refused later for it); `constraints` may be one text or a list.
pub fn parse_answer(text: &str) -> Result<Vec<Draft>, String> {
    let items = json_in(text).ok_or_else(|| "no JSON object or array in the answer".to_string())?;
    Ok(items.iter().map(draft).collect())
}

fn json_in(text: &str) -> Option<Vec<Value>> {
    for (i, c) in text.char_indices() {
        if c != '{' && c != '[' {
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(v)) = stream.next() {
            match v {
                Value::Array(items) => return Some(items),
                Value::Object(_) => {
                    if let Ok(a) = serde_json::from_value::<Answer>(v) {
                        return Some(a.tasks);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

fn draft(v: &Value) -> Draft {
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let constraints = match v.get("constraints") {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    Draft {
        website: text("website"),
        objective: text("objective"),
        constraints,
        category: text("category").to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_prose_fences_or_bare_arrays_are_read() {
        let a = "Sure!\n```json\n{\"tasks\": [{\"website\": \"https://kayak.com\", \"objective\": \"Find a flight\", \"constraints\": \"under $300\", \"category\": \"Travel\"}]}\n```";
        let d = parse_answer(a).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].constraints, vec!["under $300"]);
        assert_eq!(d[0].category, "travel");
        let d = parse_answer("[{\"objective\": 3}, {\"website\": \"x.com\"}]").unwrap();
        assert_eq!(d.len(), 2);
        assert!(d[0].objective.is_empty());
        assert!(parse_answer("no tasks here").is_err());
        assert!(parse_answer("{\"tasks\": []}").unwrap().is_empty());
        assert!(prompt("cheap flights", &["travel".into()]).ends_with("Query: cheap flights"));
    }
}
