"""What the preflight decided (adbs_lab/driver/preflight.py), handed to every later step of a study (claim,
launch, summarise), and `fail`: the one way a step refuses (a message and an exit code, 2 unless told)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NoReturn

from adbs.config import Config, ConfigError
from adbs.exits import REFUSED, Exit
from adbs_lab.stores import tracking_store
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder

__all__ = ["Prepared", "fail", "bad_input"]


@dataclass
class Prepared:
    """Everything decided before Ray starts."""

    plan: Plan
    opts: StudyOptions
    base: dict[str, Any]
    """The config every trial starts from (preset < study defaults < --set), before the searched fields."""
    configs: list[Config]
    """Every distinct configuration of a grid, or the extremes of a sampled space (already checked)."""
    space: dict[str, Any]
    """The search space with the row axis added."""
    is_grid: bool
    n_configs: int
    total: int
    varying: list[str]
    gpus_per_trial: float
    tracking_uri: str
    where: StudyFolder
    optuna_url: str
    fingerprint: str
    """What makes two runs the same study (study.json; --resume checks it)."""
    command: str
    """The command line, credentials cut out (study.json, the lock, MLflow)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """What the study is launched with (study.json; `claim` writes it for a new study, --resume reads it back)."""
    owned: tuple[str, ...] = ()
    """Keys of the --config file that the study sets itself (`study_owned`; `note_owned` names them)."""

    @property
    def folder(self) -> str:
        return self.where.folder

    @property
    def dir(self) -> Path:
        return self.where.local


def fail(msg: str, code: int = REFUSED) -> NoReturn:
    raise Exit(code, f"error: {msg}")


@contextmanager
def bad_input() -> Iterator[None]:
    """Bad input (flags, config, stores) ends the study with its message and exit code 2."""
    try:
        yield
    except (ConfigError, StudyInputError, tracking_store.TrackingError) as e:
        fail(str(e))

