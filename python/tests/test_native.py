"""One rubric, two front doors: the Python module's answers equal the CLI's."""

from __future__ import annotations

import json
import random
import time

import pandas as pd
import pytest

import rmsweb_verl
from rmsweb_verl import compute_score, gate_groups, parse_actions, salvage_mix, splice_action
from rmsweb_verl.settings import MODES


def candidates_for(target: dict, elements: list[dict]) -> list[str]:
    """Responses around a target: exact, other index, an index absent from the state,
    other type, Browser Use JSON, fenced, unparseable."""
    name, params = target["name"], target.get("params", {})
    idx = params.get("index")
    present = sorted(e["index"] for e in elements)
    other = next((i for i in present if i != idx), None)
    absent = (max(present) + 7) if present else 99
    out = [
        json.dumps({"thinking": "t", "action": [{name: params}]}),
        "```json\n" + json.dumps({"action": [{name: params}]}) + "\n```",
        "I am not sure what to do.",
        json.dumps({"action": [{"go_back": {}}]}),
        json.dumps({"action": [{"done": {"text": "finished", "success": True}}]}),
    ]
    if idx is not None:
        out.append(f"click({absent})")
        if other is not None:
            p = dict(params, index=other)
            out.append(json.dumps({"action": [{name: p}]}))
    if "text" in params:
        out.append(json.dumps({"action": [{name: dict(params, text=str(params["text"]) + " 2024")}]}))
    return out


@pytest.fixture(scope="module")
def cases(export_dir):
    rows = pd.concat([pd.read_parquet(export_dir / "train.parquet"), pd.read_parquet(export_dir / "val.parquet")])
    out = []
    for _, r in rows.iterrows():
        target = json.loads(r["reward_model"]["ground_truth"])
        elements = json.loads(r["extra_info"]["elements"])
        for c in candidates_for(target, elements):
            out.append((r["data_source"], c, r["reward_model"]["ground_truth"], dict(r["extra_info"]), target, elements))
    assert len(out) > 100
    return out


def test_compute_score_equals_reward_batch(cases, rmsweb):
    lines = "".join(json.dumps({"target": t, "candidate": c, "elements": e}) + "\n" for _, c, _, _, t, e in cases)
    cli = rmsweb(["reward", "batch", "-"], stdin=lines)
    assert len(cli) == len(cases)
    levels = set()
    for (ds, c, gt, extra, _, _), want in zip(cases, cli, strict=True):
        got = compute_score(ds, c, gt, extra)
        assert got == {k: want[k] for k in ("score", "level", "rule", "reason")}, c
        levels.add(got["level"])
    assert {"exact", "wrong"} <= levels and len(levels) >= 3, levels


def test_an_index_absent_from_the_state_scores_zero(cases):
    hits = 0
    for ds, c, gt, extra, t, e in cases:
        if c.startswith("click(") and t["name"] == "click":
            hits += 1
            assert compute_score(ds, c, gt, extra)["score"] == 0.0
            # Without the elements the rubric cannot tell, which is why the export carries them.
            assert compute_score(ds, c, gt, {})["score"] == 0.3
    assert hits > 0


def test_bad_input_is_a_clear_error():
    gt = json.dumps({"name": "click", "params": {"index": 1}})
    with pytest.raises(ValueError, match="data_source"):
        compute_score("openai/gsm8k", "click(1)", gt)
    with pytest.raises(ValueError, match=r"ground_truth: not JSON"):
        compute_score("rmsweb/web", "click(1)", "{")
    with pytest.raises(ValueError, match=r"elements\[0\]\.index"):
        compute_score("rmsweb/web", "click(1)", gt, {"elements": '[{"index": "x"}]'})
    # dicts and lists are accepted as well as JSON text
    assert compute_score("rmsweb/web", "click(1)", {"name": "click", "params": {"index": 1}})["score"] == 1.0


def test_splice_equals_the_cli_and_spans_characters(rmsweb):
    target = {"name": "input", "params": {"index": 4, "text": "Zoë"}}
    responses = [
        json.dumps({"thinking": "type the name → field 4", "action": [{"click": {"index": 2}}]}),
        "Thinking… then click(7)",
        "no action at all",
        '```json\n{"action": [{"click": {"index": 1}}, {"done": {"text": "ok", "success": true}}]}\n```',
    ]
    stdin = "".join(json.dumps({"response": r, "action": target}) + "\n" for r in responses)
    cli = rmsweb(["reward", "splice", "-"], stdin=stdin)
    for r, want in zip(responses, cli, strict=True):
        got = splice_action(r, target)
        assert got["text"] == want["text"]
        s, e = got["action_span"]
        assert got["text"][s:e] == want["action_text"]
        assert got["text"].encode()[want["action_span"][0] : want["action_span"][1]].decode() == want["action_text"]
        acts, _ = parse_actions(got["text"])
        assert acts[0] == target
    with pytest.raises(ValueError, match="action"):
        splice_action("click(1)", "[]")


def test_gate_groups_equals_rl_groups(rmsweb):
    rng = random.Random(7)
    levels = [0.0, 0.3, 0.7, 1.0]
    groups = [[rng.choice(levels) for _ in range(8)] for _ in range(60)]
    groups += [[0.7] * 8, [0.3, 0.0] * 4, [0.0, 0.2], [1.0, 0.0] + [0.0] * 6]
    assert MODES, "the Rust list of modes is empty"
    for mode in MODES:
        for eps, rc in ((0.10, 0.55), (0.2, 0.9)):
            stdin = "".join(json.dumps({"group": i, "rewards": g}) + "\n" for i, g in enumerate(groups))
            cli = rmsweb(
                ["rl", "groups", "-", "--eps-sigma", str(eps), "--r-comp", str(rc), "--mode", mode],
                stdin=stdin,
            )
            got = gate_groups(groups, eps, rc, mode)
            assert len(cli) == len(groups) + 1
            assert got["groups"] == cli[:-1]
            assert got["summary"] == cli[-1]["summary"]
    with pytest.raises(ValueError, match="mode"):
        gate_groups([[1.0]], mode="ppo")
    with pytest.raises(ValueError, match=r"groups\[1\]\.rewards"):
        gate_groups([[1.0], []])


def test_salvage_mix_follows_the_rule():
    assert salvage_mix(24, 8) == (24, 8)
    assert salvage_mix(30, 10) == (24, 8)
    assert sum(salvage_mix(3, 60)) == 48
    assert salvage_mix(7, 0, unit=4, cap=8) == (4, 0)


def test_reward_calls_per_second_through_the_module(cases, capsys):
    """Throughput figure for the report (printed, not asserted)."""
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for ds, c, gt, extra, _, _ in cases:
            compute_score(ds, c, gt, extra)
            n += 1
    dt = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[rmsweb_verl] compute_score: {n / dt:,.0f} calls/s ({n} calls, {rmsweb_verl._native.RMSWEB_VERSION})")


def test_modes_are_the_clis():
    """The package's modes are the ones `rmsweb rl groups --mode` offers, in order."""
    import subprocess

    from conftest import _bin

    help_text = subprocess.run([_bin(), "rl", "groups", "-h"], capture_output=True, text=True, check=True).stdout
    assert f"[possible values: {', '.join(MODES)}]" in help_text, help_text


def test_the_metric_keys_the_package_writes_are_rusts():
    """Every metric key named in the package is one the Runs tab and report know."""
    import pathlib
    import re

    from rmsweb_verl import _native

    known = set(_native.metric_keys())
    # verl's own prefix for a loss's extra metric, renamed by the trainer on the way out.
    renamed = {"actor/salvage/nll"}
    pkg = pathlib.Path(rmsweb_verl.__file__).parent
    pattern = re.compile(r"[\"'](?:actor|salvage|critic|train|perf|timing_s|alerts|rollout_corr|response_length)/[a-z_/]+[\"']")
    named = {m.group(0)[1:-1] for f in pkg.glob("*.py") for m in pattern.finditer(f.read_text())}
    assert "salvage/logprob_gap" in named, "the scan found none of the keys it should"
    assert named - renamed <= known, sorted(named - renamed - known)
