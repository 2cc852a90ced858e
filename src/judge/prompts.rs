//! The judge's three prompts and the reading of their answers. A new wording is a
//! new [`PROMPT_VERSION`]: verdicts of the old one are not reused.

use serde_json::{Value, json};

/// Version of the prompts below, recorded with every verdict.
pub const PROMPT_VERSION: &str = "rmsweb-webjudge/1";

/// The judge's three questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    KeyPoints,
    Evidence,
    Verdict,
}

impl Stage {
    /// Tokens an answer may take.
    pub fn max_tokens(self) -> u32 {
        match self {
            Stage::KeyPoints => 256,
            Stage::Evidence => 96,
            Stage::Verdict => 384,
        }
    }

    /// The answer's JSON schema as a `response_format`, for servers that enforce
    /// one while decoding (the readers below take the JSON or the plain form).
    pub fn response_format(self) -> Option<Value> {
        let schema = match self {
            Stage::KeyPoints => return None,
            Stage::Evidence => json!({
                "type": "object",
                "properties": {
                    "score": {"type": "integer", "minimum": 1, "maximum": 5},
                    "reason": {"type": "string"}
                },
                "required": ["score", "reason"],
                "additionalProperties": false
            }),
            Stage::Verdict => json!({
                "type": "object",
                "properties": {
                    "thoughts": {"type": "string"},
                    "status": {"type": "string", "enum": ["success", "failure"]}
                },
                "required": ["thoughts", "status"],
                "additionalProperties": false
            }),
        };
        Some(json!({"type": "json_schema", "json_schema": {"name": "judge", "schema": schema}}))
    }
}

/// The answer as a JSON object, when it is one.
fn as_object(answer: &str) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(answer.trim()) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Step 1: what a successful attempt must have done.
pub fn key_points(task: &str) -> String {
    format!(
        "You check whether a web agent completed a task.\n\
         List the key points of the task: each requirement (item, filter, value, \
         quantity, action) that a successful attempt must satisfy. Do not add \
         requirements the task does not state.\n\
         Answer with a numbered list only.\n\n\
         Task: {task}"
    )
}

/// Step 2: how much one state of the trajectory shows about the key points (the
/// step's screenshot is attached when the judge sees images; its page text is
/// given either way).
pub fn evidence_score(task: &str, key_points: &str, step: usize, state: &str) -> String {
    format!(
        "Task: {task}\nKey points:\n{key_points}\n\n\
         Below is the page the agent saw at step {step}. How much does it show \
         progress on or completion of the key points? Score 1 (nothing relevant) to 5 \
         (shows a key point satisfied or violated), with one sentence why.\n\
         Answer as: Score: N\nReason: ...\n\nPage at step {step}:\n{state}"
    )
}

/// Step 3: the verdict over the key points, the actions and the selected states.
pub fn verdict(
    task: &str,
    key_points: &str,
    actions: &str,
    evidence: &str,
    answer: &str,
) -> String {
    format!(
        "You decide whether a web agent completed a task. Judge only from the record \
         below; a task is completed only if every key point is satisfied.\n\n\
         Task: {task}\nKey points:\n{key_points}\n\n\
         Actions the agent took:\n{actions}\n\n\
         Key states (the most relevant steps):\n{evidence}\n\n\
         The agent's final answer: {answer}\n\n\
         Think about each key point, then answer as:\nThoughts: ...\nStatus: success\n\
         or\nThoughts: ...\nStatus: failure"
    )
}

/// The score of an evidence answer (`{"score": N}`, `Score: N`, or the first digit
/// 1–5).
pub fn read_score(answer: &str) -> Option<u8> {
    if let Some(m) = as_object(answer) {
        return m
            .get("score")
            .and_then(Value::as_u64)
            .filter(|n| (1..=5).contains(n))
            .map(|n| n as u8);
    }
    let lower = answer.to_ascii_lowercase();
    let after = lower.find("score").map_or(&lower[..], |i| &lower[i + 5..]);
    after
        .chars()
        .find(|c| c.is_ascii_digit())
        .and_then(|c| c.to_digit(10))
        .filter(|d| (1..=5).contains(d))
        .map(|d| d as u8)
}

/// The reason of an evidence answer (`{"reason"}`, a `Reason:` line, else the
/// whole answer).
pub fn read_reason(answer: &str) -> String {
    if let Some(r) = as_object(answer).and_then(|m| m.get("reason")?.as_str().map(str::to_owned)) {
        return r.chars().take(400).collect();
    }
    answer
        .lines()
        .find_map(|l| l.trim().strip_prefix("Reason:").map(str::trim))
        .unwrap_or(answer.trim())
        .chars()
        .take(400)
        .collect()
}

/// The status of a verdict answer: `{"status"}`, else the last `Status:` line's
/// success or failure.
pub fn read_status(answer: &str) -> Result<bool, String> {
    if let Some(m) = as_object(answer) {
        return match m.get("status").and_then(Value::as_str) {
            Some("success") => Ok(true),
            Some("failure") => Ok(false),
            other => Err(format!("status {other:?} is neither success nor failure")),
        };
    }
    let line = answer
        .lines()
        .rev()
        .find_map(|l| {
            let l = l.trim().trim_start_matches(['*', '#', ' ']);
            let lower = l.to_ascii_lowercase();
            lower.strip_prefix("status:").map(|s| s.trim().to_string())
        })
        .ok_or_else(|| "the verdict has no `Status:` line".to_string())?;
    let word = line.trim_matches(|c: char| !c.is_ascii_alphabetic());
    match word {
        w if w.starts_with("success") => Ok(true),
        w if w.starts_with("fail") => Ok(false),
        other => Err(format!("status {other:?} is neither success nor failure")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_leniently_and_refused_when_unclear() {
        assert_eq!(read_score("Score: 4\nReason: the cart shows it"), Some(4));
        assert_eq!(read_score("I'd give it a 2."), Some(2));
        assert_eq!(read_score("Score: 9"), None);
        assert_eq!(
            read_reason("Score: 4\nReason: the cart shows it"),
            "the cart shows it"
        );
        assert_eq!(read_status("Thoughts: ok\n**Status: Success**"), Ok(true));
        assert_eq!(read_status("Status: failure."), Ok(false));
        assert!(read_status("Thoughts: hard to say").is_err());
        assert!(read_status("Status: maybe").is_err());
        assert_eq!(read_score(r#"{"score": 5, "reason": "cart"}"#), Some(5));
        assert_eq!(read_reason(r#"{"score": 5, "reason": "cart"}"#), "cart");
        assert_eq!(
            read_status(r#"{"thoughts": "ok", "status": "failure"}"#),
            Ok(false)
        );
        assert!(read_status(r#"{"thoughts": "ok"}"#).is_err());
    }
}
