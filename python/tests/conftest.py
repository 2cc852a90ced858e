"""Shared fixtures of the rmsweb_verl tests (run by `cargo test --test it verl::`,
which builds the extension into the verl venv and points RMSWEB_BIN at the binary).

- ``rmsweb``: runs the rmsweb CLI (``$RMSWEB_BIN``) and returns its JSON lines;
- ``export_dir``: ``rmsweb export verl fixtures`` once per session;
- ``tokenizer``: a local Hugging Face tokenizer (the bundled tiny SFT run's BPE with a
  Qwen-style chat template), no hub access;
- ``fake_tq``: a TransferQueue stand-in for the sampler and trainer (in-process KV
  store with tags, scripted generation).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _bin() -> str:
    b = os.environ.get("RMSWEB_BIN")
    if not b:
        pytest.fail("RMSWEB_BIN is not set: run these tests through `cargo test --test it verl::`")
    return b


def run_rmsweb(args: list[str], stdin: str | None = None, check: bool = True) -> list[dict]:
    p = subprocess.run([_bin(), *args], input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"rmsweb {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def rmsweb():
    return run_rmsweb


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export")
    p = subprocess.run(
        [_bin(), "export", "verl", str(REPO / "fixtures"), "--out", str(out), "--val-share", "0.2"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(REPO / "fixtures" / "runs" / "sft-tiny" / "tokenizer.json"),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


class FakeTQ:
    """The part of TransferQueue's KV interface the V1 replay buffer and trainer use."""

    def __init__(self):
        self.tags: dict[str, dict[str, dict]] = {}
        self.values: dict[str, dict[str, dict]] = {}
        self.script: list[list[float]] = []
        self.generated = 0
        self.step = 1

    # generation stand-in: every prompt finishes at once with the next scripted rewards
    def generate(self, num_prompts: int) -> int:
        for _ in range(num_prompts):
            rewards = self.script[self.generated % len(self.script)]
            uid = f"g{self.generated:05d}"
            self.generated += 1
            part = self.tags.setdefault("train", {})
            vals = self.values.setdefault("train", {})
            part[uid] = {"is_prompt": True, "status": "finished", "global_steps": self.step}
            for s, r in enumerate(rewards):
                key = f"{uid}_{s}_0"
                part[key] = {"status": "success", "prompt_len": 3, "response_len": 2, "seq_len": 5}
                vals[key] = {"rm_scores": torch.tensor([0.0, float(r)])}
        return num_prompts

    def kv_list(self, partition_id=None):
        if partition_id is None:
            return {p: dict(t) for p, t in self.tags.items()}
        return {partition_id: dict(self.tags.get(partition_id, {}))}

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        vals = self.values.get(partition_id, {})
        fields = select_fields or sorted({f for k in keys for f in vals.get(k, {})})
        return {f: [vals[k][f] for k in keys] for f in fields}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        vals = self.values.setdefault(partition_id, {})
        if fields is not None:
            for name in fields.keys():
                col = fields[name]
                rows = list(col.unbind()) if getattr(col, "is_nested", False) else list(col)
                for k, v in zip(keys, rows, strict=True):
                    vals.setdefault(k, {})[name] = v
        if tags is not None:
            part = self.tags.setdefault(partition_id, {})
            for k, t in zip(keys, tags, strict=True):
                part.setdefault(k, {}).update(t)

    def kv_clear(self, keys, partition_id):
        for k in keys:
            self.tags.get(partition_id, {}).pop(k, None)
            self.values.get(partition_id, {}).pop(k, None)


@pytest.fixture
def fake_tq(monkeypatch):
    fake = FakeTQ()
    import verl.trainer.ppo.v1.replay_buffer as rb

    import rmsweb_verl.sampler as sampler

    monkeypatch.setattr(rb, "tq", fake)
    monkeypatch.setattr(sampler, "tq", fake)
    try:
        import rmsweb_verl.trainer as trainer

        monkeypatch.setattr(trainer, "tq", fake)
    except ImportError:
        pass
    return fake
