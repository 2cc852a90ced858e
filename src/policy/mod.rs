//! Policies: the [`Policy`] trait and its implementations.
//!
//! - [`prompt`]: THE prompt renderer of the project (task, state, history,
//!   reflection → chat messages). Collection, SFT flattening, RL prompts and
//!   evaluation all call it.
//! - [`chat`]: an OpenAI-compatible chat-completions client and [`chat::ChatPolicy`].
//! - [`scripted`]: a scripted MiniWoB teacher, a stand-in for an LLM teacher.
//! - [`local`]: the local candle model ([`crate::model::LocalModelPolicy`]) as a
//!   policy: the same renderer (its tokenizer as the [`prompt::TokenCounter`]) and the
//!   same parse contract as [`chat::ChatPolicy`].
//! - [`browser_use`]: the `browser-use` prompt format, Browser Use 0.13's message
//!   layout, chosen with [`prompt::PromptOptions::format`] ([`format::PromptFormat`]);
//!   [`observation`] holds what both formats show besides elements.

pub mod attempt;
pub mod batched;
pub mod browser_use;
pub mod chat;
pub mod element_select;
pub mod format;
pub mod grounding;
pub mod local;
pub mod observation;
pub mod prompt;
pub mod render;
pub mod scripted;
pub mod task_words;
pub mod token_count;

use crate::trajectory::{ModelOutput, State, Step, Task};

/// Everything a policy sees when choosing the next step.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInput<'a> {
    pub task: &'a Task,
    /// The current observation.
    pub state: &'a State,
    /// Previous steps of this attempt, oldest first.
    pub history: &'a [Step],
    /// Reflection text given to this attempt (from a failed earlier attempt), if any.
    pub reflection: Option<&'a str>,
    /// Step budget of the episode (shown to models).
    pub max_steps: usize,
    /// Absolute path of the current screenshot (for vision models), if saved.
    pub screenshot: Option<&'a std::path::Path>,
}

/// What a policy answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyOutput {
    pub output: ModelOutput,
    /// The raw text of the answer (the JSON the teacher or model produced).
    pub raw: String,
    /// Set when the answer could not be parsed into actions (after the retry); the
    /// step is recorded with this error and no actions.
    pub parse_error: Option<String>,
}

/// A web agent policy.
pub trait Policy {
    /// The name recorded as the trajectory's `teacher`.
    fn name(&self) -> String;
    /// Called before each episode (a new task, with the episode's seed).
    fn reset(&mut self, _task: &Task, _seed: u64) {}
    /// Remarks about the current episode worth recording in its outcome (for the
    /// scripted teacher: the mistakes it injected).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Chooses the next step.
    fn act(&mut self, input: &PolicyInput<'_>) -> anyhow::Result<PolicyOutput>;
}
