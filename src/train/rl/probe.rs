//! The log-prob probe: per-token log-probabilities of the ground-truth action and of
//! sampled wrong actions in the same context (`salvage/logprob_*`).
use super::seqs::{self, TrainSeq, row, token_logps};
use super::step::{Ctx, Group};
use crate::action::parse::parse_response;
use anyhow::Result;

/// Log-probs of correct vs sampled wrong actions (per-token means, averaged over
/// probes).
#[derive(Debug, Default)]
pub struct Probe {
    pub correct: Vec<f64>,
    pub wrong: Vec<f64>,
}

impl Probe {
    /// The mean of `v` (None when empty).
    pub fn mean(v: &[f64]) -> Option<f64> {
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
    /// logprob_correct − logprob_wrong, when both were measured.
    pub fn gap(&self) -> Option<f64> {
        Some(Self::mean(&self.correct)? - Self::mean(&self.wrong)?)
    }
}

/// For up to `probe_groups` sampled groups: a wrong rollout (reward < 1 with a
/// readable action) gives the log-prob of its own action tokens, and the same
/// rollout with the ground-truth action spliced in gives the log-prob of the correct
/// action in the same context. Groups without a wrong rollout probe the correct
/// action after their first rollout's reasoning.
pub(crate) fn probe_logprobs(ctx: &Ctx, groups: &[Group]) -> Result<Probe> {
    let tok = &ctx.policy.tokenizer;
    let max_len = ctx.policy.model().config.max_position_embeddings;
    // A group's probes side by side (wrong, then correct): they share the prompt, so
    // `token_logps` encodes it once for both.
    let mut probes: Vec<(TrainSeq, bool)> = Vec::new();
    for g in groups.iter().take(ctx.cfg.probe_groups) {
        let prompt = &ctx.prompt_ids[g.prompt];
        let targets = &ctx.prompts[g.prompt].targets;
        let bad = g.texts.iter().zip(&g.rewards).find_map(|(t, &r)| {
            (r < 1.0)
                .then(|| parse_response(t).ok().map(|p| (t, p)))
                .flatten()
        });
        let base = match &bad {
            Some((t, p)) => {
                let s = seqs::span_seq(tok, prompt, t, &p.action_span)?;
                if s.masked() > 0 && s.ids.len() <= max_len {
                    probes.push((s.seeing(g.image.clone()), false));
                }
                t.as_str()
            }
            None => g.texts.first().map_or("", String::as_str),
        };
        let (s, _) = seqs::salvage(tok, prompt, base, targets)?;
        if s.masked() > 0 && s.ids.len() <= max_len {
            probes.push((s.seeing(g.image.clone()), true));
        }
    }
    let mut probe = Probe::default();
    for chunk in probes.chunks(ctx.cfg.micro_batch) {
        let refs: Vec<&TrainSeq> = chunk.iter().map(|(s, _)| s).collect();
        let lp = token_logps(ctx.policy.scorer(), &refs, ctx.cfg.temperature, false)?;
        let logp = lp.logp.detach();
        for (i, (s, is_correct)) in chunk.iter().enumerate() {
            let v = row(&logp, i, s.resp_len())?;
            let (sum, n) = v
                .iter()
                .zip(&s.mask)
                .filter(|(_, m)| **m > 0.0)
                .fold((0.0f64, 0usize), |(a, n), (x, _)| {
                    (a + f64::from(*x), n + 1)
                });
            if n > 0 {
                let out = if *is_correct {
                    &mut probe.correct
                } else {
                    &mut probe.wrong
                };
                out.push(sum / n as f64);
            }
        }
    }
    Ok(probe)
}
