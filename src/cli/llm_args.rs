//! The endpoint arguments shared by the commands that ask an OpenAI-compatible LLM
//! (`tasks generate`, `judge`): URL, model, key, concurrency, retries, timeout.

use anyhow::{Result, bail};
use rmsweb::judge::prompts::Stage;
use rmsweb::policy::chat::{ChatClient, ChatConfig};
use rmsweb::policy::prompt::ChatMessage;
use std::path::Path;

/// How to reach the LLM and how hard to push it.
#[derive(clap::Args)]
pub struct LlmArgs {
    /// The chat endpoint's base URL, e.g. http://127.0.0.1:8000/v1 (`rmsweb serve`
    /// or any OpenAI-compatible server).
    #[arg(long, required = true)]
    pub llm_url: Option<String>,
    /// The model name sent with each request (and recorded with each result).
    #[arg(long, required = true)]
    pub model: Option<String>,
    /// Environment variable holding the API key (none: no auth header).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Requests (or trajectories) in flight at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
    /// Retries of a request that times out, fails to connect or gets 429/5xx.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retries: u32,
    /// Seconds a request may take.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

impl LlmArgs {
    /// The model's name (clap requires it unless a subcommand was given).
    pub fn model(&self) -> Result<&str> {
        match &self.model {
            Some(m) => Ok(m),
            None => bail!("--model is required"),
        }
    }

    /// A chat client for these arguments: temperature 0, `max_tokens`, images sent
    /// when `vision`, `response_format` sent when given.
    pub fn client(
        &self,
        max_tokens: u32,
        vision: bool,
        response_format: Option<serde_json::Value>,
    ) -> Result<ChatClient> {
        let Some(url) = &self.llm_url else {
            bail!("--llm-url is required");
        };
        ChatClient::new(ChatConfig {
            base_url: url.clone(),
            model: self.model()?.to_string(),
            api_key_env: self.api_key_env.clone(),
            timeout: std::time::Duration::from_secs(self.timeout.max(1)),
            max_retries: self.retries,
            vision,
            temperature: 0.0,
            max_tokens: Some(max_tokens),
            response_format,
            ..ChatConfig::default()
        })
    }
}

impl LlmArgs {
    /// One client per question of the WebJudge protocol, in [`Stage`] order: each
    /// with its token budget and, when `schemas`, its answer's JSON schema as
    /// `response_format`.
    pub fn judge_clients(&self, vision: bool, schemas: bool) -> Result<[ChatClient; 3]> {
        let client_for = |stage: Stage| {
            let format = schemas.then(|| stage.response_format()).flatten();
            self.client(stage.max_tokens(), vision, format)
        };
        Ok([
            client_for(Stage::KeyPoints)?,
            client_for(Stage::Evidence)?,
            client_for(Stage::Verdict)?,
        ])
    }
}

/// Sends one user message (with an optional image) and returns the answer.
pub fn ask(client: &ChatClient, text: &str, image: Option<&Path>) -> Result<String> {
    client.complete(&[ChatMessage {
        role: "user".into(),
        content: text.to_string(),
        image: image.map(Path::to_path_buf),
    }])
}
