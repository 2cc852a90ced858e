"""The Salvage-DS loss on CPU tensors equals ALGORITHMS.md §5 written out by hand,
salvage term included, and puts no gradient off the action tokens of salvage rows."""

from __future__ import annotations

import math

import pytest
import torch

from rmsweb_verl.loss import salvage_terms
from rmsweb_verl.trainer import row_weights


@pytest.fixture(scope="module")
def actor_config():
    from hydra import compose, initialize_config_module
    from verl.utils.config import omega_conf_to_dataclass

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        cfg = compose(
            config_name="ppo_trainer",
            overrides=[
                "actor_rollout_ref.actor.clip_ratio_low=0.2",
                "actor_rollout_ref.actor.clip_ratio_high=0.32",
                "actor_rollout_ref.actor.clip_ratio_c=3.0",
                "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
                "actor_rollout_ref.actor.use_kl_loss=true",
                "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
                "actor_rollout_ref.actor.kl_loss_coef=0.001",
                "actor_rollout_ref.actor.entropy_coeff=0",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                "actor_rollout_ref.rollout.n=4",
            ],
        )
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def reference_loss(logp, old, ref, adv, rl_rows, sv_rows, resp_mask, action_mask, lam=0.10):
    """ALGORITHMS.md §5, literally: per-token terms, then seq-mean-token-mean over the
    RL rows (pg, kl) and over the salvage rows' action tokens (nll)."""

    def seq_mean_token_mean(x, mask, rows):
        per_seq = []
        for i in rows:
            m = mask[i]
            if m.sum() > 0:
                per_seq.append((x[i] * m).sum() / m.sum())
        return torch.stack(per_seq).mean() if per_seq else torch.tensor(0.0)

    ratio = torch.exp(torch.clamp(logp - old, -20, 20))
    a = adv
    pg = torch.maximum(-a * ratio, -a * torch.clamp(ratio, 1 - 0.2, 1 + 0.32))
    pg = torch.where(a < 0, torch.minimum(pg, -a * 3.0), pg)
    kl = torch.clamp(torch.exp(ref - logp) - (ref - logp) - 1, -10, 10)
    nll = -logp
    return (
        seq_mean_token_mean(pg, resp_mask, rl_rows)
        + 1e-3 * seq_mean_token_mean(kl, resp_mask, rl_rows)
        + lam * seq_mean_token_mean(nll, action_mask, sv_rows)
    )


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    rows, width = 6, 7
    lengths = [7, 5, 6, 3, 7, 4]
    resp = torch.zeros(rows, width)
    for i, n in enumerate(lengths):
        resp[i, :n] = 1
    logp = -torch.rand(rows, width, generator=g) * 3
    old = logp.detach() + torch.randn(rows, width, generator=g) * 0.4  # ratios inside and outside the clip
    ref = logp.detach() + torch.randn(rows, width, generator=g) * 0.3
    adv_rows = torch.tensor([1.3, -0.8, -2.0, 0.5, 0.0, 0.0])
    adv = adv_rows[:, None].expand(rows, width).clone()
    tags = [{"routed": "rl"}] * 4 + [{"routed": "salvage"}] * 2
    rl_rows, sv_rows = [0, 1, 2, 3], [4, 5]
    action = torch.zeros(rows, width)
    action[4, 3:6] = 1  # the spliced action's tokens
    action[5, 1:3] = 1
    return logp, old, ref, adv, resp, action, tags, rl_rows, sv_rows


def masks(resp, action, tags, rl_rows):
    rl = torch.zeros_like(resp)
    rl[rl_rows] = resp[rl_rows]
    w = torch.tensor(row_weights(tags))[:, None].expand_as(resp)
    return rl, action * resp, w


def test_loss_equals_algorithms_by_hand(actor_config):
    for seed in range(5):
        logp, old, ref, adv, resp, action, tags, rl_rows, sv_rows = batch(seed)
        rl, act, w = masks(resp, action, tags, rl_rows)
        got, metrics = salvage_terms(logp, old, adv, ref, rl, act, w, actor_config, salvage_coef=0.10)
        want = reference_loss(logp, old, ref, adv, rl_rows, sv_rows, resp, act)
        assert math.isclose(got.item(), want.item(), rel_tol=1e-5, abs_tol=1e-6), (seed, got, want)
        assert {"actor/pg_loss", "actor/kl_loss", "salvage/nll", "actor/pg_clipfrac", "actor/ppo_kl"} <= set(metrics)
        # anchor-free: the same loss without the salvage term
        free, m = salvage_terms(logp, old, adv, ref, rl, act, w, actor_config, salvage_coef=0.0)
        want_free = reference_loss(logp, old, ref, adv, rl_rows, sv_rows, resp, act, lam=0.0)
        assert math.isclose(free.item(), want_free.item(), rel_tol=1e-5, abs_tol=1e-6)
        assert "salvage/nll" not in m


def test_split_across_data_parallel_ranks_sums_to_the_whole(actor_config):
    """verl normalizes each rank's micro-batch by the global batch size; summing the
    ranks' losses (the all-reduced gradient) gives the whole batch's loss."""
    logp, old, ref, adv, resp, action, tags, rl_rows, sv_rows = batch(3)
    rl, act, w = masks(resp, action, tags, rl_rows)
    whole, _ = salvage_terms(logp, old, adv, ref, rl, act, w, actor_config, 0.10)
    order = [0, 4, 1, 2, 5, 3]  # each half holds the step's mix: 2 RL + 1 salvage
    parts = [order[:3], order[3:]]
    total = 0.0
    for p in parts:
        # dp_size 2 and the global batch size 6: verl's normalization
        part, _ = salvage_terms(
            logp[p], old[p], adv[p], ref[p], rl[p], act[p], w[p], actor_config, 0.10, dp_size=2, global_batch_size=6
        )
        total += part.item() / 2  # DDP averages the ranks' gradients
    assert math.isclose(total, whole.item(), rel_tol=1e-5)


def test_no_gradient_off_the_action_tokens_of_salvage_rows(actor_config):
    logp, old, ref, adv, resp, action, tags, rl_rows, sv_rows = batch(1)
    rl, act, w = masks(resp, action, tags, rl_rows)
    x = logp.clone().requires_grad_(True)
    loss, _ = salvage_terms(x, old, adv, ref, rl, act, w, actor_config, 0.10)
    loss.backward()
    g = x.grad
    for i in sv_rows:
        off = (act[i] == 0)
        assert torch.all(g[i][off] == 0), (i, g[i])
        assert torch.all(g[i][act[i] == 1] < 0), "the NLL raises the action's log-prob"
    for i in rl_rows:
        assert torch.all(g[i][resp[i] == 0] == 0), "no gradient on padding"
        assert g[i][resp[i] == 1].abs().sum() > 0


def test_only_seq_mean_token_mean_is_accepted(actor_config):
    import copy

    logp, old, ref, adv, resp, action, tags, rl_rows, _ = batch(0)
    rl, act, w = masks(resp, action, tags, rl_rows)
    cfg = copy.copy(actor_config)
    object.__setattr__(cfg, "loss_agg_mode", "token-mean")
    with pytest.raises(ValueError, match="loss_agg_mode"):
        salvage_terms(logp, old, adv, ref, rl, act, w, cfg, 0.10)


def test_row_weights():
    tags = [{"routed": "rl"}] * 3 + [{"routed": "salvage"}] + [{"routed": "rl", "is_padding": True}]
    assert row_weights(tags) == [4 / 3, 4 / 3, 4 / 3, 4.0, 0.0]
