"""User-given config keys and values (a CLI, a file, a preset, a search space) checked, typed and made a Config.

A key is a Config field, an old name of one (adbs/renames.py) or a host option `<host>.<option>`
(adbs/host_options.py); unknown keys and wrong types raise ConfigError naming the valid choices.
"""

from __future__ import annotations

from typing import Any

from adbs.coercion import coerce_field
from adbs.config import Config, Late
from adbs.host_options import coerce_option, fold_options
from adbs.options_json import dump_options, parse_options
from adbs.renames import canonical, renamed


def coerce(name: str, value: Any) -> Any:
    """Check/convert one override to the field's type; strings from a CLI are parsed.

    `<host>.<option>` keys are a host's options (adbs/hosts/<host>.py: Options), checked against its types.
    Old field names (RENAMED) are read as the new ones.
    """
    name = canonical(name)
    if "." in name:
        return coerce_option(name, value)
    if name == "host_options":
        return dump_options(parse_options(value))
    return coerce_field(name, value)


def from_dict(overrides: dict[str, Any] | None = None) -> Config:
    """Config from defaults plus overrides; unknown keys and wrong types raise.

    `<host>.<option>` keys set one option of the host (the one named by `host`, which they must match).
    """
    values = fold_options(renamed(dict(overrides or {})))
    return Config(**{k: coerce(k, v) for k, v in values.items()})


Late.from_dict = from_dict  # Config.replace
