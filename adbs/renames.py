"""Old config key names, read as the current ones wherever a key is given (--set, presets, search spaces, files)."""

from __future__ import annotations

from typing import Any

from adbs.config import ConfigError

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
