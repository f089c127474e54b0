"""A host's options as JSON text: the form they take in Config.host_options (one flat schema for every table,
MLflow run and search space, whatever the host), parsed back into a dict of option: value."""

from __future__ import annotations

import ast
import json
from typing import Any

from adbs.config import ConfigError


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
