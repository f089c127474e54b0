"""A host's options given key by key as `<host>.<option>`: checked against its Options, typed, folded into
Config.host_options. Between the hosts (which own their options) and the Config (which imports neither)."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any

from adbs.coercion import coerce_field, coerce_value
from adbs.config import Config, ConfigError, check_choice
from adbs.hosts import get_host, host_names
from adbs.options_json import dump_options, parse_options


def coerce_option(name: str, value: Any) -> Any:
    """`value` of option `<host>.<option>` checked against the host's Options and converted to its type."""
    host, option = name.split(".", 1)
    opts = get_host(host).Options
    fields = {f.name for f in dataclasses.fields(opts)}
    if option not in fields:
        close = difflib.get_close_matches(option, fields, n=3)
        hint = f" (did you mean {', '.join(host + '.' + c for c in close)}?)" if close else ""
        raise ConfigError(f"unknown option {option!r} of host {host}{hint}; valid options: "
                          f"{', '.join(host + '.' + f for f in sorted(fields)) or '(none)'}")
    return coerce_value(name, typing.get_type_hints(opts)[option], value)


def typed_options(host: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options` checked and typed against host's Options; values equal to the default are dropped."""
    defaults = get_host(host).Options()
    out = {}
    for key, value in options.items():
        v = coerce_option(f"{host}.{key}", value)
        if v != getattr(defaults, key):
            out[key] = v
    return out


def fold_options(overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` with its `<host>.<option>` keys folded into `host_options` (checked, typed, defaults dropped).

    The options must belong to the host the overrides name (or the default host).
    """
    values = {k: v for k, v in overrides.items() if "." not in k}
    dotted = {k: v for k, v in overrides.items() if "." in k}
    if not dotted and "host_options" not in values:
        return values
    host = coerce_field("host", values.get("host", Config.host))
    options = parse_options(values.get("host_options", "{}"))
    for key, value in dotted.items():
        owner, option = key.split(".", 1)
        coerce_option(key, value)  # the key and type are checked whatever the host
        if owner != host:
            raise ConfigError(f"{key} is an option of host {owner}, but host is {host}; "
                              f"set host={owner} or drop {key}")
        options[option] = value
    check_choice("host", host, host_names())
    values["host_options"] = dump_options(typed_options(host, options))
    return values


def options_of(cfg: Config) -> Any:
    """The host's options (adbs/hosts/<host>.py: Options), its defaults updated by cfg.host_options."""
    return get_host(cfg.host).Options(**parse_options(cfg.host_options))


def option_keys() -> dict[str, Any]:
    """Every host option as `<host>.<option>`: its dataclasses.Field (for --help and the CLIs)."""
    return {f"{h}.{f.name}": f for h in host_names() for f in dataclasses.fields(get_host(h).Options)}
