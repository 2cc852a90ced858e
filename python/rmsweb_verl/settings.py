"""The Salvage-DS settings of a verl run: ``trainer.v1.sampler.sampler_kwargs`` in
``salvage_ds.yaml`` (the sampler receives them, the trainer reads the same node).

The ablation modes are switches here and share everything else (ALGORITHMS.md §5):

- ``salvage-ds``: both gates, refill, salvage anchor on retained rejected groups;
- ``anchor-free``: both gates and refill, no salvage (``salvage_coef`` 0);
- ``dapo``: keep groups with any reward spread, no competence gate, no salvage
  (run.sh also sets clip_ratio_high 0.28);
- ``grpo``: no filtering (run.sh sets the symmetric clip 0.2).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from . import _native

#: The RL modes, from the Rust list (``rmsweb::train::rl::groups::Mode``).
MODES = tuple(_native.modes())


@dataclasses.dataclass(frozen=True)
class SalvageSettings:
    mode: str = "salvage-ds"
    #: std gate: a group whose population std is at most this has no contrast.
    eps_sigma: float = 0.10
    #: competence gate: a group whose best reward is below this has no competent rollout.
    r_comp: float = 0.55
    #: refill until this many groups are accepted ...
    target_groups: int = 64
    #: ... or this many generation batches (the first included) were drawn.
    max_gen_batches: int = 16
    #: the salvage rule S = unit * floor(min(D, cap) / unit).
    salvage_unit: int = 16
    salvage_cap: int = 64
    #: weight of the action-only NLL on salvage rows (0 in anchor-free).
    salvage_coef: float = 0.10
    #: prompts one refill draws (default: data.train_batch_size).
    refill_prompts: int | None = None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any] | None) -> "SalvageSettings":
        """Reads ``sampler_kwargs``; an unknown key or a bad value is an error naming it."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in dict(kwargs or {}).items():
            if key not in known:
                raise ValueError(
                    f"trainer.v1.sampler.sampler_kwargs.{key}: unknown setting "
                    f"(known: {', '.join(sorted(known))})"
                )
            values[key] = value
        s = cls(**values)
        s.validate()
        if s.mode != "salvage-ds" and "salvage_coef" not in values:
            s = dataclasses.replace(s, salvage_coef=0.0)
        return s

    def validate(self) -> None:
        def bad(field: str, why: str) -> ValueError:
            return ValueError(f"trainer.v1.sampler.sampler_kwargs.{field}: {why}")

        if self.mode not in MODES:
            raise bad("mode", f"{self.mode!r}: use one of {', '.join(MODES)}")
        for f in ("eps_sigma", "r_comp", "salvage_coef"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise bad(f, f"{v!r}: expected a finite number >= 0")
        for f in ("target_groups", "max_gen_batches", "salvage_unit", "salvage_cap"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise bad(f, f"{v!r}: expected a whole number >= 1")
        if self.refill_prompts is not None and (
            not isinstance(self.refill_prompts, int) or self.refill_prompts < 1
        ):
            raise bad("refill_prompts", f"{self.refill_prompts!r}: expected a whole number >= 1")

    @property
    def salvages(self) -> bool:
        """Whether rejected groups are retained for the salvage NLL."""
        return self.mode == "salvage-ds" and self.salvage_coef > 0
