"""Config.validate's checks against the registries: the host and its options (check_host, first), then the dataset,
the host against it (Host.check_dataset) and the backbone (check_registries, last: they load torch, so a wrong value
of any other field is refused before torch loads). Config.validate is adbs/config/schema.py's.

The config is an argument: this module never imports the schema, so the schema imports it and no hook is filled in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adbs import light
from adbs.config.host_options import typed_options
from adbs.fields import ConfigError, check_choice, parse_options
from adbs.hosts import get_host, host_names, options_class

if TYPE_CHECKING:
    from adbs import backbones, data
    from adbs.config.schema import Config
else:  # imported where the check runs: the backbones and the datasets import torch and their sources (and get_host
    # below the host's torch module), which a config read for --help, a flag or a dry run's first checks does not need
    backbones = light.lazy("adbs.backbones")
    data = light.lazy("adbs.data")


def check_host(cfg: Config) -> None:
    """An unknown host or host option raises ConfigError listing the valid ones (the hosts' registry and their
    options: no torch)."""
    check_choice("host", cfg.host, host_names())
    options_class(cfg.host)(**typed_options(cfg.host, parse_options(cfg.host_options))).check(cfg)


def check_registries(cfg: Config) -> None:
    """An unknown dataset or backbone, or a dataset the host cannot take, raises ConfigError listing the valid
    ones; these registries load torch (Config.validate runs them last)."""
    not_found = data.DataError  # the datasets load here, not in the except clause (adbs/light.py: lazy)
    try:  # MODULE:NAME imports the module that registers dataset NAME (docs/datasets.md)
        dataset = data.import_dataset(cfg.dataset)
    except not_found as e:
        raise ConfigError(str(e)) from None
    if dataset not in data.DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {', '.join(data.DATASETS)}, or MODULE:NAME "
                          "for a dataset that MODULE registers (docs/datasets.md)")
    options = options_class(cfg.host)(**typed_options(cfg.host, parse_options(cfg.host_options)))
    get_host(cfg.host).check_dataset(options, data.DATASETS[dataset])  # e.g. OrCo's targets against the classes
    check_choice("backbone", cfg.backbone, tuple(backbones.BACKBONES))
