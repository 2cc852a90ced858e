"""The sampler subclass's decisions equal `rmsweb rl groups`, with a stand-in for
TransferQueue: gates, refill to the target with the generation-batch cap, surplus
discarded, S = unit·⌊min(D, cap)/unit⌋ rejected groups retained and tagged."""

from __future__ import annotations

import json
import random

import pytest
import torch

from rmsweb_verl.sampler import SalvageReplayBuffer
from rmsweb_verl.settings import MODES


def make_sampler(fake, **kwargs):
    s = SalvageReplayBuffer(
        trainer_mode="salvage_ds",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=kwargs,
        poll_interval=0.0,
        refill_fn=fake.generate,
    )
    return s


def script(seed: int, n: int) -> list[list[float]]:
    rng = random.Random(seed)
    levels = [0.0, 0.3, 0.7, 1.0]
    kinds = [
        lambda: [rng.choice(levels) for _ in range(8)],  # anything
        lambda: [0.7] * 8,  # mastered-ish (std 0)
        lambda: [rng.choice([0.0, 0.3]) for _ in range(8)],  # hard (max < 0.55)
        lambda: [0.3, 0.4] * 4,  # std 0.05 <= 0.10: std gate although DAPO would keep it
    ]
    return [rng.choice(kinds)() for _ in range(n)]


@pytest.mark.parametrize("mode", MODES)
def test_decisions_equal_rl_groups(fake_tq, rmsweb, mode):
    fake_tq.script = script(1, 200)
    s = make_sampler(fake_tq, mode=mode, target_groups=8, max_gen_batches=6, salvage_unit=4, salvage_cap=8)
    fake_tq.generate(8)  # the trainer's prepare_step
    batch, metrics = s.sample(global_steps=1, partition_id="train", batch_size=8)
    decided = sorted(s.last.decisions.values(), key=lambda d: d.uid)
    groups = [d.rewards for d in decided]
    stdin = "".join(json.dumps({"group": d.uid, "rewards": d.rewards}) + "\n" for d in decided)
    cli = rmsweb(["rl", "groups", "-", "--mode", mode], stdin=stdin)
    assert len(cli) == len(decided) + 1
    for d, line in zip(decided, cli, strict=False):
        assert line["group"] == d.uid
        assert (d.decision, d.mean, d.std, d.max, d.advantages) == (
            line["decision"],
            line["mean"],
            line["std"],
            line["max"],
            line.get("advantages"),
        )
    # Every sampled group's rewards came from the stand-in in generation order.
    # (verl's scores are float32: the script's values as they come back from a tensor.)
    assert groups == [
        torch.tensor(fake_tq.script[int(d.uid[1:])], dtype=torch.float32).tolist() for d in decided
    ]
    accepted = sum(d.decision == "accepted" for d in decided)
    gen = int(metrics["train/num_gen_batches"])
    assert gen == s.last.gen_batches and len(decided) == 8 * gen
    if accepted < 8:
        assert gen == 6 and metrics["salvage/refill_cap_hit"] == 1.0
    else:
        # Refilled only while short of the target.
        assert metrics["salvage/refill_cap_hit"] == 0.0
        first = sum(d.decision == "accepted" for d in decided if d.gen_batch < gen)
        assert first < 8
    rl = {k.split("_")[0] for k, t in zip(batch.keys, batch.tags) if t["routed"] == "rl"}
    assert len(rl) == min(accepted, 8) == metrics["salvage/accepted_groups"]
    assert metrics["salvage/surplus_groups"] == max(accepted - 8, 0)


def test_refill_stops_at_the_cap_and_trains_on_what_was_accepted(fake_tq):
    # One accepted group in 17; everything else hard or mastered: 64 accepted groups
    # would need more than 16 generation batches of 64 prompts.
    good = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    hard = [0.3, 0.0] * 4
    mastered = [1.0] * 8
    fake_tq.script = [good] + [hard] * 10 + [mastered] * 6
    s = make_sampler(fake_tq)  # the paper's numbers: 64 groups, 16 batches, S rule 16/64
    fake_tq.generate(64)
    batch, metrics = s.sample(global_steps=1, partition_id="train", batch_size=64)
    n = 64 * 16
    assert metrics["train/num_gen_batches"] == 16.0
    assert metrics["salvage/refill_cap_hit"] == 1.0
    assert metrics["salvage/sampled_groups"] == n
    n_good = len(range(0, n, 17))
    n_hard = sum(1 for i in range(n) if 1 <= i % 17 <= 10)
    n_mastered = n - n_good - n_hard
    assert metrics["salvage/accepted_groups"] == n_good  # fewer than 64: trained on as they are
    assert metrics["salvage/competence_gate_reject_share"] == n_hard / n
    assert metrics["salvage/std_gate_reject_share"] == n_mastered / n
    # D = 963 rejected → S = 64, hard and mastered in proportion
    assert metrics["salvage/salvage_groups"] == 64
    kinds = {}
    for k, t in zip(batch.keys, batch.tags):
        kinds.setdefault(k.split("_")[0], (t["routed"], t["salvage"], t["gate"]))
    salvage = [v for v in kinds.values() if v[0] == "salvage"]
    assert len(salvage) == 64
    h = sum(v[1] == "hard" for v in salvage)
    assert abs(h - 64 * n_hard / (n_hard + n_mastered)) <= 1
    assert all(v[2] == ("competence_gate" if v[1] == "hard" else "std_gate") for v in salvage)
    assert sum(v[0] == "rl" for v in kinds.values()) == n_good
    # Everything not chosen was evicted from the store, and counted.
    assert metrics["training/filter_groups/evicted_samples"] == n - n_good - 64
    left = {k.split("_")[0] for k in fake_tq.tags["train"]}
    assert left <= set(kinds)


def test_surplus_accepted_groups_are_discarded(fake_tq):
    fake_tq.script = [[1.0, 0.0] * 4] * 3 + [[0.0] * 8]
    s = make_sampler(fake_tq, target_groups=10, salvage_unit=4, salvage_cap=8)
    fake_tq.generate(8)
    batch, metrics = s.sample(global_steps=1, partition_id="train", batch_size=8)
    # 6 accepted in the first batch, 12 after the second: keep 10, discard 2.
    assert metrics["train/num_gen_batches"] == 2
    assert (metrics["salvage/accepted_groups"], metrics["salvage/surplus_groups"]) == (10, 2)
    assert metrics["training/filter_groups/discarded_surplus_samples"] == 2
    assert metrics["salvage/salvage_groups"] == 4


def test_cap_hit_with_few_accepted_still_trains(fake_tq):
    fake_tq.script = [[1.0, 0.0] * 4] + [[0.0] * 8] * 99
    s = make_sampler(fake_tq, target_groups=16, max_gen_batches=3, salvage_unit=16, salvage_cap=64)
    fake_tq.generate(16)
    batch, metrics = s.sample(global_steps=1, partition_id="train", batch_size=16)
    assert metrics["train/num_gen_batches"] == 3 and metrics["salvage/refill_cap_hit"] == 1.0
    assert metrics["salvage/accepted_groups"] == 1.0
    assert metrics["salvage/salvage_groups"] == 32  # D = 47 → 32
    assert len(batch.keys) == 8 * 33


def test_nothing_accepted_nor_salvaged_is_handed_over_inert(fake_tq):
    fake_tq.script = [[0.0] * 4]
    s = make_sampler(fake_tq, target_groups=4, max_gen_batches=2, salvage_unit=16, salvage_cap=64)
    fake_tq.generate(4)
    batch, metrics = s.sample(global_steps=1, partition_id="train", batch_size=4)
    assert metrics["salvage/inert_step"] == 1.0
    assert {t["routed"] for t in batch.tags} == {"inert"}


def test_settings_are_checked():
    with pytest.raises(ValueError, match="sampler_kwargs.mode"):
        make_sampler(type("F", (), {"generate": lambda *_: 0})(), mode="ppo")
    with pytest.raises(ValueError, match="sampler_kwargs.eps_sigm"):
        make_sampler(type("F", (), {"generate": lambda *_: 0})(), eps_sigm=0.1)
