"""Search spaces as plain Python dicts keyed by Config field names.

A value in a space dict is one of
- a fixed value (int, float, str, bool, None, tuple): the same for every trial;
- a list: a grid axis (every value is run; grid studies use optuna's GridSampler);
- an `optuna.distributions` object (FloatDistribution, IntDistribution,
  CategoricalDistribution): sampled by Optuna (TPE by default).

Two lab-level axes are not Config fields: `ROW_KEY` picks a named row of overrides
(ablation rows that are not a Cartesian product) and `SEED_KEY` is the repetition seed
(sets Config.seed and Config.split_seed together: training seed and few-shot draw).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import optuna.distributions as od

from adbs.config import FIELDS, Config, ConfigError, coerce, from_dict
from adbs_lab.records import value_text
from adbs_lab.records.tune_keys import ROW_KEY, SEED_KEY

__all__ = ["is_grid", "is_dist", "split", "check", "optuna_distributions", "grid_points", "grid_size", "resolve_trial",
           "TrialMaker", "configs_to_check"]

def is_grid(v: Any) -> bool:
    return isinstance(v, list)


def is_dist(v: Any) -> bool:
    return isinstance(v, od.BaseDistribution)


def split(space: dict[str, Any]) -> tuple[dict, dict, dict]:
    """(fixed, grid axes, sampled distributions)."""
    fixed = {k: v for k, v in space.items() if not is_grid(v) and not is_dist(v)}
    grid = {k: v for k, v in space.items() if is_grid(v)}
    dists = {k: v for k, v in space.items() if is_dist(v)}
    return fixed, grid, dists


def check(space: dict[str, Any], *, source: str, rows: dict[str, dict] | None = None) -> None:
    """Every key must be a Config field and every value of the field's type (ConfigError otherwise)."""
    for key, value in space.items():
        if key == ROW_KEY:
            continue
        try:
            if key not in FIELDS:
                coerce(key, None)  # raises with the close matches and the valid keys
            if is_grid(value):
                if not value:
                    raise ConfigError(f"grid axis {key!r} is an empty list")
                _check_distinct(key, [coerce(key, v) for v in value])
            elif is_dist(value):
                if isinstance(value, od.CategoricalDistribution):
                    for v in value.choices:
                        coerce(key, v)
                else:
                    coerce(key, value.low)
                    coerce(key, value.high)
            else:
                coerce(key, value)
        except ConfigError as e:
            raise ConfigError(f"search space {source}: {e}") from None
    _, grid, dists = split(space)
    for name, overrides in (rows or {}).items():
        for key, value in overrides.items():
            try:
                coerce(key, value)
            except ConfigError as e:
                raise ConfigError(f"search space {source}, row {name!r}: {e}") from None
            if key in grid or key in dists:  # the row's value would replace every value the space gives it
                raise ConfigError(f"search space {source}, row {name!r} sets {key!r}, which the space "
                                  f"{'varies as a grid axis' if key in grid else 'samples'}: every point of the row "
                                  f"would run {key}={value!r} under the label of its own value; drop {key!r} from "
                                  "the row or from the space")


def _check_distinct(key: str, values: list[Any]) -> None:
    """Each value of a grid axis, as the trial's Config holds it, once: a value listed twice (0.1 and 0.1, or 16 and
    16.0 of a float field: adbs/config/coercion.py makes both 16.0) would be two configurations of one, each run over
    every seed, so one configuration would count each seed twice in its row and be compared with itself."""
    seen: dict[str, Any] = {}
    for v in values:
        t = value_text.text(v)  # one text per value: True and 1, None and "None" stay apart
        if t in seen:
            raise ConfigError(f"grid axis {key!r} lists {v!r} twice (as the config holds its values: "
                              f"{[value_text.text(x) for x in values]}); list each value once")
        seen[t] = v


def optuna_distributions(space: dict[str, Any]) -> dict[str, od.BaseDistribution]:
    """What Optuna samples: distributions as given, grid axes as categoricals. Never the seed: a seed repeats a
    configuration, it is not a setting to search (adbs_lab/search/searcher.py: StudySearch runs one Optuna trial per
    configuration over every seed and records the seeds as the trial's user attribute SEEDS_ATTR)."""
    _, grid, dists = split(space)
    out: dict[str, od.BaseDistribution] = dict(dists)
    for k, values in grid.items():
        out[k] = od.CategoricalDistribution(tuple(values))
    return out


def grid_points(space: dict[str, Any]) -> dict[str, list]:
    """The GridSampler search space: the grid axes (each point is a configuration, run over every seed)."""
    _, grid, _ = split(space)
    return {k: list(v) for k, v in grid.items()}


def grid_size(space: dict[str, Any], seeds: list[int] | None) -> int:
    """Trials of a grid: its configurations times the seeds (one, without seeds)."""
    n = 1
    for values in grid_points(space).values():
        n *= len(values)
    return n * max(1, len(seeds or []))


def resolve_trial(config: dict[str, Any], rows: dict[str, dict] | None = None) -> Config:
    """The full Config of one trial from Tune's trial config (Config fields + lab keys)."""
    d = {k: v for k, v in config.items() if k in FIELDS}
    if ROW_KEY in config and rows:
        d.update(rows[config[ROW_KEY]])
    if config.get(SEED_KEY) is not None:
        d["seed"] = d["split_seed"] = int(config[SEED_KEY])
    return from_dict(d)


@dataclass(frozen=True)
class TrialMaker:
    """The one maker of a trial's Config from its point: the preflight's checks (`configs_to_check`) and the searcher
    (adbs_lab/search/searcher.py: StudySearch.suggest) both call `config`. Small and picklable: Ray Tune pickles the
    searcher that holds it (tuner.pkl, searcher checkpoints)."""

    base: Config
    """The config every trial starts from (preset < study defaults < --config < --set, the space's fixed values)."""
    rows: dict[str, dict] | None = None
    """The study's named rows of overrides (ROW_KEY picks one), or None."""

    def config(self, point: dict[str, Any]) -> Config:
        """The full Config of the trial at `point` (Tune's trial config: Config fields + the lab keys of
        adbs_lab/records/tune_keys.py) over the base."""
        return resolve_trial({**self.base.to_dict(), **point}, self.rows)

    def param_space(self) -> dict[str, Any]:
        """The base as Ray Tune's param_space (plain values: lists, not tuples)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.base.to_dict().items()}


def configs_to_check(trial: TrialMaker, space: dict[str, Any], seeds: list[int] | None) -> list[Config]:
    """Every distinct config of a grid, or the extremes of a sampled space (validated before trials), each made by
    `trial.config`, as the searcher makes it."""
    rows = trial.rows
    _, grid, dists = split(space)
    axes: dict[str, list] = {k: list(v) for k, v in grid.items()}
    for k, d in dists.items():
        axes[k] = list(d.choices) if isinstance(d, od.CategoricalDistribution) else [d.low, d.high]
    if rows:
        axes[ROW_KEY] = list(rows)
    # split_seed changes the few-shot draw, so every seed is a distinct data config.
    axes[SEED_KEY] = list(seeds) if seeds else [None]
    out, seen = [], set()
    for combo in itertools.product(*axes.values()):
        cfg = trial.config(dict(zip(axes, combo)))
        key = repr(sorted(cfg.to_dict().items()))
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out
