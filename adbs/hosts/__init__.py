"""Host methods: the FSCIL methods ADBS is plugged into (docs/hosts.md), chosen by `Config.host`. This file is the
registry, and it loads no torch: the config package reads every host's options and presets through it for each flag,
so a refused flag answers before torch loads (tests/repo/test_light_imports.py); a host's torch code loads when a
trial asks for its class (get_host).

    host_names() -> tuple[str, ...]    the hosts: the modules of this package (baseline first), read from the folder
    options_class(name) -> type        the host's Options: adbs/hosts/<name>_options.py, or NoOptions
    host_presets(name) -> dict          the host's presets: PRESETS of adbs/hosts/<name>_options.py, or none
    get_host(name) -> type[Host]       its class, from adbs/hosts/<name>.py (imported then); an unknown name raises
                                       ConfigError listing the hosts
    create_host(cfg, data, rt) -> Host the host of cfg.host
    register_host(cls)                 class decorator of a host's class; a name taken raises
    HOSTS: dict[str, type[Host]]       the classes registered so far

The modules of this package:

    interface.py        what a host supplies and what the trainer hands it: Host, Head, Step, Phase (torch)
    <name>.py           a host, its method read top to bottom (baseline, savc, alice, orco)
    <name>_options.py   its options (a dataclass, a docstring per field, defaults, checks) and its presets; no torch

Adding a host: `adbs/hosts/<name>.py`, a `Host` subclass (adbs/hosts/interface.py) with `@register_host` and
`name = "<name>"`; with options or presets of its own, `adbs/hosts/<name>_options.py` beside it: its `Options`
dataclass and its `PRESETS` (`<name>_cpu` and the paper's datasets, which adbs/config/presets.py adds to PRESETS).
Nothing else changes: this registry finds both files by name. tests/adbs/hosts/test_every_host.py runs every
registered host through the whole pipeline, the cache and resume.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adbs.fields import ConfigError

if TYPE_CHECKING:  # annotations only: the interface loads torch, which this registry must not
    from adbs.config import Config
    from adbs.data import FSCILData
    from adbs.hosts.interface import Host
    from adbs.runtime import Runtime

OPTIONS_SUFFIX = "_options"
"""A module `<name>_options` of this package holds host <name>'s options and presets."""
NOT_HOSTS = ("interface",)
"""Modules of this package that are no host."""

HOSTS: dict[str, type[Host]] = {}

CONFIG_DEFAULT = object()
"""A host preset's value for a key whose value is Config's default, not the plain preset's (adbs/config/presets.py)."""


@dataclass
class NoOptions:
    """A host without options of its own."""

    def check(self, cfg: Config) -> None:
        """Range checks of the options (ConfigError); nothing to check here."""


@functools.cache
def _modules() -> frozenset[str]:
    """The module names of this package, read from the folder (nothing imported)."""
    return frozenset(info.name for info in pkgutil.iter_modules(__path__))


def _host_modules() -> tuple[str, ...]:
    return tuple(name for name in _modules()
                 if not name.startswith("_") and not name.endswith(OPTIONS_SUFFIX) and name not in NOT_HOSTS)


def register_host(cls: type[Host]) -> type[Host]:
    """Register `cls` under `cls.name`; a name registered twice, or the name of another module's host, raises
    ValueError."""
    if cls.name in HOSTS and HOSTS[cls.name] is not cls:
        raise ValueError(f"host {cls.name!r} is already registered (by {HOSTS[cls.name]!r})")
    if cls.name in _host_modules() and cls.__module__ != f"{__name__}.{cls.name}":
        raise ValueError(f"host {cls.name!r} is already registered (by adbs/hosts/{cls.name}.py)")
    HOSTS[cls.name] = cls
    return cls


def host_names() -> tuple[str, ...]:
    """The hosts (their modules, and any class registered at run time): the baseline first, then by name."""
    return tuple(sorted({*_host_modules(), *HOSTS}, key=lambda n: (n != "baseline", n)))


def _check_name(name: str) -> None:
    if name not in host_names():
        raise ConfigError(f"unknown host {name!r}; valid choices: {', '.join(host_names())}")


def _options_module(name: str) -> Any:
    """adbs/hosts/<name>_options.py, or None for a host without one."""
    _check_name(name)
    module = name + OPTIONS_SUFFIX
    return importlib.import_module(f"{__name__}.{module}") if module in _modules() else None


def options_class(name: str) -> type:
    """The dataclass of host `name`'s options (the Options of adbs/hosts/<name>_options.py), or NoOptions."""
    module = _options_module(name)
    return NoOptions if module is None else module.Options


def host_presets(name: str) -> dict[str, dict[str, Any]]:
    """The presets of host `name` (the PRESETS of adbs/hosts/<name>_options.py): {plain preset: values} makes preset
    `<name>_<plain>` (adbs/config/presets.py), the plain preset with this host and these values (Config fields and
    `<name>.<option>` keys); none without that module."""
    module = _options_module(name)
    return {} if module is None else module.PRESETS


def get_host(name: str) -> type[Host]:
    """The class of host `name`, its module (torch and all) imported on first use."""
    _check_name(name)
    if name not in HOSTS:
        importlib.import_module(f"{__name__}.{name}")
        if name not in HOSTS:
            raise ValueError(f"adbs/hosts/{name}.py registers no host named {name!r}: its class needs "
                             f"@register_host and name = {name!r}")
    return HOSTS[name]


def create_host(cfg: Config, data: FSCILData, rt: Runtime) -> Host:
    """The host `cfg.host` names, for this config, data and runtime."""
    return get_host(cfg.host)(cfg, data, rt)


__all__ = ["HOSTS", "CONFIG_DEFAULT", "NoOptions", "NOT_HOSTS", "OPTIONS_SUFFIX", "register_host", "host_names",
           "options_class", "host_presets", "get_host", "create_host"]
