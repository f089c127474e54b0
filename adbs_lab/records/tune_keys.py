"""The keys of a Ray Tune trial's config that the searcher writes and the trainable, the tracker and the tables read:
the contract between them. Two lab-level axes are not Config fields: `ROW_KEY` picks a named row of overrides
(ablation rows that are not a Cartesian product) and `SEED_KEY` is the repetition seed (sets Config.seed and
Config.split_seed together: training seed and few-shot draw)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adbs_lab.records.value_text import label

if TYPE_CHECKING:
    from adbs.config import Config

__all__ = ["ROW_KEY", "SEED_KEY", "LAB_KEYS", "SEEDS_ATTR", "SEEDS_DONE_ATTR", "SEEDS_MEAN_ATTR", "seed_attr", "RACE_OF",
           "CONFIG_KEY", "trial_config", "describe"]

ROW_KEY = "row"
SEED_KEY = "trial_seed"
LAB_KEYS = (ROW_KEY, SEED_KEY)
SEEDS_ATTR = "seeds"
"""Optuna user attribute of a trial: the seeds its configuration runs over (its value is the mean over them)."""
SEEDS_DONE_ATTR = "seeds_done"
"""Optuna user attribute of a RUNNING trial: how many of its seeds have ended (adbs_lab/search/searcher.py:
StudySearch._show_seed), so a grid's row shows its progress before it has a value."""
SEEDS_MEAN_ATTR = "seeds_mean"
"""Optuna user attribute of a RUNNING trial: the mean over its seeds that completed so far, per objective (one number
for one objective; None while none completed). When the trial is told with every seed complete, it is the value
Optuna is told."""


def seed_attr(seed: int) -> str:
    """The Optuna user attribute of a trial holding seed `seed`'s value once that seed's Tune trial ended (its
    objective's value, a list of them for several objectives, or the state it ended in where it did not complete)."""
    return f"seed:{seed}"


RACE_OF = "race_of"
"""The user attribute of a race's Optuna trial, and the key of its Tune trials' config: the number of the screening
trial whose configuration it races (adbs_lab/search/seeds/race.py; the searcher's stopper never prunes such a trial:
its seed is a paired value)."""
CONFIG_KEY = "adbs_config"
"""Tune trial-config key holding the trial's resolved Config (adbs_lab/search/searcher.py: StudySearch.suggest puts it
there, once per trial); the trainable, the tracker and the tables read it (`trial_config`)."""


def trial_config(config: dict[str, Any]) -> Config:
    """The Config of one Tune trial, as the driver resolved it (CONFIG_KEY)."""
    return config[CONFIG_KEY]


def describe(config: dict[str, Any], varying: list[str]) -> str:
    """Run name that says what differs between trials, e.g. `alpha=0.05 seed=2`; a value as value_text.label
    writes it (`base_images_per_class=None`, `alpha=0.012345678` where 0.01235 would be another value's too)."""
    parts = []
    for k in varying:
        if k not in config:
            continue
        v = config[k]
        if k == ROW_KEY:
            parts.append(str(v))
        elif k == SEED_KEY:
            parts.append(f"seed={v}")
        else:  # the label is the row's identity in every table (adbs_lab/results/tables.py groups by it)
            parts.append(f"{k}={label(v)}")
    return " ".join(parts) or "trial"
