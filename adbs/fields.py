"""What the config shares with the hosts, so it sits below both: `ConfigError` and the checks that raise it, the
`Base`/`NotBase` markers every Config field and host option declares, and a host's options as JSON text.

Why a module of its own, outside the package adbs/config/: that package reaches the hosts (their options and
presets, adbs/hosts/<host>_options.py; the registry checks of Config.validate), and each host declares its Options
with these markers and raises ConfigError; if the hosts imported them from the package, the two would import each
other (tests/repo/test_imports.py refuses any import circle, one closed inside a function too). Users may import
every name here from adbs.config.
"""

from __future__ import annotations

import ast
import json
import typing
from typing import Annotated, Any, TypeVar


class ConfigError(ValueError):
    """A config value or key is invalid; the message says what is allowed."""


class Shapes:
    """Marker in a field's annotation: does the field shape the base session (the cache key)?"""

    def __init__(self, base: bool):
        self.base = base

    def __repr__(self) -> str:
        return "Base" if self.base else "NotBase"


_T = TypeVar("_T")
Base = Annotated[_T, Shapes(True)]
"""A field that changes what the base session produces: it is part of adbs.cache.base_key."""
NotBase = Annotated[_T, Shapes(False)]
"""A field that acts only after the base session (or on speed, or on reporting): not in the key."""


def shapes_base(cls: type) -> dict[str, bool]:
    """{field: shapes the base session?} of a dataclass whose fields are declared Base[...] / NotBase[...].

    A field with neither marker is missing from the result (tests/adbs/config/test_config.py checks there is none).
    """
    out = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Shapes)]
        if marks:
            out[name] = marks[0].base
    return out


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; valid choices: {', '.join(map(str, choices))}")


def check_range(name: str, value: int, lo: int, hi: int | None, why: str) -> None:
    """`value` within lo..hi (hi None: no upper bound): what torch, numpy or the OS accept, said with the range."""
    if value < lo or (hi is not None and value > hi):
        allowed = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ConfigError(f"{name}={value} is out of range; allowed: {allowed} ({why}); pick a value in that range")


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value}")


# A host's options as JSON text: the form they take in Config.host_options (one flat schema for every table,
# MLflow run and search space, whatever the host), parsed back into a dict of option: value.

def parse_options(value: Any) -> dict[str, Any]:
    """host_options as a dict: from a dict, or its JSON text (as logged), or a Python dict literal."""
    if isinstance(value, dict):
        return dict(value)
    if not isinstance(value, str):
        raise ConfigError(f"host_options must be a JSON object of option: value, got {value!r}")
    text = value.strip() or "{}"
    try:
        out = json.loads(text)
    except ValueError:
        try:
            out = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ConfigError(f"host_options must be a JSON object of option: value, got {value!r}") from None
    if not isinstance(out, dict):
        raise ConfigError(f"host_options must be a JSON object of option: value, got {value!r}")
    return out


def dump_options(options: dict[str, Any]) -> str:
    """The canonical text of `options`: keys sorted, tuples as lists, so equal options give equal text (and key)."""
    return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in sorted(options.items())},
                      separators=(", ", ": "))
