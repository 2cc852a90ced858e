"""The Salvage-DS loss for verl's actor (``actor_rollout_wg.set_loss_fn``).

ALGORITHMS.md §5, per mini-batch::

    L = agg(pg) + β·agg(kl) + λ·salvage_nll        agg = seq-mean-token-mean

- ``pg``: verl's own ``vanilla`` policy loss (ratio clamp ±20, clip [1-0.2, 1+0.32],
  dual clip 3 for negative advantages) over the RL rows' response tokens;
- ``kl``: verl's ``low_var_kl`` (k3, clamped ±10) over the same tokens, β = 1e-3;
- ``salvage_nll``: −log p of the ground-truth action's tokens on salvage rows
  (prompt + the rollout's own reasoning + the spliced action; nothing else gets
  loss), λ = 0.10.

The trainer (:mod:`rmsweb_verl.trainer`) puts three per-token fields next to verl's:
``rl_token_mask`` (the response mask of RL rows, 0 on salvage and padding rows),
``salvage_action_mask`` (the action tokens of salvage rows) and ``loss_row_weight``
(N / N_rl on RL rows and N / N_salvage on salvage rows, N the step's rows). verl's
seq-mean-token-mean divides by the mini-batch's row count; the weights turn that into
the mean over the RL rows and over the salvage rows respectively, so each term is the
mean over its own sequences, as in rmsweb's trainer. This is exact when a mini-batch
holds the step's mix of RL and salvage rows (one mini-batch a step, or an even
layout), and a reweighting of the same rows otherwise. The weights multiply the
advantages (the clipped objective is linear in a positive factor), the k3 values and
the NLL, so verl's clipping, its diagnostics and its aggregation run unchanged.
"""

from __future__ import annotations

import torch

SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"

#: The fields the trainer writes for this loss.
FIELDS = ("rl_token_mask", "salvage_action_mask", "loss_row_weight")


def salvage_terms(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    ref_log_prob: torch.Tensor | None,
    rl_mask: torch.Tensor,
    action_mask: torch.Tensor,
    row_weight: torch.Tensor,
    config,
    salvage_coef: float,
    dp_size: int = 1,
    global_batch_size: int | None = None,
    entropy: torch.Tensor | None = None,
):
    """The loss on padded ``[rows, response tokens]`` tensors and its metrics.

    ``config`` is verl's ``ActorConfig`` (clip ratios, ``policy_loss.loss_mode``,
    ``use_kl_loss``, ``kl_loss_type``, ``kl_loss_coef``, ``entropy_coeff``).
    ``global_batch_size`` is the mini-batch's row count over all data-parallel ranks
    (verl's ``global_batch_size``); None means these rows are the whole mini-batch.
    """
    from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty

    if config.loss_agg_mode != SEQ_MEAN_TOKEN_MEAN:
        raise ValueError(
            f"actor_rollout_ref.actor.loss_agg_mode={config.loss_agg_mode!r}: the Salvage-DS loss "
            f"aggregates {SEQ_MEAN_TOKEN_MEAN} (ALGORITHMS.md §5)"
        )
    rows = log_prob.shape[0]
    info = {
        "dp_size": dp_size,
        "batch_num_tokens": None,
        "global_batch_size": global_batch_size if global_batch_size else rows,
        "loss_scale_factor": getattr(config, "loss_scale_factor", None),
    }
    config.global_batch_info.update(info)
    rl = rl_mask.to(torch.bool)
    action = action_mask.to(log_prob.dtype)
    w = row_weight.to(log_prob.dtype)
    policy_loss_fn = get_policy_loss_fn(config.policy_loss.get("loss_mode", "vanilla"))
    pg_loss, pg_metrics = policy_loss_fn(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages * w,
        response_mask=rl,
        loss_agg_mode=SEQ_MEAN_TOKEN_MEAN,
        config=config,
        rollout_is_weights=None,
    )
    loss = pg_loss
    metrics = {f"actor/{k}" if not k.startswith("actor/") else k: v for k, v in pg_metrics.items()}
    metrics["actor/pg_loss"] = pg_loss.detach().item()
    if entropy is not None and config.entropy_coeff:
        entropy_loss = agg_loss(loss_mat=entropy * w, loss_mask=rl, loss_agg_mode=SEQ_MEAN_TOKEN_MEAN, **info)
        loss = loss - config.entropy_coeff * entropy_loss
        metrics["actor/entropy_loss"] = entropy_loss.detach().item()
    if config.use_kl_loss:
        if ref_log_prob is None:
            raise ValueError("actor_rollout_ref.actor.use_kl_loss needs ref_log_prob in the batch")
        kld = kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=config.kl_loss_type)
        kl_loss = agg_loss(loss_mat=kld * w, loss_mask=rl, loss_agg_mode=SEQ_MEAN_TOKEN_MEAN, **info)
        loss = loss + config.kl_loss_coef * kl_loss
        metrics["actor/kl_loss"] = kl_loss.detach().item()
        metrics["actor/kl_coef"] = config.kl_loss_coef
    if salvage_coef and bool(action.any()):
        nll = agg_loss(loss_mat=-log_prob * w, loss_mask=action, loss_agg_mode=SEQ_MEAN_TOKEN_MEAN, **info)
        loss = loss + salvage_coef * nll
        metrics["salvage/nll"] = nll.detach().item()
    return loss, metrics


def salvage_ds_loss(config, model_output, data, dp_group=None, salvage_coef: float = 0.10):
    """verl's loss-function signature (``ppo_loss``'s), for ``set_loss_fn``."""
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.utils.padding import no_padding_2_padding

    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    entropy = model_output.get("entropy", None)
    if entropy is not None:
        entropy = no_padding_2_padding(entropy, data)
    dp_size = data["dp_size"]
    global_batch_size = data["global_batch_size"]
    config.global_batch_info["batch_num_tokens"] = data["batch_num_tokens"]
    fields = ["response_mask", "old_log_probs", "advantages", *FIELDS]
    if "ref_log_prob" in data:
        fields.append("ref_log_prob")
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise KeyError(
            f"salvage_ds_loss: the batch lacks {missing}: run it with the rmsweb_verl trainer "
            "(trainer.v1.trainer_mode=salvage_ds)"
        )
    d = data.select(*fields).to_padded_tensor()
    loss, metrics = salvage_terms(
        log_prob=log_prob,
        old_log_prob=d["old_log_probs"],
        advantages=d["advantages"],
        ref_log_prob=d.get("ref_log_prob", None),
        rl_mask=d["rl_token_mask"] * d["response_mask"],
        action_mask=d["salvage_action_mask"] * d["response_mask"],
        row_weight=d["loss_row_weight"],
        config=config,
        salvage_coef=salvage_coef,
        dp_size=dp_size,
        global_batch_size=global_batch_size,
        entropy=entropy,
    )
    summed = dp_size > 1 or global_batch_size is not None
    agg = AggregationType.SUM if summed else AggregationType.MEAN
    out = {}
    for k, v in metrics.items():
        if k in ("actor/pg_loss", "actor/kl_loss", "salvage/nll", "actor/entropy_loss"):
            out[k] = Metric(value=v, aggregation=agg)
        elif k == "actor/kl_coef":
            out[k] = v
        else:
            out[k] = Metric(value=v, aggregation=AggregationType.MEAN)
    return loss, out
