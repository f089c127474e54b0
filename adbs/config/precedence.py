"""The one precedence of config values: preset < a study's defaults < a config file < overrides (the flags).

Each layer is typed once, where it enters: the flags and `--set` pairs here (`typed_layer`), a file's keys when it
is read (adbs/config/file.py: load_file), a preset's and a study's values here; after that `resolve` merges typed
values and trusts them, and its result becomes a Config without another coercion (adbs.config.schema.from_typed).
"""

from __future__ import annotations

from typing import Any

from adbs.config.host_options import fold_options
from adbs.config.presets import PRESETS, host_preset, preset_for
from adbs.config.schema import FIELDS, Config, coerce
from adbs.config.values import canonical, renamed
from adbs.fields import ConfigError, dump_options, parse_options


def typed_layer(values: dict[str, Any] | None) -> dict[str, Any]:
    """`values` as given (strings typed on a command line, a preset's or a study's values) with current key names,
    each value coerced once (adbs.config.schema.coerce); `<host>.<option>` keys stay apart until folded."""
    return {canonical(k): coerce(k, v) for k, v in renamed(dict(values or {})).items()}


def resolve(preset_name: str = "cpu", study_defaults: dict[str, Any] | None = None,
            overrides: dict[str, Any] | None = None, file: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one precedence of config values: preset < a study's defaults < a config file < overrides; all typed.

    `overrides` are what the user typed (a study's --host/--dataset/--data-root/--set, or the field options
    of `python -m adbs.run`), coerced here; `file` the values of --config FILE as `load_file` typed them (trusted
    here). A `dataset` (typed or in the file) naming a paper preset while the preset is the default `cpu` picks
    that paper preset (`--dataset cifar100` means the paper's CIFAR100 settings); a `host` picks that host's
    version of the preset (`host_preset`: savc + cifar100 = savc_cifar100). A study's defaults apply to the `cpu`
    preset only: they fit the CPU budget and never change a paper preset. `<host>.<option>` keys are folded into
    host_options (`fold_options`); typed host_options add to the preset's options, except from a file that gives
    every Config field (a study's best_config.json): that file is the whole config, host options included, so it
    reproduces its trial whatever the preset. Returns the typed values a Config is built from (`from_typed`), so
    searched fields can still be added (`from_dict`).
    """
    overrides = typed_layer(overrides)
    file = renamed(dict(file or {}))
    _given_once(overrides)
    _given_once(file)
    picks = {**file, **overrides}
    preset_name = preset_for(preset_name, picks.get("dataset"))
    host = picks.get("host")
    owner = PRESETS[preset_name].get("host")
    if host and owner and host != owner:  # e.g. preset savc_cpu with host alice: a mix of two hosts' settings
        plain = preset_name[len(owner) + 1:] if preset_name.startswith(owner + "_") else "cpu"
        raise ConfigError(f"preset {preset_name} is host {owner}'s, but host is {host}: pick host {host}'s "
                          f"version with preset {plain} and host {host}, or drop the host to run {owner}")
    out = host_preset(host, preset_name) if host else dict(PRESETS[preset_name])
    if preset_name == "cpu":
        out.update(study_defaults or {})
    return _merge(typed_layer(out), file, overrides, whole=set(FIELDS) <= set(file))


def _merge(out: dict[str, Any], file: dict[str, Any], overrides: dict[str, Any], whole: bool) -> dict[str, Any]:
    """The typed layers merged, file then overrides on top of the preset's `out`, host options folded.

    A layer's host_options add to the options set so far (`below`, typed for `below_host`), as <host>.<option>
    keys do, and replace the earlier <host>.<option> keys; a whole file's host_options are the options."""
    below: dict[str, Any] | None = None
    below_host = None
    for layer in (file, overrides):
        whole_file = layer is file and whole
        if "host_options" in layer and not whole_file:
            below_host = out.get("host", Config.host)
            below = _options(out, below, below_host)
        elif whole_file:
            below = None
        if "host_options" in layer or whole_file:
            out = {k: v for k, v in out.items() if "." not in k}
        out.update(layer)
    return _folded(out, below, below_host)


def _options(values: dict[str, Any], below: dict[str, Any] | None, below_host: str | None) -> dict[str, Any]:
    """The typed options of host `values["host"]` that `values` set so far (none when it sets none)."""
    host = values.get("host", Config.host)
    dotted = {k: v for k, v in values.items() if "." in k}
    if not dotted and "host_options" not in values and below is None:
        return {}
    text, below = _below(values.get("host_options", "{}"), below, below_host, host)
    return fold_options(host, text, dotted, dotted_typed=True, below=below)


def _below(text: str, below: dict[str, Any] | None, below_host: str | None, host: str):
    """(host_options text, options typed already) for `host`: options typed for another host are typed again
    against `host`, as text (they were given for a host the later layers replaced)."""
    if below is None or below_host == host:
        return text, below
    return dump_options({**below, **parse_options(text)}), None


def _folded(out: dict[str, Any], below: dict[str, Any] | None, below_host: str | None) -> dict[str, Any]:
    """`out` with its <host>.<option> keys folded into host_options (typed values, nothing coerced again)."""
    values = {k: v for k, v in out.items() if "." not in k}
    if len(values) == len(out) and "host_options" not in values and below is None:
        return values
    values["host_options"] = dump_options(_options(out, below, below_host))
    return values


def _given_once(overrides: dict[str, Any]) -> None:
    """A host option typed both inside host_options and as <host>.<option>: which one is meant is unclear."""
    if "host_options" not in overrides:
        return
    inside = parse_options(overrides["host_options"])
    for key, value in overrides.items():
        if "." in key and key.split(".", 1)[1] in inside:
            raise ConfigError(f"{key} is given twice: as {key}={value!r} and inside host_options "
                              f"({overrides['host_options']}); give it once")
