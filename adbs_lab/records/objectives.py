"""What a search optimises: `--objectives NAME:max|min ...`, per-trial summary metrics with a direction.

Without the flag a study maximises `summary/val_avg_acc` (metrics_keys.OBJECTIVE), as it always did. One objective
is a single-objective search on that metric; two or more are a multi-objective search: Optuna's study gets one
direction per objective (TPE and the grid sampler handle several), it is told each configuration's mean over its
seeds of every objective (adbs_lab/search/searcher.py), and the result is a Pareto front (`front`): the configurations no other
configuration beats on every objective. The front goes to pareto.json and the table's `front` column, and
best_config.json is the front's point that is best on the first objective.

Only validation metrics and metrics of the trained model are objectives: test metrics, and the geometry measured
on test images, are reported, never searched (docs/protocols.md, "Validation, not test").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

from adbs_lab.records import metrics_keys as K

__all__ = ["Objective", "ObjectiveError", "CHOICES", "DEFAULT", "TAG", "parse", "effective", "texts", "PRUNERS", "PRUNED_ON",
           "no_pruning", "pruner_problem", "shadow_problem", "from_tag"]

CHOICES = (
    "val_avg_acc", "val_last_acc", "val_pd", "val_last_base_acc", "val_last_novel_acc", "val_mean_base_acc",
    "val_mean_novel_acc", "val_last_hmean", "d_cs", "base_mean_cos", "novel_nearest_base_cos",
    "boundary_base_mean", "boundary_novel_mean", "boundary_negative",
)
"""Per-trial summary metrics (summary/<name>, adbs/loops.py and adbs.metrics.base_novel_summary) a search may target:
validation accuracies and what the trained classifier's weights and boundaries say. Left out: every test_* metric,
the geometry of the test images (TEST_IMAGES), and bookkeeping (best_base_epoch, collapse_warning, base_reused,
wall_time_s), which describe how a trial ran, not how good its configuration is."""

TEST_IMAGES = ("novel_own_cos", "novel_best_base_cos", "novel_own_wins")
"""Summary metrics measured on the test images (adbs.metrics.novel_image_geometry): test data, never searched."""

DIRECTIONS = ("max", "min")
OptunaDirection = Literal["minimize", "maximize"]
"""A direction as optuna.create_study takes it."""
TAG = "adbs.objectives"
"""Parent-run tag: the objectives as a JSON list of NAME:max|min (studies/report.py redraws the front from it)."""


@dataclass(frozen=True)
class Objective:
    name: str
    """The summary metric without its prefix, e.g. val_last_novel_acc (a trials.parquet column)."""
    direction: str
    """max or min."""

    @property
    def key(self) -> str:
        """The metric as a trial reports it (summary/<name>)."""
        return K.SUMMARY + self.name

    @property
    def text(self) -> str:
        return f"{self.name}:{self.direction}"

    @property
    def optuna_direction(self) -> OptunaDirection:
        return "maximize" if self.direction == "max" else "minimize"


DEFAULT = (Objective(K.OBJECTIVE[len(K.SUMMARY):], K.MODE),)


class ObjectiveError(ValueError):
    """Bad --objectives; adbs_lab/driver/options.py raises it again as its StudyInputError (exit 2, before anything
    starts)."""


def _refuse(msg: str):
    raise ObjectiveError(msg)


def parse(given: Iterable[str]) -> tuple[Objective, ...]:
    """`--objectives` as typed, checked: NAME:max|min each, NAME one of CHOICES, no name twice; () for none given
    (the caller uses DEFAULT then: `effective`). ObjectiveError saying what was wrong and what is allowed."""
    out: list[Objective] = []
    for item in given:
        name, sep, direction = str(item).rpartition(":")
        if not sep or not name:
            _refuse(f"--objectives {item}: each objective is NAME:max or NAME:min, e.g. --objectives "
                    "val_last_base_acc:max val_last_novel_acc:max")
        if direction not in DIRECTIONS:
            _refuse(f"--objectives {item}: the direction is max or min, not {direction!r}")
        if name.startswith("test_") or name in TEST_IMAGES:
            twin = "val_" + name[len("test_"):] if name.startswith("test_") else None
            _refuse(f"--objectives {item}: {name} is measured on the test set, and test metrics never feed a search "
                    "(they are reported only)"
                    + (f"; search its validation twin, {twin}:{direction}" if twin in CHOICES else "")
                    + f"; valid objectives: {', '.join(CHOICES)}")
        if name not in CHOICES:
            _refuse(f"--objectives {item}: {name!r} is not a per-trial summary metric a search can target; valid "
                    f"objectives: {', '.join(CHOICES)}")
        if any(o.name == name for o in out):
            _refuse(f"--objectives names {name} twice; give each objective once")
        out.append(Objective(name, direction))
    return tuple(out)


def effective(given: Iterable[str]) -> tuple[Objective, ...]:
    """The objectives a study optimises: --objectives, or DEFAULT without it."""
    return parse(given) or DEFAULT


def texts(objectives: Sequence[Objective]) -> list[str]:
    return [o.text for o in objectives]


PRUNERS = ("auto", "median", "halving", "hyperband", "none")
"""The pruners a study may use (--pruner); adbs_lab/search/searcher.py makes them."""

PRUNED_ON = "val_avg_acc"
"""The one objective the pruner may stop trials for. The pruner sees base-session validation accuracy per base
epoch (adbs_lab/search/searcher.py: BaseEpochStopper; metrics_keys.BASE_PRUNE_VALUE), never an incremental session, so it
can only prune on an intermediate of the objective known before the sessions run: the base session's validation
accuracy is the first term of val_avg_acc (the mean over sessions 0..N, adbs/metrics.py), and of no other
objective (val_last_*, val_mean_* of sessions 1..N, the geometry, the boundaries), which it would rank on a metric
the study does not optimise."""


def no_pruning(given: Sequence[str]) -> bool:
    """Whether `--objectives` as typed (checked or not) rules pruning out: several objectives (Optuna prunes
    single-objective studies only), or one other than maximising PRUNED_ON (the pruner's base-session validation
    accuracy is an intermediate of that objective only)."""
    return len(given) > 1 or (len(given) == 1 and str(given[0]) != f"{PRUNED_ON}:max")


def pruner_problem(given: Sequence[str], pruner: str) -> str | None:
    """Why `--pruner` cannot go with `--objectives`, or None."""
    if pruner == "none" or not no_pruning(given):
        return None
    if len(given) > 1:
        return (f"--pruner {pruner} with {len(given)} --objectives: Optuna prunes single-objective studies only; drop "
                "--pruner (a multi-objective study runs every trial to the end) or give one objective")
    if str(given[0]).endswith(":min"):
        return (f"--pruner {pruner} with --objectives {given[0]}: the pruner stops trials whose base-session "
                "validation accuracy lags, ranked in the study's direction, so with an objective to minimise it would "
                "stop the best ones; drop --pruner, or maximise")
    return (f"--pruner {pruner} with --objectives {given[0]}: the pruner stops trials whose base-session validation "
            f"accuracy lags, and that accuracy is part of {PRUNED_ON} only, not of {str(given[0]).rpartition(':')[0]}, "
            f"so it would stop trials on a metric the study does not optimise; drop --pruner (every trial then runs "
            f"to the end), or search {PRUNED_ON}:max")


def shadow_problem(pruner: str, share: float, typed: bool) -> str | None:
    """Why a typed `--shadow-share` cannot go with `pruner`, or None: the share is of the trials the pruner stops
    (adbs_lab/search/shadows.py), so with no pruner (none: given, the study's default, or set by --objectives) it
    would change nothing, said or not."""
    if pruner != "none" or not typed:
        return None
    return (f"--shadow-share {share:g}: this run prunes no trial (--pruner none: given, the study's default, or set by "
            "--objectives), and the share is of the trials the pruner stops, which run on to the end as shadows; drop "
            "--shadow-share, or pass --pruner auto (or median, halving, hyperband) where the study takes a pruner")


def from_tag(tags: dict[str, str]) -> tuple[Objective, ...]:
    """The objectives a study's parent run recorded (TAG); DEFAULT for a run from before the tag existed."""
    raw = tags.get(TAG)
    if not raw:
        return DEFAULT
    try:
        return parse(json.loads(raw)) or DEFAULT
    except Exception:  # noqa: BLE001 - a tag this version cannot read: the study's default objective
        return DEFAULT
