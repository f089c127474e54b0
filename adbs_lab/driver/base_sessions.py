"""The base sessions a study's trials will train, told before they start: a trial whose base session the
content-keyed cache already holds (adbs/cache.py: base_key), or that another trial of the study trains first, loads
it and runs only its incremental sessions. The start line's estimate (adbs_lab/driver/launch.py: estimate_text) and
the first base epoch's estimate (adbs_lab/driver/progress.py) count those trials apart: "~57 min of base sessions in
all" with two left to train had ended 11 min later, and 22 of a k-shot grid's 24 trials loaded theirs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adbs.config import Config
    from adbs_lab.driver.prepared import Study
    from adbs_lab.search.space import TrialMaker

__all__ = ["BaseSessions", "count", "keys"]


@dataclass(frozen=True)
class BaseSessions:
    """What the trials of a study hold of base sessions, counted before they start."""

    trials: int
    """The trials counted: a grid's configurations times its seeds."""
    to_train: int
    """The distinct base sessions among them that the cache does not hold: the trials that train one."""

    @property
    def reusing(self) -> int:
        """The trials that load their base session (from the cache, or after the trial of the study that trains it)."""
        return self.trials - self.to_train


def keys(configs: list[Config], kind: str) -> list[str]:
    """The base-session key of each trial config on a device of `kind`, as the trial computes it (adbs/trial.py)."""
    from adbs.cache import base_key

    return [base_key(cfg, kind) for cfg in configs]


def count(p: Study, trial: TrialMaker) -> BaseSessions | None:
    """The base sessions the study's trials will train (`trial`: the maker of their configs, threads set:
    adbs_lab/driver/launch.py: trial_maker), or None where that cannot be told before they start: a sampled space
    (its points are drawn as the study goes), seeds that follow the looks (--seeds auto, a race: how many seeds is
    decided as it goes), --resume (some trials ended already) or a device that is not this machine's CPU (a GPU
    study's estimate follows its first base epoch). Without the cache (--no-cache) every trial trains its own."""
    seeds = getattr(p.seeding, "seeds", None)
    if not getattr(p, "is_grid", False) or seeds is None or p.run.resume:
        return None
    from adbs_lab.search import space as sp

    configs = sp.configs_to_check(trial, p.space, list(seeds))
    if any(c.device == "cuda" for c in configs) or (configs and _kind(configs[0]) != "cpu"):
        return None
    if not p.run.cache:
        return BaseSessions(len(configs), len(configs))
    from adbs.cache import BaseCache

    where, distinct = p.where.cache_location, set(keys(configs, "cpu"))
    if not p.where.remote and not os.path.isdir(where):  # no study trained one here yet: none held
        return BaseSessions(len(configs), len(distinct))
    cache = BaseCache(where)
    return BaseSessions(len(configs), sum(not cache.holds(k) for k in distinct))


def _kind(cfg: Config) -> str:
    from adbs.runtime import resolve_device

    return resolve_device(cfg).type
