#!/usr/bin/env python3
"""Copies a dataset written by `rmsweb collect` into OUT with the parts that change
from run to run made stable, so rebuilding fixtures/ only differs where content does:

- trajectory ids: `collect-<UTC time>-<pid>-login-user-s0-a1` -> `login-user-s0-a1`
  (screenshot folders renamed to match);
- URLs: the MiniWoB server's random loopback port is dropped
  (`http://127.0.0.1:41234/miniwob/x.html` -> `http://127.0.0.1/miniwob/x.html`);
- step timing is removed (`null`): wall-clock times of a scripted teacher on loopback
  say nothing and would differ on every run.

Everything else (tasks, steps, elements, DOM text, outcomes, reflections, screenshots)
is copied as collected. Ids must stay unique: two collect runs of the same task and
seed would collide, and that is an error.

Usage: normalize.py RAW_DATASET OUT_DATASET
"""

import json
import re
import shutil
import sys
from pathlib import Path

RUN_ID = re.compile(r"^collect-\d{8}T\d{6}-\d+(-norefl)?-")
PORT = re.compile(r"http://127\.0\.0\.1:\d+/")


def stable_id(raw_id: str) -> str:
    m = RUN_ID.match(raw_id)
    if not m:
        sys.exit(f"normalize: trajectory id {raw_id!r} is not a collect run id")
    suffix = "-norefl" if m.group(1) else ""
    return raw_id[m.end():] + suffix


def strip_ports(value):
    """Drops the loopback port from every string inside a JSON value."""
    if isinstance(value, str):
        return PORT.sub("http://127.0.0.1/", value)
    if isinstance(value, list):
        return [strip_ports(v) for v in value]
    if isinstance(value, dict):
        return {k: strip_ports(v) for k, v in value.items()}
    return value


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    raw, out = Path(sys.argv[1]), Path(sys.argv[2])
    (out / "screenshots").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(raw / "tasks.jsonl", out / "tasks.jsonl")
    seen = set()
    lines = []
    for n, line in enumerate((raw / "trajectories.jsonl").read_text().splitlines(), 1):
        if not line.strip():
            continue
        t = json.loads(line)
        new = stable_id(t["id"])
        if new in seen:
            sys.exit(f"normalize: trajectories.jsonl:{n}: id {new!r} twice")
        seen.add(new)
        t["id"] = new
        for step in t["steps"]:
            shot = step["state"].get("screenshot")
            if shot:
                src = raw / shot
                rel = f"screenshots/{new}/{Path(shot).name}"
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out / rel)
                step["state"]["screenshot"] = rel
            step["timing"] = None
        t = strip_ports(t)
        lines.append(json.dumps(t, ensure_ascii=False, separators=(",", ":")))
    (out / "trajectories.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
