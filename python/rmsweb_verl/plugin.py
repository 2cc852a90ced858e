"""verl plugin entry point (``verl.plugins`` entry point, or
``VERL_USE_EXTERNAL_MODULES=rmsweb_verl.plugin``): importing it registers the
``salvage_ds`` trainer mode with verl's V1 trainer registry."""

from .trainer import SalvageDSTrainer, TRAINER_MODE  # noqa: F401  (registers the trainer)

__all__ = ["SalvageDSTrainer", "TRAINER_MODE"]
