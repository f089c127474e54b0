"""--config FILE: the config values of a YAML or JSON file, a study's best_config.json included, each key typed
here once (adbs.config.precedence.resolve trusts them)."""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from adbs.config.schema import coerce
from adbs.config.values import renamed
from adbs.fields import ConfigError
from adbs.hosts import host_names

STUDY_RESULT_KEYS = ("config_label", "objective", "config")
"""Keys of a study's best_config.json (adbs_lab/results/tables.py: best_config); its `config` is one trial's full config."""


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
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        else:  # YAML is a superset of JSON: any other file (.yaml, .yml, no suffix) is read as YAML
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except _DuplicateKey as e:
        raise ConfigError(f"--config {path}: {e}") from None
    except Exception as e:  # noqa: BLE001 - json.JSONDecodeError or yaml.YAMLError: one line, not a traceback
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"--config {path} is not valid {'JSON' if path.lower().endswith('.json') else 'YAML'}: "
                          f"{first}") from None
    if data is None and path.lower().endswith(".json"):  # JSON null: what a study writes when no trial completed
        raise ConfigError(f"--config {path} holds null, not a mapping of config keys to values: a study's "
                          "best_config.json is null when none of its trials completed, so it names no configuration; "
                          "pass a config file, or the best_config.json of a study that ranked one")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path} must hold a mapping of config keys to values (e.g. `alpha: 0.05`), "
                          f"got a {type(data).__name__}")
    if "config_label" in data and not isinstance(data.get("config"), dict):  # a study's, without a best
        why = str(data.get("why") or "it ranked no configuration").strip()
        raise ConfigError(f"--config {path} is a study's best_config.json that names no configuration ({why[:300]}); "
                          "pass a config file, or the best_config.json of a study that ranked one")
    if set(STUDY_RESULT_KEYS) <= set(data) and isinstance(data["config"], dict):
        data = data["config"]  # a study's best_config.json: the best trial's resolved config
    try:
        return {k: coerce(k, v) for k, v in renamed(_flat(data)).items()}
    except ConfigError as e:
        raise ConfigError(f"--config {path}: {e}") from None


def _flat(data: dict[Any, Any]) -> dict[str, Any]:
    """Nested host options (`savc: {queue_size: 512}`) as `savc.queue_size`; an option given both ways is refused
    (which one is meant?), and so is a host's name whose value is not a mapping of its options."""
    flat: dict[str, Any] = {}
    said: dict[str, str] = {}  # how the file gave each key, for the message
    for key, value in data.items():
        key = str(key)
        if key not in host_names():
            pairs = [(key, value, f"`{key}: {value!r}`")]
        elif isinstance(value, dict) or value is None:  # `savc:` with every option commented out: none
            pairs = [(f"{key}.{k}", v, f"`{key}: {{{k}: {v!r}}}`") for k, v in (value or {}).items()]
        else:
            raise ConfigError(f"host options of {key} must be a mapping of its options, e.g. `{key}: {{<option>: "
                              f"VALUE}}` or `{key}.<option>: VALUE`, got {value!r}; to pick the host, write "
                              f"`host: {key}`")
        for k, v, how in pairs:
            if k in flat:
                raise ConfigError(f"{k} is given twice, as {said[k]} and as {how}; give it once")
            flat[k], said[k] = v, how
    return flat


class _DuplicateKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object without repeated keys (json keeps the last in silence)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"key {k!r} is given twice in one object; give it once")
        out[k] = v
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, but a mapping with a repeated key is refused (PyYAML keeps the last in silence)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden, as YAML says
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    raise _DuplicateKey(f"key {key!r} is given twice (lines {seen[key] + 1} and "
                                        f"{key_node.start_mark.line + 1}); give it once")
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)
