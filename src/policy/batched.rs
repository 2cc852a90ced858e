//! A local model behind the batching engine ([`crate::model::engine`]) as a
//! [`Policy`]: several of these, each playing its own episode in its own tab, submit
//! their steps to one engine, which decodes them together. Each acts exactly as
//! [`LocalPolicy`] does (prompt, grounding, feedback once), so greedy episodes are the
//! same whether played one at a time or side by side.

use super::local::{LocalPolicy, act_with};
use super::prompt::PromptOptions;
use super::{Policy, PolicyInput, PolicyOutput};
use crate::model::ChatTemplate;
use crate::model::engine::{Engine, EngineOptions, GenRequest};
use crate::model::sample::SampleConfig;
use anyhow::{Result, bail};
use std::sync::Arc;

/// One client of a shared engine acting as a web agent.
pub struct BatchedPolicy {
    engine: Engine,
    tokenizer: Arc<tokenizers::Tokenizer>,
    template: Arc<ChatTemplate>,
    pub prompt: PromptOptions,
    /// The name recorded as the trajectories' teacher.
    pub name: String,
    /// Decode under the step's observation-grounded schema (see [`LocalPolicy`]).
    pub grounded: bool,
    /// Temperature, top-p, new-token budget; the seed is the episode's.
    pub sampling: SampleConfig,
}

impl LocalPolicy {
    /// Starts an engine over this policy's model and returns `clients` policies that
    /// share it, each with this one's settings. A Qwen3-VL checkpoint is refused (its
    /// steps carry a screenshot each: play them one at a time).
    pub fn batched(self, clients: usize, opts: EngineOptions) -> Result<Vec<BatchedPolicy>> {
        if self.model.vl.is_some() {
            bail!("a Qwen3-VL checkpoint plays one episode at a time (--parallel 1)");
        }
        let (engine, tokenizer, template, sampling) = Engine::over(self.model, opts);
        let (tokenizer, template) = (Arc::new(tokenizer), Arc::new(template));
        Ok((0..clients.max(1))
            .map(|_| BatchedPolicy {
                engine: engine.clone(),
                tokenizer: Arc::clone(&tokenizer),
                template: Arc::clone(&template),
                prompt: self.prompt.clone(),
                name: self.name.clone(),
                grounded: self.grounded,
                sampling: sampling.clone(),
            })
            .collect())
    }
}

impl Policy for BatchedPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Seeds sampling with the episode's seed, as [`LocalPolicy`] does.
    fn reset(&mut self, _task: &crate::trajectory::Task, seed: u64) {
        self.sampling.seed = seed;
    }

    fn act(&mut self, input: &PolicyInput<'_>) -> Result<PolicyOutput> {
        let (engine, template, tok, s) = (
            &self.engine,
            &self.template,
            &self.tokenizer,
            &self.sampling,
        );
        act_with(
            input,
            &self.prompt,
            tok,
            self.grounded,
            |msgs, constrained| {
                let mut req =
                    GenRequest::greedy(template.encode_prompt(tok, msgs)?, s.max_new_tokens);
                req.temperature = s.temperature;
                req.top_p = s.top_p;
                req.seed = s.seed;
                if let Some((schema, quotes)) = constrained {
                    req.schema = Some(Arc::clone(schema));
                    req.quotes = quotes.cloned();
                }
                let mut out = engine.generate(req)?;
                Ok(out.pop().map(|c| c.text).unwrap_or_default())
            },
        )
    }
}
