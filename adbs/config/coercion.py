"""One value to the type of a dataclass field (a Config field, a host option): strings from a CLI or a file parsed,
wrong types a ConfigError naming the field and the type. The schema is an argument, so this module imports no
schema (adbs/config/schema.py imports it)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import types
import typing
from typing import Any

from adbs.fields import ConfigError


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """{field: its type} of dataclass `cls`, its Base/NotBase markers left out (read once per class)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in typing.get_type_hints(cls).items() if k in names}


def coerce_field(cls: type, name: str, value: Any) -> Any:
    """`value` checked and converted to the type of field `name` of `cls` (the Config); an unknown name raises,
    naming close ones."""
    types_ = field_types(cls)
    if name not in types_:
        close = difflib.get_close_matches(name, types_, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"unknown config key {name!r}{hint}; valid keys: {', '.join(types_)}")
    out = coerce_value(name, types_[name], value)
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
        return _union(name, typing.get_args(tp), value)
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(tp)
        if isinstance(value, str):
            value = [v for v in value.replace(",", " ").split() if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of {inner.__name__}, got {value!r}")
        return tuple(coerce_value(name, inner, v) for v in value)
    if tp in _SCALARS:
        return _SCALARS[tp](name, value)
    raise ConfigError(f"{name}: unsupported type {tp}")


def _union(name: str, args: tuple[Any, ...], value: Any) -> Any:
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


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):  # `abs_boundary: 1` in a file means what `--set abs_boundary=1` does
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        return value.lower() in ("true", "1", "yes", "on")
    raise ConfigError(f"{name} must be a bool (true/false), got {value!r}")


def _int(name: str, value: Any) -> int:
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


def _float(name: str, value: Any) -> float:
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


def _str(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"{name} must be a string, got {value!r}")


_SCALARS = {bool: _bool, int: _int, float: _float, str: _str}
