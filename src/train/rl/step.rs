//! What the phases of an RL step share: the step's context (`Ctx`: config,
//! policy, prompts, grounding), each sampled `Group` and where it was `Routed`.
//! The trainer builds them; sampling, the probe, the update and the report read
//! them.

use super::config::RlConfig;
use super::groups::{GateDecision, GroupStats};
use super::policy::Policy;
use super::prompts::RlPrompt;
use super::rollout::Rollout;
use super::seqs::SeenImage;
use crate::action::Action;
use crate::model::constrain::{QuoteGuard, Schema};
use crate::model::sample::Constraint;
use crate::reward::{Decision, RewardConfig};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Where a sampled group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Routed {
    Rl,
    Salvage,
    Discarded,
}

/// A sampled group with its scores and fate.
pub(crate) struct Group {
    /// Index into the prompts.
    pub prompt: usize,
    /// Which generation batch of the step drew it.
    pub gen_batch: usize,
    pub rollouts: Vec<Rollout>,
    /// Decoded responses.
    pub texts: Vec<String>,
    pub decisions: Vec<Decision>,
    /// Each response's first parsed action.
    pub actions: Vec<Option<Action>>,
    pub rewards: Vec<f64>,
    pub stats: GroupStats,
    pub gate: GateDecision,
    pub routed: Routed,
    /// The prompt's screenshot, loaded, when the policy sees.
    pub image: Option<SeenImage>,
}

/// Per-step state shared by the phases.
pub(crate) struct Ctx<'a> {
    pub cfg: &'a RlConfig,
    pub policy: &'a Policy,
    pub prompts: &'a [RlPrompt],
    /// Encoded prompts, parallel to `prompts`.
    pub prompt_ids: &'a [Vec<u32>],
    pub reward: RewardConfig,
    /// With `grounded`: each prompt's rules (parallel to `prompts`).
    pub grounding: Option<Grounding>,
    /// Tokens every encoded prompt starts with and continues (the system prompt):
    /// encoded once per step's sampling instead of once per group.
    pub shared_prefix: usize,
}

/// The grounded decoding rules of every RL prompt.
pub(crate) struct Grounding {
    rules: Vec<(Arc<Schema>, Option<QuoteGuard>)>,
}

impl Grounding {
    /// Builds each prompt's schema ([`crate::policy::grounding::step_constraints`]).
    pub(crate) fn new(prompts: &[RlPrompt]) -> Result<Self> {
        let rules = prompts
            .iter()
            .map(|p| {
                crate::policy::grounding::step_constraints(&p.instruction, &p.shown, &p.elements)
                    .with_context(|| format!("prompt `{}`: grounding schema", p.id))
            })
            .collect::<Result<_>>()?;
        Ok(Grounding { rules })
    }

    /// Fresh constraints for the prompts at `indices`, over `policy`'s vocabulary.
    pub(crate) fn constraints<'g>(
        &'g self,
        policy: &'g Policy,
        indices: impl Iterator<Item = usize>,
    ) -> Vec<Constraint<'g>> {
        indices
            .map(|i| {
                let (schema, quotes) = &self.rules[i];
                Constraint {
                    matcher: schema.matcher(),
                    quotes: quotes.clone(),
                    token_bytes: policy.token_bytes(),
                }
            })
            .collect()
    }
}
