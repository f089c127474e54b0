"""ADBS: Adaptive Decision Boundary Strategy for few-shot class-incremental learning (AAAI 2025).

Plug-in API (pure tensor functions, for any FSCIL code base):
    boundary_logits, inter_class_constraint, init_new_boundaries, finetune_boundaries
Pipeline:
    Config, preset, run_trial (see adbs.trial), build_data (see adbs.data); host methods: adbs.hosts

The names below load on first use (PEP 562 module `__getattr__`): `from adbs import Config` works as before, and
the light modules (adbs.redaction, adbs.writable, adbs.cells) import without loading torch, so the commands that
need only them (the MLflow launcher, studies/report.py --help) start in well under a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name -> the module that owns it.
_OWNERS = {
    "boundary_logits": "adbs.boundary",
    "inter_class_constraint": "adbs.boundary",
    "init_new_boundaries": "adbs.boundary",
    "finetune_boundaries": "adbs.boundary",
    "Config": "adbs.config",
    "ConfigError": "adbs.fields",
    "PRESETS": "adbs.config",
    "from_dict": "adbs.config",
    "preset": "adbs.config",
    "run_trial": "adbs.trial",
}

__all__ = ["boundary_logits", "inter_class_constraint", "init_new_boundaries", "finetune_boundaries", "Config",
           "ConfigError", "PRESETS", "from_dict", "preset", "run_trial"]

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from adbs.boundary import boundary_logits, finetune_boundaries, init_new_boundaries, inter_class_constraint
    from adbs.config import PRESETS, Config, from_dict, preset
    from adbs.fields import ConfigError
    from adbs.trial import run_trial


def __getattr__(name: str) -> Any:
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module 'adbs' has no attribute {name!r}")
    value = getattr(importlib.import_module(owner), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
