//! The policy update of a step: RL sequences of accepted groups with their
//! advantages, old (sampling) and reference (adapter off) log-probs, salvage
//! sequences, and the mini-batch / micro-batch loop with the Salvage-DS loss.
use super::config::PgTokens;
use super::groups::advantages;
use super::loss::{low_var_kl, policy_loss, salvage_nll, seq_mean_token_mean, total};
use super::pg_tokens::action_mask;
use super::seqs::{self, TrainSeq, padded, row, token_logps};
use super::step::{Ctx, Group, Routed};
use crate::model::Decoder;
use crate::train::optim::{AdamW, accumulate_grads, clip_grad_norm};
use crate::train::schedule::cosine_with_warmup;
use anyhow::Result;
use candle_core::{DType, Tensor};
use std::collections::HashMap;

/// Sums over the updates of a step (divided by `updates` when logged).
#[derive(Debug, Default)]
pub struct UpdateStats {
    pub updates: usize,
    pub pg_loss: f64,
    pub kl_loss: f64,
    pub salvage_nll: f64,
    pub salvage_updates: usize,
    pub grad_norm: f64,
    pub lr: f64,
    /// Token-weighted over all RL tokens of the step.
    pub entropy: f64,
    pub clipfrac: f64,
    pub clipfrac_lower: f64,
    pub ppo_kl: f64,
    pub rl_tokens: f64,
    pub trained_tokens: usize,
    /// Seconds spent on the reference log-probs (`timing_s/ref`).
    pub ref_s: f64,
    /// Seconds spent in the mini-batch updates (`timing_s/update_actor`).
    pub update_s: f64,
}

struct RlItem {
    seq: TrainSeq,
    adv: f32,
    old: Vec<f32>,
    reference: Vec<f32>,
    /// Per response token: whether it carries the policy-gradient term.
    pg_mask: Vec<f32>,
}

/// Reference log-probs (detached) of every sequence, in micro-batches: the model with
/// the RL adapter switched off is the frozen SFT policy.
fn reference_logps(ctx: &Ctx, set: &[TrainSeq]) -> Result<Vec<Vec<f32>>> {
    let model = ctx.policy.model();
    model.set_adapters_enabled(false);
    let result = (|| {
        let mut out = Vec::with_capacity(set.len());
        for chunk in set.chunks(ctx.cfg.micro_batch) {
            let refs: Vec<&TrainSeq> = chunk.iter().collect();
            let lp = token_logps(ctx.policy.scorer(), &refs, ctx.cfg.temperature, false)?;
            let logp = lp.logp.detach();
            for (i, s) in chunk.iter().enumerate() {
                out.push(row(&logp, i, s.resp_len())?);
            }
        }
        Ok(out)
    })();
    model.set_adapters_enabled(true);
    result
}

fn accumulate(model: &Decoder, loss: &Tensor, grads: &mut HashMap<String, Tensor>) -> Result<()> {
    accumulate_grads(grads, &loss.backward()?, &model.trainable_vars())
}

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar::<f64>()?)
}

/// Builds the RL and salvage sequences and runs the mini-batch updates.
// Kept whole: the mini-batch loop accumulates the RL and salvage micro-batches'
// gradients and sums together, then clips and steps once per mini-batch.
pub(crate) fn update(
    ctx: &Ctx,
    groups: &[Group],
    opt: &mut AdamW,
    step: usize,
    total_updates: usize,
    warmup: usize,
) -> Result<UpdateStats> {
    let cfg = ctx.cfg;
    let loss_cfg = cfg.loss();
    let rl_groups = rl_items(ctx, groups);
    let sv_groups = salvage_seqs(ctx, groups)?;
    let mut st = UpdateStats::default();
    let updates = rl_groups
        .len()
        .div_ceil(cfg.mini_batch)
        .max(sv_groups.len().div_ceil(cfg.mini_batch));
    if updates == 0 {
        return Ok(st);
    }
    // Reference log-probs, once, before any update.
    let t_ref = std::time::Instant::now();
    let rl_items = with_reference(ctx, rl_groups)?;
    st.ref_s = t_ref.elapsed().as_secs_f64();
    let t_update = std::time::Instant::now();
    let model = ctx.policy.model();
    for u in 0..updates {
        let rl: Vec<&RlItem> = rl_items
            .iter()
            .skip(u * cfg.mini_batch)
            .take(cfg.mini_batch)
            .flatten()
            .collect();
        let sv: Vec<&TrainSeq> = sv_groups
            .iter()
            .enumerate()
            .filter(|(i, _)| i % updates == u)
            .flat_map(|(_, g)| g.iter())
            .collect();
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let (mut pg_sum, mut kl_sum, mut nll_sum) = (0.0, 0.0, 0.0);
        for chunk in rl.chunks(cfg.micro_batch) {
            let w = chunk.len() as f64 / rl.len() as f64;
            let (loss, pg, kl) = rl_loss(ctx, chunk, w, &mut st)?;
            pg_sum += pg;
            kl_sum += kl;
            accumulate(model, &loss, &mut grads)?;
        }
        if loss_cfg.salvage_coef != 0.0 {
            for chunk in sv.chunks(cfg.micro_batch) {
                let lp = token_logps(ctx.policy.scorer(), chunk, cfg.temperature, false)?;
                let w = chunk.len() as f64 / sv.len() as f64;
                let nll = salvage_nll(&lp.logp, &lp.mask)?;
                nll_sum += scalar(&nll)? * w;
                st.trained_tokens += chunk.iter().map(|s| s.ids.len()).sum::<usize>();
                let loss = nll.affine(loss_cfg.salvage_coef * w, 0.0)?;
                accumulate(model, &loss, &mut grads)?;
            }
        }
        anyhow::ensure!(
            pg_sum.is_finite() && kl_sum.is_finite() && nll_sum.is_finite(),
            "loss is not finite at step {}",
            step + 1
        );
        if grads.is_empty() {
            continue;
        }
        let grad_norm = clip_grad_norm(&mut grads, cfg.max_grad_norm)?;
        let k = step * cfg.updates_per_step() + u;
        let lr = match cfg.lr_schedule.as_str() {
            "cosine" => cosine_with_warmup(cfg.lr, k, total_updates, warmup),
            _ => cfg.lr,
        };
        opt.step(&grads, lr)?;
        st.updates += 1;
        st.pg_loss += pg_sum;
        st.kl_loss += kl_sum;
        if !sv.is_empty() && loss_cfg.salvage_coef != 0.0 {
            st.salvage_nll += nll_sum;
            st.salvage_updates += 1;
        }
        st.grad_norm += grad_norm;
        st.lr = lr;
    }
    st.update_s = t_update.elapsed().as_secs_f64();
    st.average();
    Ok(st)
}

/// The RL groups' items: each rollout with its group-relative advantage and its old
/// log-probs, the sampling policy's, recorded as it was sampled (the same model and
/// temperature; `rollout::sample_groups` tests them equal to a full forward's). Their
/// reference log-probs are filled in by [`with_reference`], once every sequence is
/// known.
fn rl_items(ctx: &Ctx, groups: &[Group]) -> Vec<Vec<RlItem>> {
    let cfg = ctx.cfg;
    groups
        .iter()
        .filter(|g| g.routed == Routed::Rl)
        .map(|g| {
            let adv = advantages(&g.rewards, &g.stats);
            let prompt = &ctx.prompt_ids[g.prompt];
            g.rollouts
                .iter()
                .zip(adv)
                .filter(|(r, _)| !r.ids.is_empty())
                .map(|(r, a)| {
                    let seq = TrainSeq::rl(prompt, &r.ids).seeing(g.image.clone());
                    let pg_mask = match cfg.pg_tokens {
                        PgTokens::Response => seq.mask.clone(),
                        PgTokens::Action => action_mask(&r.ids, ctx.policy.token_bytes()),
                    };
                    RlItem {
                        seq,
                        adv: a as f32,
                        old: r.logps.clone(),
                        reference: Vec::new(),
                        pg_mask,
                    }
                })
                .collect()
        })
        .collect()
}

/// The salvage groups' sequences: own reasoning + ground-truth action, action-only
/// mask. A spliced sequence can outgrow the model's positions (a long ground-truth
/// action after a rollout that used them all); such a sequence is left out.
fn salvage_seqs(ctx: &Ctx, groups: &[Group]) -> Result<Vec<Vec<TrainSeq>>> {
    let tok = &ctx.policy.tokenizer;
    let max_len = ctx.policy.model().config.max_position_embeddings;
    let mut sv_groups = Vec::new();
    for g in groups.iter().filter(|g| g.routed == Routed::Salvage) {
        let prompt = &ctx.prompt_ids[g.prompt];
        let targets = &ctx.prompts[g.prompt].targets;
        let mut v = Vec::new();
        for t in &g.texts {
            let (s, _) = seqs::salvage(tok, prompt, t, targets)?;
            if s.masked() > 0 && s.ids.len() <= max_len {
                v.push(s.seeing(g.image.clone()));
            }
        }
        sv_groups.push(v);
    }
    Ok(sv_groups)
}

/// The RL items with their reference log-probs (the frozen SFT policy's), scored in
/// one pass over every sequence.
fn with_reference(ctx: &Ctx, rl_groups: Vec<Vec<RlItem>>) -> Result<Vec<Vec<RlItem>>> {
    let flat: Vec<TrainSeq> = rl_groups
        .iter()
        .flat_map(|g| g.iter().map(|x| x.seq.clone()))
        .collect();
    let mut reference = reference_logps(ctx, &flat)?.into_iter();
    Ok(rl_groups
        .into_iter()
        .map(|g| {
            g.into_iter()
                .filter_map(|item| {
                    reference
                        .next()
                        .map(|reference| RlItem { reference, ..item })
                })
                .collect()
        })
        .collect())
}

/// One RL micro-batch's loss, weighted by `w` (its share of the mini-batch's
/// sequences), with its policy-gradient and KL parts (weighted too); the token
/// statistics go into `st`.
fn rl_loss(
    ctx: &Ctx,
    chunk: &[&RlItem],
    w: f64,
    st: &mut UpdateStats,
) -> Result<(Tensor, f64, f64)> {
    let cfg = ctx.cfg;
    let loss_cfg = cfg.loss();
    let seqs_: Vec<&TrainSeq> = chunk.iter().map(|x| &x.seq).collect();
    let lp = token_logps(ctx.policy.scorer(), &seqs_, cfg.temperature, true)?;
    let width = lp.logp.dim(1)?;
    // One per-token column of the chunk's items, padded to the scored width.
    let column = |field: fn(&RlItem) -> &[f32]| {
        padded(
            &chunk.iter().map(|x| field(x)).collect::<Vec<_>>(),
            width,
            &lp.logp,
        )
    };
    let old = column(|x| &x.old)?;
    let refp = column(|x| &x.reference)?;
    let pg_mask = column(|x| &x.pg_mask)?;
    let adv = Tensor::from_vec(
        chunk.iter().map(|x| x.adv).collect::<Vec<f32>>(),
        chunk.len(),
        lp.logp.device(),
    )?
    .to_dtype(lp.logp.dtype())?;
    let pl = policy_loss(&lp.logp, &old, &adv, &pg_mask, &loss_cfg)?;
    // Masked-out tokens add nothing, but each sequence still divides by all its
    // response tokens: the action tokens weigh what they weigh over the whole
    // response (dividing by the action's few tokens alone would multiply the step
    // size on them).
    let pg = seq_mean_token_mean(&(&pl.per_token * &pg_mask)?, &lp.mask)?;
    let kl = seq_mean_token_mean(&low_var_kl(&lp.logp, &refp)?, &lp.mask)?;
    let loss = total(&pg, &kl, None, &loss_cfg)?.affine(w, 0.0)?;
    let ntok: f64 = chunk.iter().map(|x| x.seq.masked() as f64).sum();
    st.clipfrac += pl.clipfrac * ntok;
    st.clipfrac_lower += pl.clipfrac_lower * ntok;
    st.ppo_kl += pl.ppo_kl * ntok;
    if let Some(e) = &lp.entropy {
        st.entropy += super::loss::token_mean(e, &lp.mask)? * ntok;
    }
    st.rl_tokens += ntok;
    st.trained_tokens += chunk.iter().map(|x| x.seq.ids.len()).sum::<usize>();
    Ok((loss, scalar(&pg)? * w, scalar(&kl)? * w))
}

impl UpdateStats {
    /// Turns the step's sums into means: losses and gradient norm per update, the
    /// salvage NLL per salvage update, token statistics per RL token.
    fn average(&mut self) {
        let u = self.updates.max(1) as f64;
        self.pg_loss /= u;
        self.kl_loss /= u;
        self.grad_norm /= u;
        self.salvage_nll /= self.salvage_updates.max(1) as f64;
        let t = self.rl_tokens.max(1.0);
        self.entropy /= t;
        self.clipfrac /= t;
        self.clipfrac_lower /= t;
        self.ppo_kl /= t;
    }
}
