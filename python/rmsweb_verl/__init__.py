"""rmsweb for verl: one rubric, two front doors.

The native part (``rmsweb_verl._native``, a PyO3 extension of the rmsweb crate) is the
same library code the ``rmsweb`` command line runs, so every answer here equals the
CLI's:

- :func:`compute_score` -- verl's custom reward signature, the answer of
  ``rmsweb reward batch``;
- :func:`splice_action` -- Salvage-DS's splice, the answer of ``rmsweb reward splice``;
- :func:`gate_groups` -- the std and competence gates, GRPO advantages and the salvage
  count, the answer of ``rmsweb rl groups``.

The Salvage-DS recipe as a verl 0.9.1 plugin lives in :mod:`rmsweb_verl.sampler`,
:mod:`rmsweb_verl.trainer` and :mod:`rmsweb_verl.loss` (they import verl; this module
does not).
"""

from __future__ import annotations

import json
from typing import Any

from . import _native

__all__ = [
    "compute_score",
    "splice_action",
    "gate_groups",
    "parse_actions",
    "salvage_mix",
    "DATA_SOURCE_PREFIX",
]

#: Every row of an ``rmsweb export verl`` has ``data_source`` ``rmsweb/<domain>``.
DATA_SOURCE_PREFIX = "rmsweb/"


def _json_text(value: Any, field: str) -> str:
    """JSON text for a value given as text, dict or list (what parquet readers hand over)."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist"):  # numpy arrays from pandas
        value = value.tolist()
    try:
        return json.dumps(value)
    except TypeError as e:
        raise ValueError(f"{field}: expected JSON text, a dict or a list, got {type(value).__name__}") from e


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    reward_config: str | None = None,
    **_: Any,
) -> dict:
    """Scores one rollout with rmsweb's polarized action-semantic rubric.

    ``ground_truth`` is the target action (or list of actions) as JSON text or a dict;
    ``extra_info["elements"]`` (JSON text or a list) is the state's element list, so an
    index absent from the state is invalid (0.0). ``reward_config`` names a
    ``reward.toml`` (pass it through verl's ``custom_reward_function.reward_kwargs``).

    Returns ``{"score", "level", "rule", "reason"}`` (verl logs the extra keys).
    """
    if not isinstance(data_source, str) or not data_source.startswith(DATA_SOURCE_PREFIX):
        raise ValueError(
            f"compute_score: data_source {data_source!r} is not from `rmsweb export verl` "
            f"(expected {DATA_SOURCE_PREFIX}<domain>)"
        )
    elements = None
    if extra_info is not None and extra_info.get("elements") is not None:
        elements = _json_text(extra_info["elements"], "extra_info.elements")
    score, level, rule, reason = _native.score(
        solution_str, _json_text(ground_truth, "ground_truth"), elements, reward_config
    )
    return {"score": score, "level": level, "rule": rule, "reason": reason}


def splice_action(response: str, action: Any) -> dict:
    """Puts the ground-truth ``action`` (a dict, a list of them, or JSON text) in place of
    the response's own action, keeping its reasoning and format.

    Returns ``{"text", "action_span"}`` where ``text[start:end]`` for
    ``(start, end) = action_span`` is the new action: the only characters the
    salvage NLL trains on.
    """
    text, start, end = _native.splice(response, _json_text(action, "action"))
    return {"text": text, "action_span": (start, end)}


def parse_actions(response: str) -> tuple[list[dict], tuple[int, int]] | None:
    """The actions a response holds and their span (characters), or None."""
    found = _native.actions(response)
    if found is None:
        return None
    acts, start, end = found
    return json.loads(acts), (start, end)


def gate_groups(
    rewards: list[list[float]],
    eps_sigma: float = 0.10,
    r_comp: float = 0.55,
    mode: str = "salvage-ds",
) -> dict:
    """Gate decisions of reward groups (ALGORITHMS.md §5), as ``rmsweb rl groups``.

    Returns ``{"groups": [{"group", "mean", "std", "max", "decision", "advantages"?}],
    "summary": {"groups", "accepted", "std_gate", "competence_gate", "salvage"}}``;
    ``group`` is the index in ``rewards``.
    """
    rows = [[float(r) for r in g] for g in rewards]
    out = json.loads(_native.gates(rows, float(eps_sigma), float(r_comp), str(mode)))
    for i, g in enumerate(out["groups"]):
        g["group"] = i
    return out


def salvage_mix(hard: int, mastered: int, unit: int = 16, cap: int = 64) -> tuple[int, int]:
    """How many hard (competence-rejected) and mastered (std-rejected) groups the salvage
    rule keeps: ``S = unit * floor(min(hard + mastered, cap) / unit)``, in proportion."""
    return _native.salvage_mix(int(hard), int(mastered), int(unit), int(cap))
