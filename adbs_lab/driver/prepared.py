"""What the preflight decided (adbs_lab/driver/preflight.py), handed to every later step of a study (claim,
launch, summarise), and `fail`: the one way a step refuses (a message and an exit code, 2 unless told)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NoReturn

from adbs.config import Config, ConfigError
from adbs_lab.records.objectives import Objective
from adbs_lab.results import best
from adbs_lab.search.space import TrialMaker
from adbs_lab.search.seeds.policy import SeedPolicy
from adbs_lab.stats.policy import VerdictPolicy
from adbs.exits import REFUSED, Exit
from adbs_lab.stores import tracking_store
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder

__all__ = ["Prepared", "fail", "bad_input"]


@dataclass(frozen=True)
class Prepared:
    """The study, typed once: everything the preflight (adbs_lab/driver/preflight.py) decided before Ray starts. Every
    later step (claim, launch, the tracker, the progress line, summarise, --resume's checks) reads the study's facts
    here, never again from the raw options."""

    plan: Plan
    """The study's plan (adbs_lab/driver/plan.py): its name, space, rows, trial function."""
    opts: StudyOptions
    """The options as parsed, for what this object does not hold (stores, resources, flags of the run itself)."""
    base: Config
    """The config every trial starts from (preset < study defaults < --set, the space's fixed values)."""
    base_values: dict[str, Any]
    """The keys of `base` the study, its preset or the user set (study.json's fingerprint, the parent run's base.*
    params, the study's notes)."""
    trial: TrialMaker
    """The one maker of a trial's Config from its point (adbs_lab/search/space.py: TrialMaker)."""
    objectives: tuple[Objective, ...]
    """What the search optimises, parsed from --objectives (the default objective when none is given)."""
    sampler: str
    """Optuna's sampler: GridSampler for a grid (rows included), else TrialSeededTPE (TPE, each trial's draws seeded
    from its number: adbs_lab/search/samplers.py)."""
    sampler_seed: int
    """The seed of the sampler (--sampler-seed)."""
    pruner: str
    """The pruner (--pruner, or the study's default for these objectives)."""
    threads: int | None
    """The trials' torch threads as the base sets them (None: from the trial's CPUs, decided in launch)."""
    seeding: SeedPolicy
    """Which seeds each configuration runs (adbs_lab/search/seeds/): a fixed list (--seeds), --seeds auto's looks
    over a grid's rows, or the race of a sampled search's best."""
    rows: dict[str, dict] | None
    """The study's named rows of overrides, or None."""
    fixed: dict[str, Any]
    """What the search space fixes."""
    grid: dict[str, list]
    """The grid axes of the search space."""
    dists: dict[str, Any]
    """The sampled distributions of the search space."""
    configs: list[Config]
    """Every distinct configuration of a grid, or the extremes of a sampled space (already checked)."""
    space: dict[str, Any]
    """The search space with the row axis added."""
    is_grid: bool
    """Whether the study runs a grid (grid axes or rows) rather than sampling."""
    n_configs: int
    """Configurations the study runs."""
    total: int
    """Trials the study runs: configurations x seeds."""
    varying: list[str]
    """What differs between trials: the row axis, the grid axes, the distributions, the seed."""
    gpus_per_trial: float
    """--gpus-per-trial as checked (0 when not given: launch decides from the cluster)."""
    tracking_uri: str
    """The MLflow store."""
    where: StudyFolder
    """The study's folder in --storage."""
    optuna_url: str
    """The Optuna storage (the study's own optuna.db unless --optuna-storage)."""
    fingerprint: str
    """What makes two runs the same study (study.json; --resume checks it)."""
    command: str
    """The command line, credentials cut out (study.json, the lock, MLflow)."""
    reference: str | dict[str, str] | None = None
    """The row every row is compared with, or {row: its reference} (--reference, else the study's own: the plan's
    baseline, or the preset's value of its reference axis)."""
    verdicts: VerdictPolicy = VerdictPolicy()
    """The verdict policy (adbs_lab/stats/policy.py): the table's comparisons, (row, the row it is compared with), each
    given a verdict (adbs_lab/results/comparisons.py: family), α, δ (--resolve) and the looks that share α (--seeds
    auto's, or a race's)."""
    row_labels: tuple[str, ...] = ()
    """The labels of a grid's rows as the table names them (none for a sampled space)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """What the study is launched with (study.json; `claim` writes it for a new study, --resume reads it back)."""
    owned: tuple[str, ...] = ()
    """Keys of the --config file that the study sets itself (adbs_lab/driver/flags.py: study_owned; `note_owned`
    names them)."""

    @property
    def conditions(self) -> tuple[str, ...]:
        """The plan's data conditions this run varies (one cell of kshot_grid varies none: its best is within it)."""
        return tuple(c for c in self.plan.conditions if c in self.varying)

    @property
    def no_best(self) -> str | None:
        """Why the study names no best configuration (adbs_lab/results/best.py: withheld), None where it names one."""
        return best.withheld(self.plan.name, conditions=self.conditions,
                             verdicts=bool(self.verdicts.pairs) or self.seeding.chooses)

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

