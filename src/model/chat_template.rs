//! Chat templates: render messages to text with the `chat_template` of
//! `tokenizer_config.json` (minijinja), ChatML built in, and tokenize with a mask
//! that marks the assistant tokens (the tokens the SFT loss is taken on).

use anyhow::{Context, Result};
use minijinja::{Environment, context};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tokenizers::Tokenizer;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    /// A message with the given role.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Message {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// The ChatML template (Qwen's format without tools or thinking blocks).
pub const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

/// Token ids of a rendered conversation and, per token, whether the loss applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub mask: Vec<bool>,
}

impl ChatTemplate {
    /// Compiles a template source.
    pub fn new(source: &str) -> Result<Self> {
        let mut env = Environment::new();
        // HF templates call Python string methods (`.startswith`, `.strip`, ...).
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template_owned("chat", source.to_string())
            .context("compiling chat template")?;
        Ok(ChatTemplate { env })
    }

    /// ChatML.
    pub fn chatml() -> Self {
        // The built-in template is known to compile.
        Self::new(CHATML).unwrap_or_else(|_| unreachable!("built-in ChatML template compiles"))
    }

    /// The `chat_template` of a `tokenizer_config.json`, or ChatML when it has none.
    pub fn from_tokenizer_config(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: invalid JSON", path.display()))?;
        match v.get("chat_template") {
            None | Some(serde_json::Value::Null) => Ok(Self::chatml()),
            Some(serde_json::Value::String(s)) => {
                Self::new(s).with_context(|| format!("{}: field `chat_template`", path.display()))
            }
            Some(_) => anyhow::bail!(
                "{}: field `chat_template` must be a string (named templates are not supported)",
                path.display()
            ),
        }
    }

    /// The template of a model folder: its `tokenizer_config.json` if present, else ChatML.
    pub fn for_model_dir(dir: &Path) -> Result<Self> {
        let p = dir.join("tokenizer_config.json");
        if p.exists() {
            Self::from_tokenizer_config(&p)
        } else {
            Ok(Self::chatml())
        }
    }

    /// Renders messages to text.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let t = self.env.get_template("chat")?;
        let messages = minijinja::Value::from(minijinja::value::Serde(messages));
        t.render(context! { messages => messages, add_generation_prompt => add_generation_prompt })
            .context("rendering chat template")
    }

    /// Renders and tokenizes a conversation; the mask is true on the tokens of each
    /// assistant message (its content and end-of-turn token), false elsewhere.
    ///
    /// Assistant spans are found by rendering prefixes: the text added by message *i*
    /// after the generation prompt of messages `..i`. A template whose renderings of
    /// prefixes are not prefixes of the whole is refused.
    pub fn encode(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Encoded> {
        let full = self.render(messages, false)?;
        let mut spans = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            if m.role != "assistant" {
                continue;
            }
            let before = self.render(&messages[..i], true)?;
            let upto = self.render(&messages[..=i], false)?;
            anyhow::ensure!(
                full.starts_with(&before) && full.starts_with(&upto) && upto.starts_with(&before),
                "chat template is not prefix-stable at message {i}; cannot mask assistant tokens"
            );
            let end = before.len() + upto[before.len()..].trim_end().len();
            spans.push((before.len(), end));
        }
        let enc = tok
            .encode(full.as_str(), false)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        let mask = enc
            .get_offsets()
            .iter()
            .map(|&(s, e)| e > s && spans.iter().any(|&(a, b)| s >= a && e <= b))
            .collect();
        Ok(Encoded {
            ids: enc.get_ids().to_vec(),
            mask,
        })
    }

    /// Token ids of the prompt for generation (messages + assistant header).
    pub fn encode_prompt(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Vec<u32>> {
        let text = self.render(messages, true)?;
        let enc = tok
            .encode(text.as_str(), false)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        Ok(enc.get_ids().to_vec())
    }
}
