"""Config.validate's checks against the registries: the dataset, the host and its options (against the dataset
too: Host.check_dataset), the backbone.

They live here, not in adbs/config.py, because each registry imports Config; importing this module (the
package adbs does) adds them to config.Late.checks, which Config.validate runs first.
"""

from __future__ import annotations

from adbs.config import Config, ConfigError, Late, check_choice
from adbs.host_options import typed_options
from adbs.hosts import get_host, host_names
from adbs.options_json import parse_options


def check_registries(cfg: Config) -> None:
    """An unknown dataset, host, host option or backbone raises ConfigError listing the valid ones."""
    from adbs.backbones import BACKBONES  # late imports: backbones and datasets import torch and their sources
    from adbs.data import DATASETS, DataError, import_dataset

    try:  # MODULE:NAME imports the module that registers dataset NAME (docs/datasets.md)
        dataset = import_dataset(cfg.dataset)
    except DataError as e:
        raise ConfigError(str(e)) from None
    if dataset not in DATASETS:
        raise ConfigError(f"unknown dataset {dataset!r}; valid choices: {', '.join(DATASETS)}, or MODULE:NAME for "
                          "a dataset that MODULE registers (docs/datasets.md)")
    check_choice("host", cfg.host, host_names())
    options = get_host(cfg.host).Options(**typed_options(cfg.host, parse_options(cfg.host_options)))
    options.check(cfg)
    get_host(cfg.host).check_dataset(options, DATASETS[dataset])  # e.g. OrCo's targets against the classes
    check_choice("backbone", cfg.backbone, tuple(BACKBONES))


if check_registries not in Late.checks:
    Late.checks.append(check_registries)
