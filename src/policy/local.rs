//! The local candle model as a [`Policy`]: the project's prompt renderer (with the
//! model's own tokenizer counting the budget), the model's chat template, greedy or
//! sampled decoding, and the same parse-and-feed-back-once contract as the chat policy.

use super::chat::ask_with_feedback;
use super::prompt::{PromptInput, PromptOptions, TokenCounter};
use super::render::render;
use super::{Policy, PolicyInput, PolicyOutput};
use crate::model::LocalModelPolicy;
use crate::model::chat_template::Message;
use crate::model::constrain::{QuoteGuard, Schema};
use anyhow::Result;
use std::sync::Arc;

/// Counts tokens with the model's tokenizer.
pub struct TokenizerCounter<'a>(pub &'a tokenizers::Tokenizer);

impl TokenCounter for TokenizerCounter<'_> {
    fn count(&self, text: &str) -> usize {
        self.0
            .encode(text, false)
            .map(|e| e.len())
            .unwrap_or_else(|_| text.chars().count().div_ceil(4))
    }
}

/// A local model acting as a web agent.
pub struct LocalPolicy {
    pub model: LocalModelPolicy,
    pub prompt: PromptOptions,
    /// The name recorded as the trajectories' teacher.
    pub name: String,
    /// Decode every answer under the step's observation-grounded schema
    /// ([`super::grounding`]): shown indices only, typed values from the instruction,
    /// and quoted spans of its text only the instruction's quoted values.
    pub grounded: bool,
}

impl LocalPolicy {
    /// Wraps a loaded model under `name`.
    pub fn new(model: LocalModelPolicy, name: impl Into<String>) -> Self {
        LocalPolicy {
            model,
            prompt: PromptOptions::default(),
            name: name.into(),
            grounded: false,
        }
    }
}

impl Policy for LocalPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Seeds sampling with the episode's seed (a collection retry's is salted), so
    /// sampled episodes differ from one another and repeat exactly when re-run.
    fn reset(&mut self, _task: &crate::trajectory::Task, seed: u64) {
        self.model.sampling.seed = seed;
    }

    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        let model = &self.model;
        act_with(
            input,
            &self.prompt,
            &model.tokenizer,
            self.grounded,
            |msgs, constrained| model.generate_seeing(msgs, input.screenshot, constrained),
        )
    }
}

/// How a model policy answers one step: render the prompt (the tokenizer counting
/// its budget), under grounding build the step's schema, and ask `generate` for a
/// reply (fed back once when it does not parse).
pub(super) fn act_with(
    input: &PolicyInput<'_>,
    prompt: &PromptOptions,
    tokenizer: &tokenizers::Tokenizer,
    grounded: bool,
    mut generate: impl FnMut(&[Message], Option<(&Arc<Schema>, Option<&QuoteGuard>)>) -> Result<String>,
) -> Result<PolicyOutput> {
    let rendered = render(
        &PromptInput::of(input, false),
        prompt,
        &TokenizerCounter(tokenizer),
    );
    let schema = if grounded {
        Some(super::grounding::step_constraints(
            &input.task.instruction,
            &rendered.shown,
            &input.state.elements,
        )?)
    } else {
        None
    };
    ask_with_feedback(rendered.messages, |msgs| {
        let msgs: Vec<Message> = msgs
            .iter()
            .map(|m| Message::new(&m.role, m.content.clone()))
            .collect();
        generate(&msgs, schema.as_ref().map(|(s, q)| (s, q.as_ref())))
    })
}
