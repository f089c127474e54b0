"""What the preflight decided (adbs_lab/driver/preflight.py), handed to every later step of a study (claim,
launch, summarise): the study (`Study`) and where and how this run of it goes (`RunSettings`); `resume_command`
and `more_seeds_command`, the commands that continue it; and `fail`: the one way a step refuses (a message and an
exit code, 2 unless told)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn

from adbs.redaction import redact
from adbs.config import Config, ConfigError
from adbs_lab.records.objectives import Objective
from adbs_lab.results import best
from adbs_lab.search.space import TrialMaker
from adbs_lab.search.seeds.policy import SeedPolicy
from adbs_lab.stats.policy import VerdictPolicy
from adbs.exits import REFUSED, Exit
from adbs_lab.stores import paths, tracking_store
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder

__all__ = ["Study", "RunSettings", "fail", "bad_input", "resume_command", "more_seeds_command"]


@dataclass(frozen=True)
class RunSettings:
    """Where and how this run of the study goes, apart from what the study is (`Study`): its stores, resources,
    cluster, failures and the command line. Built once by the preflight from the options (`of`); every later step
    reads them here, never from the options."""

    resume: bool = False
    """This run continues the study (--resume, or --more-seeds)."""
    more_seeds: bool = False
    """--more-seeds: a finished study taken on to its next pause (adbs_lab/driver/more_seeds.py)."""
    dry_run: bool = False
    """--dry-run: check everything and print what would run; start and write nothing."""
    storage: str = str(paths.DEFAULT_STORAGE)
    """--storage: the folder or object-store URL of the results, checkpoints and base-session cache."""
    optuna_storage: str | None = None
    """--optuna-storage as given (None: the study's own optuna.db, Study.optuna_url)."""
    address: str | None = None
    """--address: the Ray cluster to join (None: start a local one)."""
    cache: bool = True
    """Reuse an identical base session from <storage>/base_cache (--no-cache: train each one)."""
    checkpoint_every: int = 5
    """--checkpoint-every: base epochs between trial checkpoints."""
    max_concurrent: int | None = None
    """--max-concurrent as given (None: as many trials as the resources fit)."""
    max_failures: int = 2
    """--max-failures: restarts of a trial whose process dies."""
    cpus_per_trial: float | None = None
    """--cpus-per-trial as given (None: decided in launch from the cluster)."""
    gpus_per_trial: float | None = None
    """--gpus-per-trial as given (None: packing decides on a GPU cluster; Study.gpus_per_trial is the number)."""
    shadow_share: float = 0.2
    """--shadow-share: the share of pruned trials that run on to the end, unseen by the pruner."""
    reference: str | None = None
    """--reference as typed (None: not given), as study.json records it; the study's resolved reference is
    Study.reference."""
    name: str | None = None
    """--name: the suffix of the study's folder and MLflow parent run."""
    config_file: str | None = None
    """--config FILE as given (for messages; its values are in the study's base)."""
    argv: tuple[str, ...] = ()
    """The command line as typed (the logged command, --resume's advice)."""
    continue_argv: tuple[str, ...] | None = None
    """The command that continues this study when another command runs it as a part (studies/paper.py); None: its
    own command with --resume."""

    @classmethod
    def of(cls, opts: StudyOptions) -> "RunSettings":
        """The run's settings off the options: each field is the option of its name."""
        return cls(**{f.name: getattr(opts, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Study:
    """The study, typed once: everything the preflight (adbs_lab/driver/preflight.py) decided before Ray starts. Every
    later step (claim, launch, the tracker, the progress line, summarise, --resume's checks) reads the study's facts
    here, never again from the raw options."""

    plan: Plan
    """The study's plan (adbs_lab/driver/plan.py): its name, space, rows, trial function."""
    run: RunSettings
    """Where and how this run of the study goes (stores, resources, --resume, the command line)."""
    smoke: bool
    """A --smoke run: the smoke preset and a tiny study, its results apart from the study's own (paths.SMOKE)."""
    preset: str
    """The preset in effect (smoke with --smoke, a dataset's paper preset for --dataset NAME, else --preset)."""
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
    notes: tuple[str, ...] = ()
    """What this run changes from the study's defaults, as its notes say (adbs_lab/results/notes.py: lines): the
    start line, the MLflow tag, the summary and the dry run print them."""
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
    def experiment(self) -> str:
        """The MLflow experiment of this run: the study's name, `<study>-smoke` with --smoke (paths.SMOKE)."""
        return self.plan.name + (paths.SMOKE if self.smoke else "")

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


def resume_command(run: RunSettings, python: Callable[[], str] = lambda: sys.executable) -> list[str]:
    """The command that continues this study, as printed: its own with --resume, or, for a part of a composition,
    the composition's (`continue_argv`), so a part and its composition give one advice. A URL's password shows as
    *** (adbs/redaction.py), to be typed again or kept out of the URL (~/.pgpass, PGPASSWORD)."""
    if run.continue_argv is not None:
        return [python(), *[redact(a) for a in run.continue_argv]]
    argv = [redact(a) for a in run.argv]
    return [python(), *argv] + ([] if "--resume" in argv else ["--resume"])


def more_seeds_command(run: RunSettings, python: Callable[[], str] = lambda: sys.executable) -> list[str]:
    """The command that continues this finished study to its next pause, as printed: its own, without --resume or
    --more-seeds, with --more-seeds (a URL's password shows as ***, as in `resume_command`)."""
    argv = [redact(a) for a in run.argv if a not in ("--resume", "--more-seeds")]
    return [python(), *argv, "--more-seeds"]
