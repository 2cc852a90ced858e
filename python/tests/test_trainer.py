"""The trainer's per-step work on a TransferQueue stand-in: the ground-truth action
spliced into salvage rollouts (tokens, masks, tags), the loss fields for every row,
zero advantages on salvage rows; the token-level splice on a real tokenizer; the
rollout-dump converter."""

from __future__ import annotations

import json

import torch
from transfer_queue import KVBatchMeta

from rmsweb_verl import parse_actions, splice_action
from rmsweb_verl.settings import SalvageSettings
from rmsweb_verl.splice import action_token_mask, splice_rollout
from rmsweb_verl.trainer import SalvageDSTrainer

GT = {"name": "input", "params": {"index": 5, "text": "Nigeria", "clear": True}}


def covers(decoded: str, action: str) -> bool:
    """The masked tokens hold the action's text and at most a few characters that
    share its first or last token."""
    return action in decoded and len(decoded) - len(action) <= 6


def encode(tok, text, eos=True):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids + ([tok.eos_token_id] if eos else [])


def test_splice_rollout_masks_exactly_the_new_action(tokenizer):
    response = json.dumps({"thinking": "the list is at 3", "action": [{"click": {"index": 3}}]})
    ids, mask = splice_rollout(tokenizer, encode(tokenizer, response) + [tokenizer.pad_token_id] * 3, GT)
    assert ids[-1] == tokenizer.eos_token_id and mask[-1] == 0
    text = tokenizer.decode(ids[:-1])
    acts, _ = parse_actions(text)
    assert acts == [GT]
    assert "the list is at 3" in text, "the rollout's own reasoning stays"
    action_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert covers(action_text, json.dumps([{"input": GT["params"]}], separators=(",", ":"), sort_keys=True)), action_text
    # The wrong action's own tokens, for the log-prob probe.
    wrong = encode(tokenizer, response)
    m = action_token_mask(tokenizer, wrong)
    assert len(m) == len(wrong)
    assert covers(tokenizer.decode([t for t, k in zip(wrong, m, strict=True) if k]), '[{"click": {"index": 3}}]')
    assert action_token_mask(tokenizer, encode(tokenizer, "no action here")) is None


def bare_trainer(tokenizer):
    t = SalvageDSTrainer.__new__(SalvageDSTrainer)
    t.tokenizer = tokenizer
    t.settings = SalvageSettings()
    t._action_masks, t._original = {}, {}
    return t


def put_rollout(fake, key, tokenizer, response, reward):
    prompt = torch.tensor(encode(tokenizer, "<|im_start|>user\nchoose<|im_end|>", eos=False))
    resp = torch.tensor(encode(tokenizer, response))
    rm = torch.zeros(len(resp))
    rm[-1] = reward
    fake.values.setdefault("train", {})[key] = {
        "prompts": prompt,
        "responses": resp,
        "rm_scores": rm,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(GT)},
        "position_ids": torch.arange(len(prompt) + len(resp)),
        "advantages": torch.full((len(resp),), 0.5),
    }
    return {"response_len": len(resp), "seq_len": len(prompt) + len(resp)}


def test_salvage_rows_are_spliced_and_masked(fake_tq, tokenizer):
    t = bare_trainer(tokenizer)
    rows = [
        ("a_0_0", "rl", json.dumps({"action": [{"input": GT["params"]}]}), 1.0),
        ("a_1_0", "rl", "click(2)", 0.3),
        ("b_0_0", "salvage", json.dumps({"thinking": "pick 2", "action": [{"click": {"index": 2}}]}), 0.0),
        ("b_1_0", "salvage", "I would click(9) here", 0.0),
    ]
    tags = []
    for key, routed, text, r in rows:
        tag = put_rollout(fake_tq, key, tokenizer, text, r)
        tag.update(routed=routed, salvage="hard" if routed == "salvage" else None)
        tags.append(tag)
    tags.append({"response_len": 1, "seq_len": 2, "is_padding": True, "routed": "rl"})
    fake_tq.values["train"]["pad_0_0"] = {}
    batch = KVBatchMeta(partition_id="train", keys=[r[0] for r in rows] + ["pad_0_0"], tags=tags)
    metrics = {}
    t._splice_salvage(batch, metrics)
    assert metrics["salvage/spliced_rows"] == 2 and metrics["salvage/spliced_without_action_tokens"] == 0
    for key in ("b_0_0", "b_1_0"):
        v = fake_tq.values["train"][key]
        text = tokenizer.decode(v["responses"].tolist(), skip_special_tokens=True)
        assert parse_actions(text)[0] == [GT]
        n = len(v["responses"])
        assert batch.tags[[r[0] for r in rows].index(key)]["response_len"] == n
        assert torch.equal(v["input_ids"], torch.cat([v["prompts"], v["responses"]]))
        assert v["attention_mask"].sum() == len(v["input_ids"]) and len(v["position_ids"]) == len(v["input_ids"])
        assert v["rm_scores"].sum() == 0.0 and len(v["rm_scores"]) == n
    assert "I would" in tokenizer.decode(fake_tq.values["train"]["b_1_0"]["responses"].tolist())
    # RL rows are untouched.
    assert tokenizer.decode(fake_tq.values["train"]["a_1_0"]["responses"].tolist(), skip_special_tokens=True) == "click(2)"

    t._write_loss_fields(batch)
    vals = fake_tq.values["train"]
    assert vals["a_0_0"]["rl_token_mask"].tolist() == [1] * batch.tags[0]["response_len"]
    assert vals["b_0_0"]["rl_token_mask"].sum() == 0 and vals["pad_0_0"]["rl_token_mask"].tolist() == [0]
    for key, text in (("b_0_0", rows[2][2]), ("b_1_0", rows[3][2])):
        m = vals[key]["salvage_action_mask"].tolist()
        ids = vals[key]["responses"].tolist()
        got = tokenizer.decode([i for i, k in zip(ids, m, strict=True) if k])
        # The action in the response's own format (JSON here, a call in plain text).
        s = splice_action(text, GT)
        want = s["text"][s["action_span"][0] : s["action_span"][1]]
        assert covers(got, want), (got, want)
    assert vals["a_0_0"]["salvage_action_mask"].sum() == 0
    # N = 4 real rows: RL rows weigh 4/2, salvage rows 4/2, padding 0.
    assert vals["a_1_0"]["loss_row_weight"][0] == 2.0 and vals["b_1_0"]["loss_row_weight"][0] == 2.0
    assert vals["pad_0_0"]["loss_row_weight"].tolist() == [0.0]

    t._zero_salvage_advantages(batch)
    assert vals["b_0_0"]["advantages"].abs().sum() == 0
    assert vals["a_0_0"]["advantages"].abs().sum() > 0


def test_rollout_dump_converts_to_rollouts_jsonl(tmp_path):
    from rmsweb_verl.rollouts import main

    dump = tmp_path / "dump"
    dump.mkdir()
    gt = json.dumps({"name": "click", "params": {"index": 2}})
    lines = []
    for s, (out, score) in enumerate([("click(2)", 1.0), ("click(3)", 0.3), ("click(2)", 1.0), ("??", 0.0)]):
        lines.append({"input": "p", "output": out, "gts": gt, "score": score, "step": 3, "uid": f"u1_{s}_0"})
    for s in range(4):
        lines.append(
            {"input": "q", "output": "click(1)", "gts": gt, "score": 0.3, "step": 3, "uid": f"u2_{s}_0",
             "gate": "std_gate", "routed": "salvage", "rule": "click.other_element", "pair_id": "pair-7"}
        )
    (dump / "3.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "rollouts.jsonl"
    assert main([str(dump), "--out", str(out)]) == 0
    groups = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["prompt_id"] for g in groups] == ["u1", "pair-7"]
    g = groups[0]
    assert g["step"] == 3 and g["gate"] == "accepted" and g["routed"] == "rl"
    assert [s["reward"] for s in g["samples"]] == [1.0, 0.3, 1.0, 0.0]
    assert g["samples"][0]["action"] == {"name": "click", "params": {"index": 2}}
    assert g["samples"][0]["rule"] == "click.same_index" and g["samples"][3]["action"] is None
    assert groups[1]["gate"] == "std_gate" and groups[1]["routed"] == "salvage"
    assert groups[1]["samples"][0]["rule"] == "click.other_element"
    (dump / "4.jsonl").write_text('{"output": "x"}\n')
    assert main([str(dump), "--out", str(out)]) == 1
