"""verl's custom reward function: ``reward.custom_reward_function.path =
pkg://rmsweb_verl.reward`` with ``name = compute_score`` (see
:func:`rmsweb_verl.compute_score`)."""

from . import compute_score

__all__ = ["compute_score"]
