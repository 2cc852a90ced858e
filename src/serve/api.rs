//! The OpenAI chat-completions wire format: requests as clients send them, checked
//! into a [`Checked`] request or refused with an OpenAI-style error body
//! (`{"error": {"message", "type", "param", "code"}}`).

use super::error::ApiError;
use super::images::RequestImage;
use super::limits::Limits;
use crate::model::Message;
use crate::model::constrain::Schema;
use crate::model::vl::prompt::IMAGE_PLACEHOLDER;
use crate::util::sanitize::excerpt;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Most sequences one request may ask for.
pub const MAX_N: usize = 16;

/// `stop`: one string or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// A message's `content`: text, or a list of parts.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Value>),
}

/// One request message.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct InMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
}

/// `POST /v1/chat/completions` as sent.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<InMessage>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub n: Option<u64>,
    #[serde(default)]
    pub stop: Option<Stop>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<Value>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub frequency_penalty: Option<f64>,
    #[serde(default)]
    pub presence_penalty: Option<f64>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub tools: Option<Value>,
    /// Other OpenAI fields (`reasoning_effort`, `service_tier`, `user`, ...):
    /// accepted and ignored.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A request that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    pub messages: Vec<Message>,
    pub temperature: f64,
    pub top_p: f64,
    /// Requested cap, if any (the context decides otherwise).
    pub max_tokens: Option<usize>,
    pub n: usize,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub seed: Option<u64>,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub schema: Option<Arc<Schema>>,
    /// The image the model sees (a VL model; see [`super::images`]): its message's
    /// text holds [`IMAGE_PLACEHOLDER`] where the image part was.
    pub image: Option<RequestImage>,
}

/// Parses and checks a request body. `model` is the served model's id; a model that
/// `sees` gets the request's last image (others, and every image for a text model,
/// are dropped). Messages and stop sequences over `limits` are refused naming them.
// Kept whole: one check per request field, in the order a request's errors are
// reported (the first bad field is the one named).
pub fn check(body: &[u8], model: &str, sees: bool, limits: &Limits) -> Result<Checked, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let r: ChatRequest = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::invalid(
            if path == "." { "(body)".into() } else { path },
            // serde quotes a value of the wrong type whole: at most 200 bytes here.
            format!("malformed request: {}", excerpt(&e.inner().to_string())),
        )
    })?;
    if let Some(m) = &r.model
        && m != model
    {
        return Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "The model `{}` does not exist; this server serves `{model}`",
                excerpt(m)
            ),
            kind: "invalid_request_error",
            param: Some("model".into()),
            code: Some("model_not_found"),
        });
    }
    if r.tools.as_ref().is_some_and(|t| !t.is_null()) {
        return Err(ApiError::invalid(
            "tools",
            "tool calling is not supported; ask for JSON with response_format instead",
        ));
    }
    if r.messages.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "at least one message is required",
        ));
    }
    let (messages, image) = messages_of(&r.messages, sees, limits)?;
    let temperature = r.temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid("temperature", "must be between 0 and 2"));
    }
    let top_p = r.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid("top_p", "must be in (0, 1]"));
    }
    let n = r.n.unwrap_or(1) as usize;
    if !(1..=MAX_N).contains(&n) {
        return Err(ApiError::invalid(
            "n",
            format!("must be between 1 and {MAX_N}"),
        ));
    }
    let max_tokens = match (r.max_completion_tokens, r.max_tokens) {
        (Some(0), _) | (None, Some(0)) => {
            return Err(ApiError::invalid("max_tokens", "must be at least 1"));
        }
        (Some(m), _) | (None, Some(m)) => Some(m as usize),
        (None, None) => None,
    };
    let penalty = |v: Option<f64>, name: &str| -> Result<f32, ApiError> {
        let v = v.unwrap_or(0.0);
        if (-2.0..=2.0).contains(&v) {
            Ok(v as f32)
        } else {
            Err(ApiError::invalid(name, "must be between -2 and 2"))
        }
    };
    Ok(Checked {
        messages,
        temperature,
        top_p,
        max_tokens,
        n,
        stop: stops_of(r.stop, limits)?,
        stream: r.stream.unwrap_or(false),
        include_usage: r
            .stream_options
            .as_ref()
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        seed: r.seed,
        frequency_penalty: penalty(r.frequency_penalty, "frequency_penalty")?,
        presence_penalty: penalty(r.presence_penalty, "presence_penalty")?,
        schema: response_schema(r.response_format.as_ref())?,
        image,
    })
}

/// The messages as the chat template reads them (roles mapped, text within the
/// limit), and the image the model sees: the last image part, when it `sees`.
fn messages_of(
    msgs: &[InMessage],
    sees: bool,
    limits: &Limits,
) -> Result<(Vec<Message>, Option<RequestImage>), ApiError> {
    // The last image part: (message, part, the part).
    let last_image = msgs
        .iter()
        .enumerate()
        .rev()
        .filter(|_| sees)
        .find_map(|(i, m)| match &m.content {
            Some(Content::Parts(parts)) => parts
                .iter()
                .rposition(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
                .map(|j| (i, j, &parts[j])),
            _ => None,
        });
    let image = match last_image {
        Some((i, j, part)) => {
            let (url, field) =
                super::images::image_url(part, &format!("messages[{i}].content[{j}]"))?;
            Some(super::images::decode_data_url(url, &field)?)
        }
        None => None,
    };
    let shown = last_image.map(|(i, j, _)| (i, j));
    let mut messages = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return Err(ApiError::invalid(
                    format!("messages[{i}].role"),
                    format!(
                        "role `{}` is not supported (system, developer, user, assistant)",
                        excerpt(other)
                    ),
                ));
            }
        };
        let image_at = shown.filter(|&(k, _)| k == i).map(|(_, j)| j);
        let text = text_of(m, i, image_at)?;
        if text.len() > limits.max_message_bytes {
            return Err(ApiError::invalid(
                format!("messages[{i}].content"),
                format!(
                    "the message holds {} bytes of text; the limit is {} (--max-message-bytes)",
                    text.len(),
                    limits.max_message_bytes
                ),
            ));
        }
        messages.push(Message::new(role, text));
    }
    Ok((messages, image))
}

/// The stop sequences: at most 4, each within the limit (named `stop` when one string
/// was given, `stop[k]` in a list).
fn stops_of(stop: Option<Stop>, limits: &Limits) -> Result<Vec<String>, ApiError> {
    let (stop, one) = match stop {
        None => (Vec::new(), false),
        Some(Stop::One(s)) => (vec![s], true),
        Some(Stop::Many(v)) => (v, false),
    };
    if stop.len() > 4 {
        return Err(ApiError::invalid("stop", "at most 4 stop sequences"));
    }
    if let Some((k, s)) = stop
        .iter()
        .enumerate()
        .find(|(_, s)| s.len() > limits.max_stop_bytes)
    {
        return Err(ApiError::invalid(
            if one {
                "stop".into()
            } else {
                format!("stop[{k}]")
            },
            format!(
                "a stop sequence of {} bytes; the limit is {} (--max-stop-bytes)",
                s.len(),
                limits.max_stop_bytes
            ),
        ));
    }
    Ok(stop)
}

/// The text of a message: its string content, or its text parts joined, with
/// [`IMAGE_PLACEHOLDER`] for the image part at `image_at` (other images are dropped).
fn text_of(m: &InMessage, i: usize, image_at: Option<usize>) -> Result<String, ApiError> {
    match &m.content {
        None => Ok(String::new()),
        Some(Content::Text(t)) => Ok(t.clone()),
        Some(Content::Parts(parts)) => {
            let mut out = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                ApiError::invalid(
                                    format!("messages[{i}].content[{j}].text"),
                                    "a text part needs a `text` string",
                                )
                            })?
                            .to_string(),
                    ),
                    Some("image_url") if image_at == Some(j) => {
                        out.push(IMAGE_PLACEHOLDER.to_string())
                    }
                    Some("image_url" | "input_audio" | "file") => {}
                    _ => {
                        return Err(ApiError::invalid(
                            format!("messages[{i}].content[{j}].type"),
                            "unknown content part type",
                        ));
                    }
                }
            }
            Ok(out.join("\n"))
        }
    }
}

/// The schema of `response_format`: `json_schema` (its `schema`), `json_object`
/// (any object), `text` or absent (none).
fn response_schema(rf: Option<&Value>) -> Result<Option<Arc<Schema>>, ApiError> {
    let Some(rf) = rf.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match rf.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Schema::any_object())),
        Some("json_schema") => {
            let schema = rf
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .ok_or_else(|| {
                    ApiError::invalid(
                        "response_format.json_schema.schema",
                        "a json_schema response format needs a `schema`",
                    )
                })?;
            Schema::compile(schema).map(Some).map_err(|e| {
                ApiError::invalid("response_format.json_schema.schema", format!("{e:#}"))
            })
        }
        _ => Err(ApiError::invalid(
            "response_format.type",
            "must be text, json_object or json_schema",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(body: Value) -> ApiError {
        check(body.to_string().as_bytes(), "m", false, &Limits::default()).unwrap_err()
    }

    #[test]
    fn values_are_quoted_short() {
        let long = "\u{1b}[31m".repeat(100_000);
        for body in [
            json!({"model": long, "messages": [{"role": "user", "content": "x"}]}),
            json!({"temperature": long, "messages": [{"role": "user", "content": "x"}]}),
            json!({"messages": [{"role": long, "content": "x"}]}),
        ] {
            let e = check(body.to_string().as_bytes(), "m", false, &Limits::default()).unwrap_err();
            assert!(e.message.len() < 400, "{}", e.message.len());
            assert!(!e.message.contains('\u{1b}'), "{}", e.message);
        }
    }

    #[test]
    fn bad_requests_name_their_field() {
        assert_eq!(
            err(json!({"messages": []})).param.as_deref(),
            Some("messages")
        );
        let e = err(json!({"messages": [{"role": "tool", "content": "x"}]}));
        assert_eq!(e.param.as_deref(), Some("messages[0].role"));
        let e = err(json!({"messages": [{"role": "user", "content": 5}]}));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.param.unwrap().starts_with("messages[0]"));
        let e = err(json!({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(
            (e.status, e.code),
            (StatusCode::NOT_FOUND, Some("model_not_found"))
        );
        let e = err(json!({"messages": [{"role": "user", "content": "x"}], "temperature": 3}));
        assert_eq!(e.param.as_deref(), Some("temperature"));
        let e = err(json!({"messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "not": {}}}}}));
        assert!(e.message.contains("`not`"), "{}", e.message);
        let body = e.body();
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }

    #[test]
    fn a_browser_use_request_is_accepted() {
        let c = check(
            json!({"model": "m", "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "state"}, {"type": "image_url", "image_url": {"url": "data:"}}]}
            ], "temperature": 0.2, "frequency_penalty": 0.3, "max_completion_tokens": 4096,
            "response_format": {"type": "json_schema", "json_schema": {"name": "agent_output", "strict": true,
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}},
            "reasoning_effort": "low"})
            .to_string()
            .as_bytes(),
            "m",
            false,
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(c.messages[1].content, "state");
        assert!(c.image.is_none(), "a text model drops images");
        assert_eq!(c.max_tokens, Some(4096));
        assert!(c.schema.unwrap().accepts(r#"{"a":"x"}"#));
    }

    #[test]
    fn a_seeing_model_gets_the_last_image_in_its_place() {
        use base64::Engine as _;
        let mut png = Vec::new();
        image::RgbImage::from_pixel(2, 2, image::Rgb([9, 9, 9]))
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(png)
        );
        let part = |u: &str| json!({"type": "image_url", "image_url": {"url": u}});
        let body = json!({"messages": [
            {"role": "user", "content": [part("https://old.example/a.png"), {"type": "text", "text": "old"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "now"}, part(&url), {"type": "text", "text": "after"}]}
        ]});
        let c = check(body.to_string().as_bytes(), "m", true, &Limits::default()).unwrap();
        let img = c.image.expect("the last image is shown");
        assert_eq!(img.field, "messages[2].content[1].image_url.url");
        assert_eq!(img.image.width(), 2);
        assert_eq!(c.messages[0].content, "old", "earlier images are dropped");
        assert_eq!(
            c.messages[2].content,
            format!("now\n{IMAGE_PLACEHOLDER}\nafter")
        );
        // A bad last image is refused, naming its field.
        let body =
            json!({"messages": [{"role": "user", "content": [part("data:image/png;base64,!!")]}]});
        let e = check(body.to_string().as_bytes(), "m", true, &Limits::default()).unwrap_err();
        assert_eq!(
            e.param.as_deref(),
            Some("messages[0].content[0].image_url.url")
        );
    }
}
