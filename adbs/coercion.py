"""One value to a Config field's type: strings from a CLI or a file parsed, wrong types a ConfigError."""

from __future__ import annotations

import difflib
import math
import os
import types
import typing
from typing import Any

from adbs.config import _HINTS, FIELDS, ConfigError


def coerce_field(name: str, value: Any) -> Any:
    """`value` checked and converted to the type of Config field `name`; an unknown name raises, naming close ones."""
    if name not in FIELDS:
        close = difflib.get_close_matches(name, FIELDS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"unknown config key {name!r}{hint}; valid keys: {', '.join(FIELDS)}")
    out = coerce_value(name, _HINTS[name], value)
    return normpath(out) if name in PATH_FIELDS else out


PATH_FIELDS = ("data_root", "index_list", "pretrained")
"""Fields naming a file or folder: kept absolute and normalised (a trailing '/', '~' or a relative path name
the same files wherever a trial runs), so the same files always give the same config."""


def normpath(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip() or "://" in value:
        return value
    return os.path.abspath(os.path.expanduser(value))


def coerce_value(name: str, tp: Any, value: Any) -> Any:
    """`value` as type `tp` (a field's annotation: int, float, bool, str, X | None, tuple[X, ...]); strings from a
    CLI are parsed; anything else raises ConfigError naming `name` and the type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce_value(name, a, value)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{name}: bad value {value!r}")
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(tp)
        if isinstance(value, str):
            value = [v for v in value.replace(",", " ").split() if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of {inner.__name__}, got {value!r}")
        return tuple(coerce_value(name, inner, v) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if type(value) is int and value in (0, 1):  # `abs_boundary: 1` in a file means what `--set abs_boundary=1` does
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ConfigError(f"{name} must be a bool (true/false), got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be an int, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        number = None
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise ConfigError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(number):  # nan/inf would only fail later, inside every trial
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {value!r}")
    raise ConfigError(f"{name}: unsupported type {tp}")
