//! An OpenAI-compatible chat-completions client and the policy built on it.
//!
//! The client posts to `{base_url}/chat/completions` with the model name, the key
//! read from the environment variable the user names (never from the command line),
//! screenshots as base64 `image_url` parts for vision models, a per-request timeout,
//! and retries with exponential backoff on timeouts, connection errors, HTTP 429 and
//! 5xx. [`ChatPolicy`] renders the prompt with [`super::render::render`], parses the
//! Browser Use JSON answer with [`crate::action::parse::parse_response`], and feeds a
//! parse error back once as a user message before giving up on the step.

use super::prompt::{CharApprox, ChatMessage, PromptInput, PromptOptions};
use super::render::render;
use super::{Policy, PolicyInput, PolicyOutput};
use crate::action::parse::parse_response;
use crate::trajectory::ModelOutput;
use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

/// How to reach a chat-completions endpoint.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// Base URL up to the version, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (none: no auth header).
    pub api_key_env: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after the first attempt (timeouts, connection errors, 429, 5xx).
    pub max_retries: u32,
    /// First backoff delay; doubled after each retry.
    pub backoff: Duration,
    /// Send screenshots as image parts.
    pub vision: bool,
    pub temperature: f64,
    pub max_tokens: Option<u32>,
    /// Sent as the request's `response_format` (e.g. a `json_schema` the server
    /// enforces while decoding); none: not sent.
    pub response_format: Option<Value>,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            base_url: "http://127.0.0.1:8000/v1".into(),
            model: "default".into(),
            api_key_env: None,
            timeout: Duration::from_secs(120),
            max_retries: 3,
            backoff: Duration::from_millis(500),
            vision: false,
            temperature: 0.0,
            max_tokens: Some(1024),
            response_format: None,
        }
    }
}

/// A blocking chat-completions client.
pub struct ChatClient {
    cfg: ChatConfig,
    http: reqwest::blocking::Client,
    api_key: Option<String>,
}

/// One attempt's failure: whether to retry, and why.
enum Attempt {
    Retry(String),
    Fatal(anyhow::Error),
}

impl ChatClient {
    /// A client; fails when the named key variable is unset or the URL is unusable.
    /// Only `http://` endpoints are supported: this build has no TLS (local servers
    /// such as vLLM or SGLang speak plain http; put a local proxy before remote ones).
    pub fn new(cfg: ChatConfig) -> Result<ChatClient> {
        match url::Url::parse(&cfg.base_url) {
            Ok(u) if u.scheme() == "http" => {}
            Ok(u) => bail!(
                "chat endpoint {}: scheme {:?} is not supported (this build speaks plain http only)",
                cfg.base_url,
                u.scheme()
            ),
            Err(e) => bail!("chat endpoint {:?} is not a URL: {e}", cfg.base_url),
        }
        let api_key = match &cfg.api_key_env {
            Some(var) => Some(std::env::var(var).with_context(|| {
                format!("the API key variable {var} (named by --api-key-env) is not set")
            })?),
            None => None,
        };
        let http = reqwest::blocking::Client::builder()
            .timeout(cfg.timeout)
            .build()
            .context("building the HTTP client")?;
        Ok(ChatClient { cfg, http, api_key })
    }

    /// The configuration.
    pub fn config(&self) -> &ChatConfig {
        &self.cfg
    }

    fn endpoint(&self) -> String {
        format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        )
    }

    /// The request body for these messages.
    pub fn request_body(&self, messages: &[ChatMessage]) -> Result<Value> {
        let mut msgs = Vec::with_capacity(messages.len());
        for m in messages {
            let content = match (&m.image, self.cfg.vision) {
                (Some(path), true) => {
                    let bytes = std::fs::read(path)
                        .with_context(|| format!("reading screenshot {}", path.display()))?;
                    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                    json!([
                        {"type": "text", "text": m.content},
                        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}}
                    ])
                }
                _ => Value::String(m.content.clone()),
            };
            msgs.push(json!({"role": m.role, "content": content}));
        }
        let mut body = json!({
            "model": self.cfg.model,
            "messages": msgs,
            "temperature": self.cfg.temperature,
        });
        if let Some(n) = self.cfg.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if let Some(f) = &self.cfg.response_format {
            body["response_format"] = f.clone();
        }
        Ok(body)
    }

    fn attempt(&self, body: &Value) -> std::result::Result<String, Attempt> {
        let mut req = self.http.post(self.endpoint()).json(body);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = match req.send() {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Err(Attempt::Retry(format!(
                    "timed out after {:?}",
                    self.cfg.timeout
                )));
            }
            Err(e) if e.is_connect() || e.is_request() => {
                return Err(Attempt::Retry(format!("connection failed: {e}")));
            }
            Err(e) => return Err(Attempt::Fatal(anyhow::anyhow!("request failed: {e}"))),
        };
        let status = resp.status();
        let text = match resp.text() {
            Ok(t) => t,
            Err(e) if e.is_timeout() => {
                return Err(Attempt::Retry(format!(
                    "timed out after {:?}",
                    self.cfg.timeout
                )));
            }
            Err(e) => return Err(Attempt::Retry(format!("reading the response: {e}"))),
        };
        let snippet: String = text.chars().take(300).collect();
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(Attempt::Retry(format!("HTTP {status}: {snippet}")));
        }
        if !status.is_success() {
            return Err(Attempt::Fatal(anyhow::anyhow!("HTTP {status}: {snippet}")));
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            Attempt::Fatal(anyhow::anyhow!(
                "the endpoint's answer is not JSON ({e}): {snippet}"
            ))
        })?;
        match v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
        {
            Some(s) => Ok(s.to_string()),
            None => Err(Attempt::Fatal(anyhow::anyhow!(
                "the answer has no choices[0].message.content: {snippet}"
            ))),
        }
    }

    /// Sends the messages and returns the assistant's text, retrying transient
    /// failures with exponential backoff.
    pub fn complete(&self, messages: &[ChatMessage]) -> Result<String> {
        let body = self.request_body(messages)?;
        let mut delay = self.cfg.backoff;
        let mut last = String::new();
        for attempt in 0..=self.cfg.max_retries {
            if attempt > 0 {
                std::thread::sleep(delay);
                delay = delay.saturating_mul(2);
            }
            match self.attempt(&body) {
                Ok(text) => return Ok(text),
                Err(Attempt::Fatal(e)) => {
                    return Err(e.context(format!("POST {}", self.endpoint())));
                }
                Err(Attempt::Retry(why)) => {
                    tracing::warn!("chat endpoint attempt {} failed: {why}", attempt + 1);
                    last = why;
                }
            }
        }
        bail!(
            "POST {}: gave up after {} attempts: {last}",
            self.endpoint(),
            self.cfg.max_retries + 1
        )
    }
}

/// The message that feeds a parse error back to the model.
pub fn parse_feedback(error: &str) -> String {
    format!(
        "Your answer could not be parsed: {error}. Reply with only one JSON object of the form \
         {{\"thinking\": ..., \"evaluation_previous_goal\": ..., \"memory\": ..., \"next_goal\": ..., \
         \"action\": [{{\"<action name>\": {{<params>}}}}]}}."
    )
}

/// A policy answered by a chat endpoint.
pub struct ChatPolicy {
    pub client: ChatClient,
    pub prompt: PromptOptions,
}

impl ChatPolicy {
    /// A policy over a client (vision follows the client's configuration).
    pub fn new(client: ChatClient) -> ChatPolicy {
        let prompt = PromptOptions {
            vision: client.config().vision,
            ..Default::default()
        };
        ChatPolicy { client, prompt }
    }

    /// Sends the messages; parses the answer, feeding a parse error back once.
    pub fn ask(&self, messages: Vec<ChatMessage>) -> Result<PolicyOutput> {
        ask_with_feedback(messages, |m| self.client.complete(m))
    }
}

/// Asks `complete` for an answer and parses it; an unparseable answer is fed back once
/// (as the assistant's message and a user message naming the parse error) before the
/// step is recorded with the error. Every policy that generates text goes through it.
pub fn ask_with_feedback(
    mut messages: Vec<ChatMessage>,
    mut complete: impl FnMut(&[ChatMessage]) -> Result<String>,
) -> Result<PolicyOutput> {
    let raw = complete(&messages)?;
    let first_err = match parse_response(&raw) {
        Ok(p) => return Ok(to_output(p, raw)),
        Err(e) => e.message,
    };
    messages.push(ChatMessage::new("assistant", raw));
    messages.push(ChatMessage::new("user", parse_feedback(&first_err)));
    let raw2 = complete(&messages)?;
    Ok(match parse_response(&raw2) {
        Ok(p) => to_output(p, raw2),
        Err(e) => PolicyOutput {
            output: ModelOutput::default(),
            raw: raw2,
            parse_error: Some(format!(
                "unparseable answer twice: {first_err}; then {}",
                e.message
            )),
        },
    })
}

fn to_output(p: crate::action::parse::Parsed, raw: String) -> PolicyOutput {
    PolicyOutput {
        output: ModelOutput {
            thinking: p.thinking.unwrap_or_default(),
            evaluation_previous_goal: p.evaluation_previous_goal.unwrap_or_default(),
            memory: p.memory.unwrap_or_default(),
            next_goal: p.next_goal.unwrap_or_default(),
            actions: p.actions,
        },
        raw,
        parse_error: None,
    }
}

impl Policy for ChatPolicy {
    fn name(&self) -> String {
        self.client.config().model.clone()
    }

    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        let rendered = render(&PromptInput::of(input, true), &self.prompt, &CharApprox);
        self.ask(rendered.messages)
    }
}
