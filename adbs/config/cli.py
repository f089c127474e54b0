"""One command-line grammar for config values, shared by `python -m adbs.run` and every study (adbs_lab/driver/options.py).

Every Config field is a flag (`--base-epochs 3`), and every host option too (`--savc.queue-size 512`), generated
here from the dataclasses and their docstrings (adbs/config/docs.py). `--set KEY=VALUE` says the same for any key
(`--set base_epochs=3` is `--base-epochs 3`). The flags that pick a config (--preset, --config, --host, --dataset,
--data-root, --set, --dry-run) are defined here once, so a flag means the same in both entry points and has one
help text. Values stay strings as typed; adbs.config.precedence.resolve checks and types each one once (unknown keys and
wrong types raise ConfigError naming the valid choices), the same way for both.

The order: --host, --dataset and --data-root first, then --set and the field flags in the order typed (a later
value of a key wins); on top of the --config file, on top of the preset (adbs.config.precedence.resolve).

Why argparse and this generator rather than tyro or simple-parsing: the host options are dotted flags
collected from a registry (adbs/hosts/), the renamed fields keep their old flags, the studies add their own
argparse flags to the same parser, and every value goes through one coercion (adbs/config/values.py) whose errors
name the valid choices; a library would parse the values itself first, with other messages, and be one more
dependency for the code that remains ours.
"""

from __future__ import annotations

import argparse
import typing
from typing import TYPE_CHECKING, Any

from adbs import light
from adbs.config.coercion import field_types
from adbs.config.docs import field_doc
from adbs.config.host_options import option_keys
from adbs.config.presets import PRESETS
from adbs.config.schema import FIELDS, Config
from adbs.config.values import RENAMED
from adbs.fields import ConfigError
from adbs.hosts import host_names, options_class

if TYPE_CHECKING:
    from adbs import data
else:
    data = light.lazy("adbs.data")  # the datasets' registry imports torch: loaded only where a --dataset is checked

_HINTS = field_types(Config)

PICKS = ("host", "dataset", "data_root")
"""Config fields whose flag also picks the preset's version (adbs.config.precedence.resolve), applied before --set."""
NOTES = {
    "host": "With it, --preset P means that host's version of P (--host savc --preset cifar100 = savc_cifar100); "
            "its options are the --<host>.<option> flags.",
    "dataset": "With the default preset, a dataset that has a paper preset picks it (--dataset cifar100 = the "
               "paper's CIFAR100 settings).",
}
USAGE = "[--preset NAME] [--config FILE] [--set KEY=VALUE] [--<field> VALUE] [--<host>.<option> VALUE] [--dry-run]"
"""The usage line's part for these flags (argparse's own would list every field and host option)."""
SHARED = ("preset", "config", "overrides", *PICKS, "dry_run")
"""What add_shared_flags puts in the namespace: the dests `python -m adbs.run` and the studies share."""


def add_shared_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--preset, --config, --set, --host, --dataset, --data-root, --dry-run: one definition, one help text."""
    p.add_argument("--preset", default="cpu", type=_preset, metavar="NAME",
                   help=f"named preset ({', '.join(PRESETS)}); with --host, that host's version of it (e.g. --host "
                        "savc --preset cifar100 = savc_cifar100); --dataset NAME with the default preset picks the "
                        "paper preset of that name; every flag below overrides it [default: cpu]")
    p.add_argument("--config", metavar="FILE", default=None, action=_Once,
                   help="one YAML or JSON file of config values: Config fields and <host>.<option> keys (a host's options "
                        "may also nest under its name); a study's best_config.json as written reruns its best configuration "
                        "(add --seed N --split-seed N for its seed N). "
                        "Precedence: preset < this file < --host/--dataset/--data-root/--set and the field flags; a "
                        "study keeps the keys it searches or takes from --seeds")
    p.add_argument("--set", dest="overrides", action=_Pair, default=[], metavar="KEY=VALUE",
                   help="set any Config field or host option <host>.<option>, repeatable; the same as its flag "
                        "(--set base_epochs=20 is --base-epochs 20); a later value of a key wins")
    for name in PICKS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, default=None, metavar=_metavar(_HINTS[name]),
                       type=_NOT_EMPTY.get(name, str), help=_help(name, FIELDS[name].default, NOTES.get(name, "")))
    p.add_argument("--dry-run", action="store_true",
                   help="check every input as a run would (flags, config, device, data, where results go; a study "
                        "also its search space and storage), print what would run, and exit: nothing is trained or "
                        "written")


def add_field_flags(p: argparse.ArgumentParser, title: str) -> None:
    """A flag per Config field (but PICKS) in group `title`, then a group of flags per host's options.

    Each one appends (key, value as typed) to `overrides`, as --set KEY=VALUE does; tuple fields take several
    values (`--milestones 60 80`), kept as one comma-separated string."""
    g = p.add_argument_group(title)
    for name, f in FIELDS.items():
        if name not in PICKS:
            g.add_argument("--" + name.replace("_", "-"), **_pair_kwargs(name, _HINTS[name], f.default))
    for old in RENAMED:  # the old names of renamed fields keep working, unlisted
        g.add_argument("--" + old.replace("_", "-"), dest="overrides", action=_Pair, key=old, default=[],
                       help=argparse.SUPPRESS)
    hints = {f"{h}.{k}": tp for h in host_names() for k, tp in typing.get_type_hints(options_class(h)).items()}
    groups: dict[str, argparse._ArgumentGroup] = {}
    for key, f in option_keys().items():
        host, option = key.split(".", 1)
        if host not in groups:
            groups[host] = p.add_argument_group(f"options of host {host} (with --host {host}; adbs/hosts/{host}_options.py)")
        groups[host].add_argument(f"--{host}.{option.replace('_', '-')}", **_pair_kwargs(key, hints[key], f.default))


def _pair_kwargs(key: str, tp: Any, default: Any) -> dict[str, Any]:
    many = typing.get_origin(tp) is tuple
    return dict(dest="overrides", action=_Pair, key=key, default=[], nargs="+" if many else None,
                metavar=("EPOCH" if key == "milestones" else "VALUE") if many else _metavar(tp),
                help=_help(key, default))


class _Once(argparse.Action):
    """--config given twice: refused rather than the first file silently dropped (one file is the whole layer
    between the preset and the flags; to combine two, merge them into one file)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        if before is not None:
            raise argparse.ArgumentError(self, f"given twice ({before}, {values}); give one file (to combine two, "
                                               "merge them into one; flags and --set add values on top of it)")
        setattr(namespace, self.dest, values)


def _not_empty(name: str, valid) -> Any:
    def check(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"an empty {name} names none; valid {name}s: {', '.join(valid())} "
                                             f"(drop --{name} for the default, {FIELDS[name].default})")
        return value
    return check


def _dataset_names() -> list[str]:
    return list(data.DATASETS)


_NOT_EMPTY = {"host": _not_empty("host", host_names), "dataset": _not_empty("dataset", _dataset_names)}
"""--host "" once meant the default host in silence (an empty value reads as not given)."""


class _Pair(argparse.Action):
    """Appends (key, value) to namespace.overrides in the order typed: `key` for a field flag, KEY=VALUE for --set."""

    def __init__(self, *args: Any, key: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.key = key

    def __call__(self, parser, namespace, values, option_string=None):
        if self.key is None:
            key, eq, value = values.partition("=")
            if not eq or not key.strip():
                raise argparse.ArgumentError(self, f"expects KEY=VALUE, got {values!r} (e.g. --set base_epochs=20)")
            pair = (key.strip(), value.strip())
        else:
            pair = (self.key, ",".join(values) if isinstance(values, list) else values)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), pair])


def check_pairs(pairs: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> None:
    """An old flag name beside the new one (--abs-margin with --abs-boundary): which one is meant? Raises."""
    keys = {k for k, _ in pairs}
    for old, new in RENAMED.items():
        if old in keys and new in keys:
            raise ConfigError(f"--{old.replace('_', '-')} is the old name of --{new.replace('_', '-')}; "
                              f"give only --{new.replace('_', '-')}")


def config_overrides(picks: dict[str, str | None], pairs) -> dict[str, Any]:
    """--host, --dataset, --data-root (those given), then --set and the field flags in order: one dict, later wins,
    for adbs.config.precedence.resolve."""
    out = {k: v for k, v in picks.items() if v}
    out.update(dict(pairs))
    return out


def overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The typed config values of a parsed command line (add_shared_flags + add_field_flags): config_overrides."""
    check_pairs(ns.overrides)
    return config_overrides({k: getattr(ns, k) for k in PICKS}, ns.overrides)


def _preset(name: str) -> str:
    if name not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return name


def _help(key: str, default: Any, note: str = "") -> str:
    """A field's docstring, a note, and its default (and the default preset's value where that preset changes it:
    what a bare run uses)."""
    text = f"[default: {default!r}"
    if key in PRESETS["cpu"] and PRESETS["cpu"][key] != default:
        text += f"; the default preset cpu sets {PRESETS['cpu'][key]!r}"
    return " ".join(filter(None, (field_doc(key), note, text + "]"))).replace("%", "%%")


def _metavar(tp: Any) -> str:
    """INT, FLOAT, STR | NONE, ... of a field's type (its Base/NotBase marker left out)."""
    return (tp.__name__ if isinstance(tp, type) else str(tp)).upper()
