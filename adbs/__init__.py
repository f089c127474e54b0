"""ADBS: Adaptive Decision Boundary Strategy for few-shot class-incremental learning (AAAI 2025).

Plug-in API (pure tensor functions, for any FSCIL code base):
    boundary_logits, inter_class_constraint, init_new_boundaries, finetune_boundaries
Pipeline:
    Config, preset, run_trial (see adbs.trial), build_data (see adbs.data); host methods: adbs.hosts
"""

from adbs.boundary import boundary_logits, finetune_boundaries, init_new_boundaries, inter_class_constraint
from adbs.config import PRESETS, Config, ConfigError, from_dict, preset

__version__ = "0.1.0"

__all__ = [
    "boundary_logits",
    "inter_class_constraint",
    "init_new_boundaries",
    "finetune_boundaries",
    "Config",
    "ConfigError",
    "PRESETS",
    "from_dict",
    "preset",
    "run_trial",
]


def run_trial(*args, **kwargs):
    """adbs.trial.run_trial, imported lazily so the plug-in API stays light."""
    from adbs.trial import run_trial as _run_trial

    return _run_trial(*args, **kwargs)
