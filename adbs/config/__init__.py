"""The config of a trial, as one package: what each value may be, how it is typed, and which one wins.

    schema.py       Config: its fields (each Base/NotBase), derived values, checks; from_dict, coerce
    values.py       each value a user gives typed once, at the edge; old key names (RENAMED)
    coercion.py     one value to a field's type
    host_options.py a host's options: `<host>.<option>` keys and host_options text, typed, folded
    checks.py       Config.validate's checks against the registries (dataset, host, backbone)
    presets.py      named presets, a host's versions of them
    precedence.py   preset < a study's defaults < --config FILE < the flags: resolve
    file.py         --config FILE: load_file
    docs.py         the docstring of each field and host option (--help, the docs)
    cli.py          the command-line grammar shared by `python -m adbs.run` and the studies

What the hosts need too (ConfigError, the Base/NotBase markers, host options as JSON text) is adbs/fields.py, below
both, so the package may import the hosts' registry and options (adbs/hosts/__init__.py, adbs/hosts/<host>_options.py),
which load no torch: a flag is checked, or refused, before torch loads. Every public name is importable from here:
`from adbs.config import Config, ConfigError, from_dict, preset, resolve, load_file, ...`.
"""

from adbs.config.schema import (
    BOUNDARY_REMEDIES,
    C_INT_MAX,
    DEVICES,
    FIELDS,
    IC_REDUCTIONS,
    NEW_BOUNDARY_INITS,
    SCHEDULES,
    SEED_MAX,
    SEED_MIN,
    SEED_SPAN,
    SYNTHETIC_VERSIONS,
    VARIANTS,
    Config,
    coerce,
    from_dict,
    from_typed,
)
from adbs.config.file import load_file
from adbs.config.host_options import option_keys, options_of
from adbs.config.precedence import resolve
from adbs.config.presets import PAPER_SETTINGS, PRESETS, host_preset, preset, preset_for
from adbs.config.values import RENAMED, canonical
from adbs.fields import Base, ConfigError, NotBase, check_choice, shapes_base

__all__ = [
    "BOUNDARY_REMEDIES", "C_INT_MAX", "DEVICES", "FIELDS", "IC_REDUCTIONS", "NEW_BOUNDARY_INITS", "SCHEDULES",
    "SEED_MAX", "SEED_MIN", "SEED_SPAN", "SYNTHETIC_VERSIONS", "VARIANTS", "Config", "coerce", "from_dict",
    "from_typed", "Base", "ConfigError", "NotBase", "check_choice", "shapes_base", "load_file", "option_keys",
    "options_of", "resolve", "PAPER_SETTINGS", "PRESETS", "host_preset", "preset", "preset_for", "RENAMED",
    "canonical",
]
