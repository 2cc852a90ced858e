"""verl's rollout dump (``trainer.rollout_data_dir``: ``<step>.jsonl`` files of
``{input, output, gts, score, step, uid}`` lines, ``uid`` = ``<prompt uid>_<session>_<output>``)
to rmsweb's ``rollouts.jsonl`` (FORMATS.md: one line per group
``{step, prompt_id, samples: [{text, action, reward, rule}], gate}``, plus ``routed``,
``mean``, ``std``), which the workbench's Reward tab browses.

Lines written by the rmsweb_verl trainer also carry ``gate``, ``routed``, ``rule``
and ``pair_id``; they are used as recorded. For a plain verl dump the gate is decided
here with :func:`rmsweb_verl.gate_groups` (the thresholds and mode given) and the
rule by :func:`rmsweb_verl.compute_score` against ``gts`` (without the state's
elements, which a plain dump lacks). A line that cannot be read is an error naming
the file and line.

    python -m rmsweb_verl.rollouts DUMP_DIR_OR_FILE [--out rollouts.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path

from . import compute_score, gate_groups, parse_actions
from .settings import MODES


def _step_of(path: Path) -> int:
    try:
        return int(path.stem)
    except ValueError:
        return -1


def dump_files(source: Path) -> list[Path]:
    """The dump's JSONL files in step order."""
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: no such rollout dump (a folder of <step>.jsonl or one file)")
    return sorted(source.glob("*.jsonl"), key=lambda p: (_step_of(p), p.name))


def read_lines(path: Path):
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from e
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{n}: expected an object")
            for field in ("output", "score", "uid"):
                if field not in rec:
                    raise ValueError(f"{path}:{n}: missing field `{field}`")
            if not isinstance(rec["score"], (int, float)):
                raise ValueError(f"{path}:{n}: field `score`: expected a number")
            yield n, rec


def convert(source: Path, eps_sigma: float = 0.10, r_comp: float = 0.55, mode: str = "salvage-ds") -> list[dict]:
    """The groups of a dump, in the order they appear."""
    out: list[dict] = []
    for path in dump_files(source):
        groups: OrderedDict[tuple, list[dict]] = OrderedDict()
        for n, rec in read_lines(path):
            prompt_uid = str(rec["uid"]).split("_")[0]
            step = rec.get("step", _step_of(path))
            groups.setdefault((step, prompt_uid), []).append(rec)
        decided = gate_groups([[float(r["score"]) for r in g] for g in groups.values()], eps_sigma, r_comp, mode)
        for ((step, uid), recs), line in zip(groups.items(), decided["groups"], strict=True):
            samples = []
            for r in recs:
                parsed = parse_actions(r["output"])
                rule = r.get("rule")
                if rule is None and r.get("gts") is not None:
                    try:
                        rule = compute_score("rmsweb/dump", r["output"], r["gts"])["rule"]
                    except ValueError:
                        rule = ""
                samples.append(
                    {
                        "text": r["output"],
                        "action": parsed[0][0] if parsed and parsed[0] else None,
                        "reward": float(r["score"]),
                        "rule": rule or "",
                    }
                )
            first = recs[0]
            out.append(
                {
                    "step": int(step) if isinstance(step, (int, float)) else 0,
                    "prompt_id": first.get("pair_id") or uid,
                    "gate": first.get("gate") or line["decision"],
                    "routed": first.get("routed") or ("rl" if line["decision"] == "accepted" else "discarded"),
                    "mean": line["mean"],
                    "std": line["std"],
                    "samples": samples,
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmsweb_verl.rollouts", description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", type=Path, help="trainer.rollout_data_dir, or one <step>.jsonl")
    ap.add_argument("--out", type=Path, default=Path("rollouts.jsonl"))
    ap.add_argument("--eps-sigma", type=float, default=0.10)
    ap.add_argument("--r-comp", type=float, default=0.55)
    ap.add_argument("--mode", default="salvage-ds", choices=MODES)
    a = ap.parse_args(argv)
    try:
        groups = convert(a.dump, a.eps_sigma, a.r_comp, a.mode)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    tmp = a.out.with_name(a.out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for g in groups:
            f.write(json.dumps(g, ensure_ascii=False) + "\n")
    tmp.replace(a.out)
    print(f"{len(groups)} groups written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
