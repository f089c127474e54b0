"""A host's options given key by key as `<host>.<option>` or as host_options text: checked against the host's
Options (adbs/hosts/<host>_options.py), typed once, folded into Config.host_options (canonical JSON text, defaults dropped).
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any

from adbs.config.coercion import coerce_value
from adbs.fields import ConfigError, check_choice, parse_options
from adbs.hosts import host_names, options_class


def coerce_option(name: str, value: Any) -> Any:
    """`value` of option `<host>.<option>` checked against the host's Options and converted to its type."""
    host, option = name.split(".", 1)
    opts = options_class(host)
    fields = {f.name for f in dataclasses.fields(opts)}
    if option not in fields:
        close = difflib.get_close_matches(option, fields, n=3)
        hint = f" (did you mean {', '.join(host + '.' + c for c in close)}?)" if close else ""
        raise ConfigError(f"unknown option {option!r} of host {host}{hint}; valid options: "
                          f"{', '.join(host + '.' + f for f in sorted(fields)) or '(none)'}")
    return coerce_value(name, typing.get_type_hints(opts)[option], value)


def typed_options(host: str, options: dict[str, Any], typed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`options` checked and typed against host's Options (but the keys in `typed`, whose values are typed already);
    values equal to the default are dropped."""
    defaults = options_class(host)()
    out = {}
    for key, value in options.items():
        v = value if key in typed else coerce_option(f"{host}.{key}", value)
        if v != getattr(defaults, key):
            out[key] = v
    return out


def fold_options(host: str, host_options: Any, dotted: dict[str, Any], dotted_typed: bool = False,
                 below: dict[str, Any] | None = None) -> dict[str, Any]:
    """The options of `host`, typed, defaults dropped: `below` (options typed already for `host`), then those of
    `host_options` (a host_options value, text or a dict, not yet checked against a host), then the `<host>.<option>`
    keys of `dotted` (typed already by coerce_option when `dotted_typed`, else coerced here). Each value is coerced
    once; the dotted keys must belong to `host`."""
    given = parse_options(host_options)
    options = {**(below or {}), **given}
    typed = set(below or {}) - set(given)
    for key, value in dotted.items():
        value = value if dotted_typed else coerce_option(key, value)  # the key and type are checked whatever the host
        owner, option = key.split(".", 1)
        if owner != host:
            raise ConfigError(f"{key} is an option of host {owner}, but host is {host}; "
                              f"set host={owner} or drop {key}")
        options[option] = value
        typed.add(option)
    check_choice("host", host, host_names())
    return typed_options(host, options, frozenset(typed))


def options_of(cfg: Any) -> Any:
    """The host's options (the Options of adbs/hosts/<host>_options.py) of a Config, its defaults updated by cfg.host_options."""
    return options_class(cfg.host)(**parse_options(cfg.host_options))


def option_keys() -> dict[str, Any]:
    """Every host option as `<host>.<option>`: its dataclasses.Field (for --help and the CLIs)."""
    return {f"{h}.{f.name}": f for h in host_names() for f in dataclasses.fields(options_class(h))}
