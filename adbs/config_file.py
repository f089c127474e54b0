"""--config FILE: the config values of a YAML or JSON file, a study's best_config.json included."""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from adbs.config import ConfigError
from adbs.hosts import host_names
from adbs.overrides import coerce
from adbs.renames import renamed

STUDY_RESULT_KEYS = ("config_label", "objective", "config")
"""Keys of a study's best_config.json (adbs_lab/tables.py: best_config); its `config` is one trial's full config."""


def load_file(path: str) -> dict[str, Any]:
    """The config values of a YAML or JSON file: Config fields and `<host>.<option>` keys, checked and typed.

    Also accepted: a study's `best_config.json` as written (its `config` is the best trial's resolved config),
    and a host's options nested under its name (`savc: {queue_size: 512}` reads as `savc.queue_size: 512`).
    Unknown keys and wrong types raise ConfigError naming the file and the valid choices (`coerce`).
    """
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"--config {path}: cannot read it ({e.strerror or e})") from None
    try:
        if path.lower().endswith(".json"):
            data = json.loads(text)
        else:  # YAML is a superset of JSON: any other file (.yaml, .yml, no suffix) is read as YAML
            data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - json.JSONDecodeError or yaml.YAMLError: one line, not a traceback
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--config {path} is not valid {'JSON' if path.lower().endswith('.json') else 'YAML'}: "
                          f"{first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path} must hold a mapping of config keys to values (e.g. `alpha: 0.05`), "
                          f"got a {type(data).__name__}")
    if set(STUDY_RESULT_KEYS) <= set(data) and isinstance(data["config"], dict):
        data = data["config"]  # a study's best_config.json: the best trial's resolved config
    flat: dict[str, Any] = {}
    for key, value in data.items():
        key = str(key)
        if key in host_names() and isinstance(value, dict):  # nested host options
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    try:
        return {k: coerce(k, v) for k, v in renamed(flat).items()}
    except ConfigError as e:
        raise ConfigError(f"--config {path}: {e}") from None
