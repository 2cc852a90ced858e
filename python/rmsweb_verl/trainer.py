"""The Salvage-DS trainer: verl 0.9.1's ``PPOTrainerSync`` with the salvage anchor,
registered as ``trainer.v1.trainer_mode=salvage_ds``.

Per step, after :class:`rmsweb_verl.sampler.SalvageReplayBuffer` chose the groups:

1. **splice** (before old and reference log-probs, i.e. before verl balances the
   batch): each rollout of a salvage group becomes prompt + the rollout's own
   reasoning + the ground-truth action (:func:`rmsweb_verl.splice.splice_rollout`);
   its response, masks, ids and positions are rewritten in TransferQueue;
2. **loss fields** (after balancing, padding rows included): ``rl_token_mask``,
   ``salvage_action_mask`` and ``loss_row_weight`` for :mod:`rmsweb_verl.loss`, which
   the actor runs instead of verl's ``ppo_loss`` (``set_loss_fn``);
3. **advantages**: verl's GRPO advantages, then zero on salvage (and inert) rows;
4. **metrics**: the sampler's ``salvage/*`` and ``train/num_gen_batches``,
   ``salvage/nll`` from the loss, ``salvage/logprob_correct`` /
   ``salvage/logprob_wrong`` / ``salvage/logprob_gap`` (per-token mean old log-prob of
   the ground-truth action on salvage rows and on RL rows scoring 1, and of the
   action of RL rows scoring below 1), ``rollout_corr/rollout_log_ppl`` (mean over RL
   rows of −mean token rollout log-prob) when verl did not log it;
5. **rollout dump** (``trainer.rollout_data_dir``): verl's JSONL fields plus each
   row's ``gate``, ``routed``, ``salvage``, ``rule`` and ``pair_id``, which
   ``python -m rmsweb_verl.rollouts`` turns into ``rollouts.jsonl``.

Limitation: splicing rewrites 1-D position ids; multimodal rollouts with M-RoPE
positions are refused with a clear error (use ``MODE=anchor-free`` for them).
"""

from __future__ import annotations

import json
import logging
import os
from functools import partial

import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from .loss import salvage_ds_loss
from .sampler import SalvageReplayBuffer
from .settings import SalvageSettings
from .splice import action_token_mask, splice_rollout

logger = logging.getLogger(__name__)

#: ``trainer.v1.trainer_mode`` of this trainer.
TRAINER_MODE = "salvage_ds"


def _rows(values) -> list:
    """The per-row items of a TransferQueue field (nested tensor, stack or list)."""
    if hasattr(values, "unbind") and getattr(values, "is_nested", False):
        return list(values.unbind())
    if hasattr(values, "tolist") and not isinstance(values, torch.Tensor):
        return list(values.tolist())
    return list(values)


def _nested(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def row_weights(tags: list[dict]) -> list[float]:
    """``loss_row_weight`` per row: N / N_rl on RL rows, N / N_salvage on salvage rows,
    0 on padding and inert rows (N = the step's real rows; see :mod:`rmsweb_verl.loss`)."""
    real = [t for t in tags if not t.get("is_padding", False)]
    n = len(real)
    n_rl = sum(t.get("routed") == "rl" for t in real)
    n_sv = sum(t.get("routed") == "salvage" for t in real)
    out = []
    for t in tags:
        if t.get("is_padding", False):
            out.append(0.0)
        elif t.get("routed") == "rl":
            out.append(n / n_rl)
        elif t.get("routed") == "salvage":
            out.append(n / n_sv)
        else:
            out.append(0.0)
    return out


@register_trainer(TRAINER_MODE)
class SalvageDSTrainer(PPOTrainerSync):
    """Salvage-DS on verl's synchronous V1 trainer (see the module docs)."""

    def __init__(self, config):
        super().__init__(config)
        if not isinstance(self.replay_buffer, SalvageReplayBuffer):
            raise ValueError(
                "trainer.v1.trainer_mode=salvage_ds needs trainer.v1.sampler.custom_sampler "
                "{path: pkg://rmsweb_verl.sampler, name: SalvageReplayBuffer}"
            )
        # verl's sync code paths test `trainer_mode == "sync"`; this is a sync trainer.
        self.trainer_mode = "sync"
        self.settings: SalvageSettings = self.replay_buffer.settings
        self._action_masks: dict[str, list[int]] = {}
        self._original: dict[str, str] = {}

    # -- setup ----------------------------------------------------------------------

    def _setup(self):
        super()._setup()
        from verl.utils.config import omega_conf_to_dataclass

        actor_config = omega_conf_to_dataclass(self.config.actor_rollout_ref.actor)
        self.actor_rollout_wg.set_loss_fn(
            partial(salvage_ds_loss, config=actor_config, salvage_coef=self.settings.salvage_coef)
        )

    # -- step -----------------------------------------------------------------------

    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        self._splice_salvage(batch, metrics)
        batch = super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        self._write_loss_fields(batch)
        return batch

    def _splice_salvage(self, batch, metrics: dict) -> None:
        self._action_masks = {}
        self._original = {}
        idx = [i for i, t in enumerate(batch.tags) if t.get("routed") == "salvage"]
        if not idx:
            return
        keys = [batch.keys[i] for i in idx]
        fields = ["prompts", "responses", "rm_scores", "reward_model", "position_ids"]
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        prompts = _rows(data["prompts"])
        responses = _rows(data["responses"])
        scores = _rows(data["rm_scores"])
        gts = _rows(data["reward_model"])
        positions = _rows(data["position_ids"])
        out = {k: [] for k in ("responses", "response_mask", "loss_mask", "input_ids", "attention_mask",
                               "position_ids", "rm_scores")}
        empty = 0
        for j, i in enumerate(idx):
            if positions[j].dim() > 1:
                raise NotImplementedError(
                    "salvage-ds: splicing rollouts with multi-dimensional (M-RoPE) position ids is not "
                    "supported; run vision-language models with MODE=anchor-free"
                )
            gt = gts[j]["ground_truth"] if isinstance(gts[j], dict) else gts[j]
            ids, mask = splice_rollout(self.tokenizer, responses[j].tolist(), gt)
            if not any(mask):
                empty += 1
            prompt = prompts[j].to(torch.int64)
            resp = torch.tensor(ids, dtype=torch.int64)
            reward = float(scores[j].sum().item())
            rm = torch.zeros(len(ids), dtype=scores[j].dtype)
            if len(ids):
                rm[-1] = reward
            full = torch.cat([prompt, resp])
            out["responses"].append(resp)
            out["response_mask"].append(torch.ones(len(ids), dtype=torch.int64))
            out["loss_mask"].append(torch.ones(len(ids), dtype=torch.int64))
            out["input_ids"].append(full)
            out["attention_mask"].append(torch.ones(len(full), dtype=torch.int64))
            out["position_ids"].append(torch.arange(len(full), dtype=torch.int64))
            out["rm_scores"].append(rm)
            self._action_masks[batch.keys[i]] = mask
            self._original[batch.keys[i]] = self.tokenizer.decode(responses[j].tolist(), skip_special_tokens=True)
            batch.tags[i]["response_len"] = len(ids)
            batch.tags[i]["seq_len"] = len(full)
        fields_out = TensorDict({k: _nested(v) for k, v in out.items()}, batch_size=len(keys))
        tq.kv_batch_put(keys=keys, partition_id=batch.partition_id, fields=fields_out)
        metrics["salvage/spliced_rows"] = float(len(idx))
        metrics["salvage/spliced_without_action_tokens"] = float(empty)

    def _write_loss_fields(self, batch) -> None:
        weights = row_weights(batch.tags)
        rl, action, weight = [], [], []
        for key, tag, w in zip(batch.keys, batch.tags, weights, strict=True):
            n = int(tag.get("response_len", 1))
            routed = None if tag.get("is_padding", False) else tag.get("routed")
            rl.append(torch.full((n,), 1 if routed == "rl" else 0, dtype=torch.int64))
            m = self._action_masks.get(key) if routed == "salvage" else None
            action.append(torch.tensor(m if m is not None and len(m) == n else [0] * n, dtype=torch.int64))
            weight.append(torch.full((n,), w, dtype=torch.float32))
        fields = TensorDict(
            {"rl_token_mask": _nested(rl), "salvage_action_mask": _nested(action), "loss_row_weight": _nested(weight)},
            batch_size=len(batch.keys),
        )
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)

    def _compute_old_log_prob(self, batch, metrics: dict):
        batch = super()._compute_old_log_prob(batch, metrics=metrics)
        try:
            self._probe_metrics(batch, metrics)
        except Exception as e:  # diagnostics must never stop training
            logger.warning("salvage-ds: log-prob probe failed: %s", e)
        return batch

    def _probe_metrics(self, batch, metrics: dict) -> None:
        real = [i for i, t in enumerate(batch.tags) if not t.get("is_padding", False)]
        rl = [i for i in real if batch.tags[i].get("routed") == "rl"]
        sv = [i for i in real if batch.tags[i].get("routed") == "salvage"]
        if not rl and not sv:
            return
        keys = [batch.keys[i] for i in rl + sv]
        fields = ["responses", "old_log_probs", "rm_scores"]
        want_rollout = "rollout_corr/rollout_log_ppl" not in metrics
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        responses = _rows(data["responses"])
        old = _rows(data["old_log_probs"])
        scores = _rows(data["rm_scores"])
        correct, wrong = [], []
        for j, i in enumerate(rl + sv):
            key = batch.keys[i]
            if i in sv:
                mask = self._action_masks.get(key)
                is_correct = True
            else:
                mask = action_token_mask(self.tokenizer, responses[j].tolist())
                is_correct = float(scores[j].sum().item()) >= 1.0
            if not mask or not any(mask) or len(mask) != len(old[j]):
                continue
            m = torch.tensor(mask, dtype=torch.bool)
            value = float(old[j][m].float().mean().item())
            (correct if is_correct else wrong).append(value)
        if correct:
            metrics["salvage/logprob_correct"] = sum(correct) / len(correct)
        if wrong:
            metrics["salvage/logprob_wrong"] = sum(wrong) / len(wrong)
        if correct and wrong:
            metrics["salvage/logprob_gap"] = metrics["salvage/logprob_correct"] - metrics["salvage/logprob_wrong"]
        if want_rollout and rl:
            try:
                got = tq.kv_batch_get(
                    keys=[batch.keys[i] for i in rl], partition_id=batch.partition_id, select_fields=["rollout_log_probs"]
                )
                lps = [r for r in _rows(got["rollout_log_probs"]) if len(r)]
            except Exception:
                lps = []
            if lps:
                metrics["rollout_corr/rollout_log_ppl"] = sum(float(-r.float().mean()) for r in lps) / len(lps)

    def _compute_advantage(self, batch, metrics: dict):
        batch = super()._compute_advantage(batch, metrics=metrics)
        self._zero_salvage_advantages(batch)
        return batch

    def _zero_salvage_advantages(self, batch) -> None:
        """Salvage (and inert) rows get no policy gradient: their advantages are 0."""
        idx = [i for i, t in enumerate(batch.tags) if t.get("routed") in ("salvage", "inert")]
        if not idx:
            return
        keys = [batch.keys[i] for i in idx]
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=["advantages"])
        zeros = [torch.zeros_like(a) for a in _rows(data["advantages"])]
        tq.kv_batch_put(
            keys=keys,
            partition_id=batch.partition_id,
            fields=TensorDict({"advantages": _nested(zeros)}, batch_size=len(keys)),
        )

    def _update_actor(self, batch, metrics: dict):
        batch = super()._update_actor(batch, metrics=metrics)
        if "actor/salvage/nll" in metrics:
            metrics["salvage/nll"] = metrics.pop("actor/salvage/nll")
        return batch

    # -- rollout dump ---------------------------------------------------------------

    def _log_rollout_data(self, batch, timing_raw: dict, rollout_data_dir: str):
        """verl's dump fields (``input``, ``output``, ``gts``, ``score``, ``step``,
        ``uid``) plus ``gate``, ``routed``, ``salvage``, ``rule``, ``pair_id``."""
        from verl.utils.debug import marked_timer

        with marked_timer("dump_rollout_generations", timing_raw, color="green"):
            real = [i for i, t in enumerate(batch.tags) if not t.get("is_padding", False)]
            keys = [batch.keys[i] for i in real]
            fields = ["prompts", "responses", "rm_scores", "reward_model", "extra_info", "extra_fields"]
            data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
            prompts, responses = _rows(data["prompts"]), _rows(data["responses"])
            scores, gts = _rows(data["rm_scores"]), _rows(data["reward_model"])
            extra, extra_fields = _rows(data["extra_info"]), _rows(data["extra_fields"])
            os.makedirs(rollout_data_dir, exist_ok=True)
            path = os.path.join(rollout_data_dir, f"{self.global_steps}.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for j, i in enumerate(real):
                    tag = batch.tags[i]
                    info = extra_fields[j] if isinstance(extra_fields[j], dict) else {}
                    rei = info.get("reward_extra_info", {}) or {}
                    rec = {
                        "input": self.tokenizer.decode(prompts[j].tolist(), skip_special_tokens=True),
                        # Salvage rows: the rollout as sampled, not the spliced sequence.
                        "output": self._original.get(batch.keys[i])
                        or self.tokenizer.decode(responses[j].tolist(), skip_special_tokens=True),
                        "gts": gts[j].get("ground_truth") if isinstance(gts[j], dict) else None,
                        "score": float(scores[j].sum().item()),
                        "step": self.global_steps,
                        "uid": batch.keys[i],
                        "gate": tag.get("gate"),
                        "routed": tag.get("routed"),
                        "salvage": tag.get("salvage"),
                        "rule": rei.get("rule"),
                        "pair_id": extra[j].get("pair_id") if isinstance(extra[j], dict) else None,
                    }
                    f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
