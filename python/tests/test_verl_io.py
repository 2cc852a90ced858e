"""The export meets verl 0.9.1: its parquet loads through ``RLHFDataset`` with a local
tokenizer, verl's reward manager scores it as ``rmsweb reward batch`` does, and Hydra
composes ``salvage_ds.yaml`` with verl's ``ppo_trainer``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from rmsweb_verl import compute_score


def dataset(export_dir, tokenizer, split="train", **extra):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 6656,
            "filter_overlong_prompts": True,
            "return_raw_chat": True,
            "cache_dir": str(export_dir / ".cache"),
            **extra,
        }
    )
    return RLHFDataset(str(export_dir / f"{split}.parquet"), tokenizer, cfg)


def chat_ids(tokenizer, messages) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 may hand back an encoding
        ids = ids["input_ids"]
    return list(ids)


def test_parquet_loads_through_rlhf_dataset(export_dir, tokenizer):
    frame = pd.read_parquet(export_dir / "train.parquet")
    ds = dataset(export_dir, tokenizer)
    assert len(ds) == len(frame) > 0
    lengths = []
    for i in range(len(ds)):
        row = ds[i]
        want = [dict(m) for m in frame.iloc[i]["prompt"]]
        assert [dict(m) for m in row["raw_prompt"]] == want
        assert [m["role"] for m in want] == ["system", "user"]
        assert row["data_source"].startswith("rmsweb/")
        assert row["reward_model"]["style"] == "rule"
        json.loads(row["reward_model"]["ground_truth"])
        info = row["extra_info"]
        assert row["index"] == info["index"] == i
        assert info["split"] == "train" and info["prompt_format"].startswith("rmsweb-prompt/")
        assert isinstance(json.loads(info["elements"]), list)
        lengths.append(len(chat_ids(tokenizer, row["raw_prompt"])))
    assert all(0 < n <= 6656 for n in lengths)
    # The prompt-length filter runs with the tokenizer and drops what is too long.
    cut = sorted(lengths)[len(lengths) // 2]
    short = dataset(export_dir, tokenizer, max_prompt_length=cut)
    assert 0 < len(short) < len(ds)
    assert len(short) == sum(n <= cut for n in lengths)
    # Validation holds out whole tasks.
    val = pd.read_parquet(export_dir / "val.parquet")
    train_tasks = {r["task_id"] for r in frame["extra_info"]}
    val_tasks = {r["task_id"] for r in val["extra_info"]}
    assert val_tasks and not (train_tasks & val_tasks)


def test_reward_manager_on_a_data_proto_equals_reward_batch(export_dir, tokenizer, rmsweb):
    from tensordict import TensorDict
    from verl import DataProto
    from verl.workers.reward_manager.naive import NaiveRewardManager

    frame = pd.read_parquet(export_dir / "train.parquet")
    responses, rows = [], []
    for _, r in frame.iterrows():
        target = json.loads(r["reward_model"]["ground_truth"])
        idx = target.get("params", {}).get("index")
        for text in (
            json.dumps({"thinking": "go", "action": [{target["name"]: target.get("params", {})}]}),
            f"click({(idx or 0) + 1})",
            "click(999)",
            "nothing to do",
        ):
            responses.append(text)
            rows.append(r)
    n = len(rows)
    enc = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in responses]
    width = max(len(e) for e in enc)
    resp = torch.full((n, width), tokenizer.pad_token_id, dtype=torch.long)
    prompt = torch.full((n, 4), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((n, 4 + width), dtype=torch.long)
    for i, e in enumerate(enc):
        resp[i, : len(e)] = torch.tensor(e)
        prompt[i, -2:] = torch.tensor([1, 2])
        mask[i, 2:4] = 1
        mask[i, 4 : 4 + len(e)] = 1
    data = DataProto(
        batch=TensorDict({"prompts": prompt, "responses": resp, "attention_mask": mask}, batch_size=n),
        non_tensor_batch={
            "data_source": np.array([r["data_source"] for r in rows], dtype=object),
            "reward_model": np.array([dict(r["reward_model"]) for r in rows], dtype=object),
            "extra_info": np.array([dict(r["extra_info"]) for r in rows], dtype=object),
        },
    )
    manager = NaiveRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=compute_score)
    out = manager(data, return_dict=True)
    scores = out["reward_tensor"].sum(dim=1).tolist()
    stdin = "".join(
        json.dumps(
            {
                "target": json.loads(r["reward_model"]["ground_truth"]),
                "candidate": t,
                "elements": json.loads(r["extra_info"]["elements"]),
            }
        )
        + "\n"
        for t, r in zip(responses, rows, strict=True)
    )
    cli = rmsweb(["reward", "batch", "-"], stdin=stdin)
    assert [round(s, 6) for s in scores] == [round(c["score"], 6) for c in cli]
    assert out["reward_extra_info"]["rule"] == [c["rule"] for c in cli]
    assert len(set(scores)) >= 3, scores
    # The reward sits on the last response token, as verl expects.
    last = [len(e) - 1 for e in enc]
    assert all(out["reward_tensor"][i, last[i]].item() == scores[i] for i in range(n))


def compose_export(export_dir, overrides=()):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(export_dir), version_base=None):
        return compose(config_name="salvage_ds", overrides=list(overrides))


def test_hydra_composes_the_export_with_ppo_trainer(export_dir):
    cfg = compose_export(export_dir, ["actor_rollout_ref.model.path=/ckpt/sft-merged"])
    a = cfg.actor_rollout_ref.actor
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.use_kl_in_reward is False
    assert (a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c) == (0.2, 0.32, 3.0)
    assert a.loss_agg_mode == "seq-mean-token-mean" and a.entropy_coeff == 0
    assert (a.use_kl_loss, a.kl_loss_type, a.kl_loss_coef) == (True, "low_var_kl", 0.001)
    assert a.optim.lr == 8e-6 and a.ppo_mini_batch_size == 16
    assert cfg.actor_rollout_ref.rollout.n == 8 and cfg.data.train_batch_size == 64
    m = cfg.actor_rollout_ref.model
    assert (m.lora_rank, m.lora_alpha, list(m.target_modules)) == (64, 128, ["q_proj", "k_proj", "v_proj", "o_proj"])
    assert "file" in cfg.trainer.logger and cfg.trainer.use_v1 and cfg.trainer.v1.trainer_mode == "salvage_ds"
    kw = cfg.trainer.v1.sampler.sampler_kwargs
    assert (kw.eps_sigma, kw.r_comp, kw.target_groups, kw.max_gen_batches) == (0.10, 0.55, 64, 16)
    assert cfg.data.train_files == str(export_dir.resolve() / "train.parquet")
    # Everything verl's own defaults provide is still there (the composition worked).
    assert cfg.critic is not None and cfg.transfer_queue is not None and cfg.actor_rollout_ref.ref is not None
    # The plug points load: the sampler class, the reward function.
    from verl.utils.import_utils import load_extern_object

    from rmsweb_verl.sampler import SalvageReplayBuffer

    sampler = cfg.trainer.v1.sampler.custom_sampler
    assert load_extern_object(sampler.path, sampler.name) is SalvageReplayBuffer
    rf = cfg.reward.custom_reward_function
    assert load_extern_object(rf.path, rf.name) is compute_score
    # The ablation switches of run.sh compose too.
    cfg = compose_export(
        export_dir,
        ["trainer.v1.sampler.sampler_kwargs.mode=dapo", "actor_rollout_ref.actor.clip_ratio_high=0.28"],
    )
    assert cfg.trainer.v1.sampler.sampler_kwargs.mode == "dapo"


def test_the_trainer_mode_registers_when_verl_starts(export_dir):
    """A fresh interpreter: importing verl finds the plugin (entry point or
    VERL_USE_EXTERNAL_MODULES) and the V1 registry knows `salvage_ds`."""
    code = (
        "import verl\n"
        "from verl.trainer.ppo.v1 import get_trainer_cls\n"
        "cls = get_trainer_cls('salvage_ds')\n"
        "from rmsweb_verl.trainer import SalvageDSTrainer\n"
        "assert cls is SalvageDSTrainer, cls\n"
        "print('ok')\n"
    )
    env = {"VERL_USE_EXTERNAL_MODULES": "rmsweb_verl.plugin"}
    import os

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env})
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-2000:]


def test_run_sh_refuses_bad_settings(export_dir):
    import os

    run = export_dir / "run.sh"
    p = subprocess.run(["bash", str(run)], capture_output=True, text=True, env={**os.environ, "MODEL": ""})
    assert p.returncode != 0 and "MODEL" in p.stderr
    env = {**os.environ, "MODEL": "/m", "NODES": "2", "RAY_ADDRESS": ""}
    p = subprocess.run(["bash", str(run)], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "RAY_ADDRESS" in p.stderr
    env = {**os.environ, "MODEL": "/m", "MODE": "ppo"}
    p = subprocess.run(["bash", str(run)], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "MODE=ppo" in p.stderr


@pytest.mark.parametrize("split", ["train", "val"])
def test_ground_truth_scores_exact(export_dir, split):
    frame = pd.read_parquet(export_dir / f"{split}.parquet")
    for _, r in frame.iterrows():
        target = json.loads(r["reward_model"]["ground_truth"])
        targets = target if isinstance(target, list) else [target]
        text = json.dumps({"action": [{t["name"]: t.get("params", {})} for t in targets]})
        got = compute_score(r["data_source"], text, r["reward_model"]["ground_truth"], dict(r["extra_info"]))
        assert got["score"] == 1.0, (r["extra_info"]["pair_id"], got)
