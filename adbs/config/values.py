"""The values of the config: each key a user gives (a flag, a `--set` pair, a file key, a preset's or a search space's
value) checked and typed here, once, at the edge; after that the code trusts typed values.

A key is a Config field, an old name of one (RENAMED) or a host option `<host>.<option>` (adbs/config/
host_options.py); unknown keys and wrong types raise ConfigError naming the valid choices. The schema (the Config
class) is an argument: adbs/config/schema.py imports this module, and binds it as `from_dict` and `coerce`.
"""

from __future__ import annotations

from typing import Any

from adbs.config.coercion import coerce_field
from adbs.config.host_options import coerce_option, fold_options
from adbs.fields import ConfigError, dump_options, parse_options

RENAMED = {"abs_margin": "abs_boundary", "new_margin_init": "new_boundary_init",
           "margin_weight_decay": "boundary_weight_decay"}
"""Fields renamed when the boundary m got one name in code and docs (it was also called margin); the old
names keep working wherever a key is given (--set, presets, search spaces, dicts), read as the new ones."""


def canonical(name: str) -> str:
    """The current name of config key `name` (RENAMED maps the old ones)."""
    return RENAMED.get(name, name)


def renamed(overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` with old key names replaced by the new ones; both at once is ambiguous and raises."""
    out: dict[str, Any] = {}
    for k, v in overrides.items():
        new = canonical(k)
        if new != k and new in overrides:
            raise ConfigError(f"{k!r} is the old name of {new!r}; give only {new!r}")
        out[new] = v
    return out


def coerce_key(cls: type, name: str, value: Any) -> Any:
    """One value of key `name` checked and typed: a field of `cls` (the Config), an old name of one, a host option
    `<host>.<option>` (checked against the host's Options), or host_options (its canonical text; its options are
    typed against the host when folded, fold_options). Strings from a CLI or a file are parsed."""
    name = canonical(name)
    if "." in name:
        return coerce_option(name, value)
    if name == "host_options":
        return dump_options(parse_options(value))
    return coerce_field(cls, name, value)


def typed(cls: Any, overrides: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values of `overrides` (as given: strings, numbers, lists) checked and typed, each once, with its
    `<host>.<option>` keys folded into host_options (checked, typed, defaults dropped).

    `base`: the typed values `overrides` change (Config.replace), whose host and host_options the options fold into;
    without it, the defaults of `cls`. The options must belong to the host the values name.
    """
    values = renamed(dict(overrides))
    base = base or {}
    dotted = {k: v for k, v in values.items() if "." in k}
    plain = {k: v for k, v in values.items() if "." not in k}
    out: dict[str, Any] = {}
    new_host = "host" in plain and plain["host"] != base.get("host", plain["host"])
    if dotted or "host_options" in plain or new_host:
        host = coerce_field(cls, "host", plain["host"]) if "host" in plain else base.get("host", cls.host)
        text, below = _options_given(plain, base, host)
        out["host_options"] = dump_options(fold_options(host, text, dotted, below=below))
        if "host" in plain:
            out["host"] = host
    for k, v in plain.items():
        if k not in out:
            out[k] = coerce_field(cls, k, v)
    return out


def _options_given(plain: dict[str, Any], base: dict[str, Any], host: str) -> tuple[Any, dict[str, Any] | None]:
    """(host_options value to type, options typed already) that the `<host>.<option>` keys fold into: the given
    host_options, else those of `base` (typed already when they are `host`'s; typed against `host` when `base` has
    another host)."""
    if "host_options" in plain:
        return plain["host_options"], None
    if base and base.get("host") == host:
        return "{}", parse_options(base.get("host_options", "{}"))
    return base.get("host_options", "{}"), None
