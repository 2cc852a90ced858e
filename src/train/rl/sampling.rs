//! One step's sampling (steps 1–2 of the RL trainer's step): draw the step's prompts
//! from the run's seeded stream, decode each prompt's group of rollouts (several
//! groups at once, grounded when the run is, from the shared prefix), read and score
//! every rollout against the prompt's targets, and gate the groups, refilling until
//! `train_batch` are accepted or `max_gen_batches` were drawn.

use super::groups::{GateDecision, GroupStats, decide};
use super::prompts::RlPrompt;
use super::rollout::{GroupDecoding, Rollout, RolloutConfig, sample_groups};
use super::rollout_seeing::sample_groups_seeing;
use super::seqs::SeenImage;
use super::step::{Ctx, Group, Routed};
use crate::action::Action;
use crate::action::parse::parse_response;
use crate::model::prefix::PrefixCache;
use crate::model::vl::prompt::Screenshot;
use crate::reward::{Decision, score_against};
use crate::train::sft::stream_item;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// Seed of the `k`-th prompt drawn in the run.
fn draw_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A17
}

/// Samples and gates generation batches until `train_batch` groups are accepted or
/// the cap is reached. Returns the groups (accepted ones routed `rl`, surplus and
/// rejected ones `discarded` for now), the generation batches used and the surplus.
pub(super) fn sample_and_gate(ctx: &Ctx, cursor: &mut u64) -> Result<(Vec<Group>, usize, usize)> {
    let cfg = ctx.cfg;
    let gate = cfg.gate();
    let rc = RolloutConfig {
        temperature: cfg.temperature,
        top_p: cfg.top_p,
        max_new_tokens: cfg.max_new_tokens,
    };
    let mut groups = Vec::new();
    let (mut accepted, mut surplus, mut batches) = (0usize, 0usize, 0usize);
    let mut perms = HashMap::new();
    // Screenshots loaded this step, by prompt (a prompt drawn twice shares one).
    let mut shots = HashMap::new();
    // The shared prefix under this step's weights, with room for any prompt's rest
    // and its response; encoded on the first chunk that can use it.
    let mut prefix: Option<PrefixCache> = None;
    while accepted < cfg.train_batch && batches < cfg.max_gen_batches {
        // The batch's prompts (and their seeds), then its rollouts, several groups
        // decoding together (`decode_rows` rows at most).
        let draws: Vec<(usize, u64)> = (0..cfg.gen_batch)
            .map(|_| {
                let k = *cursor;
                *cursor += 1;
                let pi = stream_item(k as usize, ctx.prompts.len(), cfg.seed, &mut perms);
                (pi, draw_seed(cfg.seed, k))
            })
            .collect();
        let per_chunk = (cfg.decode_rows / cfg.n).max(1);
        let mut sampled: Vec<Vec<Rollout>> = Vec::with_capacity(draws.len());
        let images: Vec<Option<SeenImage>> = draws
            .iter()
            .map(|(pi, _)| screenshot(ctx, *pi, &mut shots))
            .collect::<Result<_>>()?;
        for (chunk, chunk_images) in draws.chunks(per_chunk).zip(images.chunks(per_chunk)) {
            sampled.extend(decode_chunk(ctx, chunk, chunk_images, &rc, &mut prefix)?);
        }
        for (((pi, _), rollouts), image) in draws.into_iter().zip(sampled).zip(images) {
            let scored = score_rollouts(ctx, &ctx.prompts[pi], &rollouts)?;
            let gate_decision = decide(&scored.stats, &gate);
            let routed = if gate_decision == GateDecision::Accepted {
                if accepted < cfg.train_batch {
                    accepted += 1;
                    Routed::Rl
                } else {
                    surplus += 1;
                    Routed::Discarded
                }
            } else {
                Routed::Discarded
            };
            groups.push(Group {
                prompt: pi,
                gen_batch: batches,
                rollouts,
                texts: scored.texts,
                decisions: scored.decisions,
                actions: scored.actions,
                rewards: scored.rewards,
                stats: scored.stats,
                gate: gate_decision,
                routed,
                image,
            });
        }
        batches += 1;
    }
    Ok((groups, batches, surplus))
}

/// Decodes one chunk of drawn prompts (`(prompt, seed)`), `n` rollouts each, as one
/// batch: grounded when the run is, from the shared prefix (encoded on the first
/// chunk that can use it) for the prompts read as text.
fn decode_chunk(
    ctx: &Ctx,
    chunk: &[(usize, u64)],
    chunk_images: &[Option<SeenImage>],
    rc: &RolloutConfig,
    prefix: &mut Option<PrefixCache>,
) -> Result<Vec<Vec<Rollout>>> {
    let cfg = ctx.cfg;
    let shown: Vec<Option<&Screenshot>> = chunk_images
        .iter()
        .map(|i| i.as_ref().map(|i| &*i.0))
        .collect();
    let prompts: Vec<&[u32]> = chunk
        .iter()
        .map(|(pi, _)| ctx.prompt_ids[*pi].as_slice())
        .collect();
    let seeds: Vec<u64> = chunk.iter().map(|(_, s)| *s).collect();
    let rules = ctx
        .grounding
        .as_ref()
        .map(|g| g.constraints(ctx.policy, chunk.iter().map(|(pi, _)| *pi)));
    // The prefix serves prompts decoded as text only (a screenshot's prompt is
    // encoded whole by the VL model).
    let some_text = shown.iter().any(Option::is_none);
    if ctx.shared_prefix > 0 && some_text && prefix.is_none() {
        let longest = ctx.prompt_ids.iter().map(Vec::len).max().unwrap_or(0);
        let headroom = longest - ctx.shared_prefix + cfg.max_new_tokens + 1;
        let ids = &ctx.prompt_ids[0][..ctx.shared_prefix];
        *prefix = Some(PrefixCache::encode(ctx.policy.model(), ids, headroom)?);
    }
    let with = GroupDecoding {
        rules: rules.as_deref(),
        prefix: prefix.as_ref(),
        ..GroupDecoding::default()
    };
    match ctx.policy.vl() {
        None => sample_groups(
            ctx.policy.model(),
            &prompts,
            cfg.n,
            &ctx.policy.stop,
            rc,
            &seeds,
            with,
        ),
        Some(vl) => sample_groups_seeing(
            vl,
            &prompts,
            &shown,
            cfg.n,
            &ctx.policy.stop,
            rc,
            &seeds,
            with,
        ),
    }
}

/// A group's rollouts read back: their texts, parsed first actions, rubric decisions
/// against the prompt's targets, rewards and reward statistics.
struct ScoredGroup {
    texts: Vec<String>,
    decisions: Vec<Decision>,
    actions: Vec<Option<Action>>,
    rewards: Vec<f64>,
    stats: GroupStats,
}

fn score_rollouts(ctx: &Ctx, p: &RlPrompt, rollouts: &[Rollout]) -> Result<ScoredGroup> {
    let n = rollouts.len();
    let mut texts = Vec::with_capacity(n);
    let mut decisions = Vec::with_capacity(n);
    let mut actions = Vec::with_capacity(n);
    for r in rollouts {
        let text = ctx
            .policy
            .tokenizer
            .decode(r.text_ids(), true)
            .map_err(|e| anyhow::anyhow!("decoding a rollout: {e}"))?;
        actions.push(
            parse_response(&text)
                .ok()
                .and_then(|p| p.actions.into_iter().next()),
        );
        decisions.push(score_against(&text, &p.targets, &p.elements, &ctx.reward));
        texts.push(text);
    }
    let rewards: Vec<f64> = decisions.iter().map(|d| d.score).collect();
    let stats = GroupStats::of(&rewards)
        .ok_or_else(|| anyhow::anyhow!("prompt `{}`: non-finite reward", p.id))?;
    Ok(ScoredGroup {
        texts,
        decisions,
        actions,
        rewards,
        stats,
    })
}

/// The loaded screenshot of prompt `pi` when the policy sees and the prompt has one
/// (loaded once per step).
fn screenshot(
    ctx: &Ctx,
    pi: usize,
    shots: &mut HashMap<usize, SeenImage>,
) -> Result<Option<SeenImage>> {
    let (Some(cfg), Some(path)) = (&ctx.policy.image, &ctx.prompts[pi].screenshot) else {
        return Ok(None);
    };
    if let Some(s) = shots.get(&pi) {
        return Ok(Some(s.clone()));
    }
    let shot = Screenshot::load(path, cfg, ctx.policy.model().device())
        .with_context(|| format!("prompt `{}`", ctx.prompts[pi].id))?;
    let s = SeenImage(Arc::new(shot));
    shots.insert(pi, s.clone());
    Ok(Some(s))
}
