"""The Salvage-DS sampler: a verl 0.9.1 V1 ``ReplayBuffer`` subclass
(``trainer.v1.sampler.custom_sampler``) that gates finished groups with rmsweb's own
gates and refills instead of verl's DAPO filter.

verl's built-in filter keeps any group with reward spread (a std of 0.099 passes),
has no competence gate (a best reward of 0.3 passes), evicts rejected groups, and
ignores ``max_num_gen_batches``. This sampler, per training step (sync mode):

1. waits until every prompt in flight finished (the trainer submitted the first
   generation batch), then classifies each finished group with
   :func:`rmsweb_verl.gate_groups` -- the code ``rmsweb rl groups`` runs: accepted,
   ``std_gate`` or ``competence_gate``;
2. refills one generation batch at a time until ``target_groups`` (64) groups are
   accepted or ``max_gen_batches`` (16) were drawn; when the cap is hit it trains on
   what was accepted and says so (``salvage/refill_cap_hit``), it never fails;
3. keeps the first ``target_groups`` accepted groups (the surplus is discarded and
   counted), and of the D rejected groups retains S = 16·⌊min(D, 64)/16⌋ for
   salvage, hard (competence-rejected) and mastered (std-rejected) in proportion
   (:func:`rmsweb_verl.salvage_mix`); the retained groups are tagged
   (``tag["salvage"] = "hard" | "mastered"``) and go to the trainer, not evicted.

Groups are taken in the order they were drawn (generation batch, then uid). Failed
groups (a session raised) carry no usable trajectories and are evicted and counted.
Validation partitions are sampled as verl does.

Metrics (FORMATS.md names): ``train/num_gen_batches``,
``salvage/std_gate_reject_share``, ``salvage/competence_gate_reject_share``,
``salvage/accepted_groups``, ``salvage/salvage_groups``,
``salvage/best_of_n_reward``, ``salvage/within_group_std``, plus
``salvage/sampled_groups``, ``salvage/surplus_groups``, ``salvage/failed_groups``,
``salvage/refill_cap_hit`` and verl's own ``training/filter_groups/evicted_samples``
and ``training/filter_groups/discarded_surplus_samples``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from . import gate_groups, salvage_mix
from .settings import SalvageSettings

logger = logging.getLogger(__name__)

ACCEPTED = "accepted"
STD_GATE = "std_gate"
COMPETENCE_GATE = "competence_gate"


@dataclasses.dataclass
class GroupDecision:
    """One group's gate decision, as ``rmsweb rl groups`` prints it."""

    uid: str
    rewards: list[float]
    decision: str
    mean: float
    std: float
    max: float
    advantages: list[float] | None
    gen_batch: int
    #: ``rl``, ``salvage`` or ``discarded`` once the step's batch is chosen.
    routed: str = "discarded"
    #: ``hard`` or ``mastered`` for salvage groups.
    salvage: str | None = None


@dataclasses.dataclass
class StepSample:
    """What one ``sample`` call decided (kept for the trainer and the rollout dump)."""

    decisions: dict[str, GroupDecision]
    gen_batches: int
    cap_hit: bool
    metrics: dict[str, float]


def _rewards_of(values) -> list[float]:
    """Per-trajectory rewards from TransferQueue's ``rm_scores`` (a nested tensor,
    a list of tensors or of numbers)."""
    if hasattr(values, "unbind"):
        values = values.unbind()
    out = []
    for v in values:
        out.append(float(v.sum().item()) if hasattr(v, "sum") else float(v))
    return out


class SalvageReplayBuffer(ReplayBuffer):
    """Salvage-DS's gated, capped refill with salvage (see the module docs)."""

    def __init__(
        self,
        trainer_mode: str,
        trainer_config,
        max_off_policy_threshold,
        max_off_policy_strategy: str,
        sampler_kwargs,
        poll_interval: float = 2.0,
        refill_fn=None,
        **kwargs: Any,
    ):
        if refill_fn is None:
            raise ValueError("SalvageReplayBuffer needs the trainer's refill_fn to draw generation batches")
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            poll_interval=poll_interval,
            refill_fn=refill_fn,
        )
        self.settings = SalvageSettings.from_kwargs(sampler_kwargs)
        self.last: StepSample | None = None

    # -- reading groups -------------------------------------------------------------

    def _group_rewards(self, partition_id: str, uids: set[str]) -> dict[str, list[float]]:
        """One reward per session of each group, in session order."""
        by_uid: dict[str, dict[int, tuple[int, str]]] = {u: {} for u in uids}
        for key in self.partitions[partition_id]:
            parts = key.split("_")
            if parts[0] not in by_uid:
                continue
            session = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            index = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0
            # Multi-output agent loops give every output the final reward: keep the last.
            prev = by_uid[parts[0]].get(session)
            if prev is None or index > prev[0]:
                by_uid[parts[0]][session] = (index, key)
        keys = [k for sessions in by_uid.values() for _, (_, k) in sorted(sessions.items())]
        if not keys:
            return {u: [] for u in uids}
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores"])
        values = dict(zip(keys, _rewards_of(data["rm_scores"]), strict=True))
        return {
            u: [values[k] for _, (_, k) in sorted(sessions.items())] for u, sessions in by_uid.items()
        }

    def _classify(self, partition_id: str, uids: list[str], gen_batch: int) -> dict[str, GroupDecision]:
        s = self.settings
        rewards = self._group_rewards(partition_id, set(uids))
        usable = [u for u in uids if rewards[u]]
        out = gate_groups([rewards[u] for u in usable], s.eps_sigma, s.r_comp, s.mode)
        decided = {}
        for u, g in zip(usable, out["groups"], strict=True):
            decided[u] = GroupDecision(
                uid=u,
                rewards=rewards[u],
                decision=g["decision"],
                mean=g["mean"],
                std=g["std"],
                max=g["max"],
                advantages=g.get("advantages"),
                gen_batch=gen_batch,
            )
        return decided

    # -- sampling -------------------------------------------------------------------

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        s = self.settings
        refill = s.refill_prompts or batch_size
        decisions: dict[str, GroupDecision] = {}
        gen_batches = 1  # the trainer's prepare_step submitted the first one
        failed = 0
        last_debug = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            failures = set(self.failure_keys[partition_id]) - set(decisions)
            if failures:
                failed += len(failures)
                self._clear_groups(partition_id, failures)
            new = sorted(set(self.finished_keys[partition_id]) - set(decisions))
            if new:
                got = self._classify(partition_id, new, gen_batches)
                empty = set(new) - set(got)
                if empty:
                    failed += len(empty)
                    self._clear_groups(partition_id, empty)
                decisions.update(got)
            inflight = len(self.pending_keys[partition_id]) + len(self.running_keys[partition_id])
            if inflight == 0:
                accepted = sum(d.decision == ACCEPTED for d in decisions.values())
                if accepted >= s.target_groups or gen_batches >= s.max_gen_batches:
                    break
                self.refill_fn(refill)
                gen_batches += 1
                continue
            last_debug = self._wait_for_next_poll(partition_id, last_debug)
        return self._choose(partition_id, decisions, gen_batches, failed)

    def _choose(self, partition_id: str, decisions: dict[str, GroupDecision], gen_batches: int, failed: int):
        s = self.settings
        order = sorted(decisions.values(), key=lambda d: (d.gen_batch, d.uid))
        accepted = [d for d in order if d.decision == ACCEPTED]
        hard = [d for d in order if d.decision == COMPETENCE_GATE]
        mastered = [d for d in order if d.decision == STD_GATE]
        kept = accepted[: s.target_groups]
        surplus = accepted[s.target_groups :]
        h, m = salvage_mix(len(hard), len(mastered), s.salvage_unit, s.salvage_cap) if s.salvages else (0, 0)
        for d in kept:
            d.routed = "rl"
        for d in hard[:h]:
            d.routed, d.salvage = "salvage", "hard"
        for d in mastered[:m]:
            d.routed, d.salvage = "salvage", "mastered"
        chosen = [d for d in order if d.routed != "discarded"]
        inert = False
        if not chosen and order:
            # Nothing accepted or salvaged within the cap: hand the groups over inert
            # (the trainer zeroes their advantages and masks) rather than failing.
            inert = True
            chosen = order
            for d in chosen:
                d.routed = "inert"
        evict = {d.uid for d in order if d.routed == "discarded"}
        self._clear_groups(partition_id, evict)
        n = max(len(order), 1)
        cap_hit = len(accepted) < s.target_groups
        metrics = {
            "train/num_gen_batches": float(gen_batches),
            "salvage/sampled_groups": float(len(order)),
            "salvage/std_gate_reject_share": len(mastered) / n,
            "salvage/competence_gate_reject_share": len(hard) / n,
            "salvage/accepted_groups": float(len(kept)),
            "salvage/salvage_groups": float(h + m),
            "salvage/surplus_groups": float(len(surplus)),
            "salvage/failed_groups": float(failed),
            "salvage/refill_cap_hit": float(cap_hit),
            "salvage/best_of_n_reward": sum(d.max for d in order) / n,
            "salvage/within_group_std": sum(d.std for d in order) / n,
            "training/filter_groups/evicted_samples": float(len(hard) + len(mastered) - h - m),
            "training/filter_groups/discarded_surplus_samples": float(len(surplus)),
        }
        if inert:
            metrics["salvage/inert_step"] = 1.0
        if cap_hit:
            logger.warning(
                "salvage-ds: %d of %d groups accepted after %d generation batches (the cap); "
                "training on what was accepted",
                len(accepted),
                s.target_groups,
                gen_batches,
            )
        self.last = StepSample(decisions=decisions, gen_batches=gen_batches, cap_hit=cap_hit, metrics=metrics)
        by_uid = {d.uid: d for d in chosen}
        batch = self._materialize_batch(partition_id, [d.uid for d in chosen], dict(self.partitions[partition_id]))
        for key, tag in zip(batch.keys, batch.tags, strict=True):
            d = by_uid[key.split("_")[0]]
            tag["gate"] = d.decision
            tag["routed"] = d.routed
            tag["salvage"] = d.salvage
        if not batch.keys:
            raise RuntimeError(
                f"salvage-ds: no trajectories after {gen_batches} generation batches "
                f"({len(order)} groups finished, {failed} failed): check the rollout workers' logs"
            )
        return batch, metrics
