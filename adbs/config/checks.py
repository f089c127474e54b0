"""Config.validate's checks against the registries: the dataset, the host and its options (against the dataset
too: Host.check_dataset), the backbone. Config.validate (adbs/config/schema.py) runs them first.

The config is an argument: this module never imports the schema, so the schema imports it and no hook is filled in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adbs.config.host_options import typed_options
from adbs.fields import ConfigError, check_choice, parse_options
from adbs.hosts import get_host, host_names, options_class

if TYPE_CHECKING:
    from adbs.config.schema import Config


def check_registries(cfg: Config) -> None:
    """An unknown dataset, host, host option or backbone raises ConfigError listing the valid ones."""
    # Imported here, where the check runs: the backbones and the datasets import torch and their sources (and
    # get_host below the host's torch module), which a config read for --help, a flag or a dry run's first checks
    # does not need.
    from adbs.backbones import BACKBONES
    from adbs.data import DATASETS, DataError, import_dataset

    try:  # MODULE:NAME imports the module that registers dataset NAME (docs/datasets.md)
        dataset = import_dataset(cfg.dataset)
    except DataError as e:
        raise ConfigError(str(e)) from None
    if dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {', '.join(DATASETS)}, or MODULE:NAME for "
                          "a dataset that MODULE registers (docs/datasets.md)")
    check_choice("host", cfg.host, host_names())
    options = options_class(cfg.host)(**typed_options(cfg.host, parse_options(cfg.host_options)))
    options.check(cfg)
    get_host(cfg.host).check_dataset(options, DATASETS[dataset])  # e.g. OrCo's targets against the classes
    check_choice("backbone", cfg.backbone, tuple(BACKBONES))
