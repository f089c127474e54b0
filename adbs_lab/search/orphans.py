"""The Optuna trials a killed driver left behind, taken back by the resumed study's searcher.

Ray Tune saves its state (its trials, the searcher) every few seconds and when a trial ends; the Optuna storage is
written at once. A driver killed between the two leaves trials in the storage that the restored searcher never asked
for: RUNNING ones (asked for, their Tune trials unsaved) and told ones (COMPLETE, PRUNED or FAIL: their seeds ran and
the searcher told Optuna their value, and Tune's record of those runs was lost with the driver). Each is a sample of
the study, and the restored searcher adopts it as its own (StudySearch._adopt_orphans: its parameters, its user
attributes `seeds` and `race_of`, its state), so Tune runs its seeds again under its own number and Optuna gets no
new trial for it: the storage then holds one trial per configuration the study ran, as the study's table does, and
the dashboard counts what the study counts.

Why adopt and run again, not the alternatives:
- putting a RUNNING trial back to WAITING, for the next `ask` to take, reaches only RUNNING ones (Optuna never
  changes a finished trial), and a waiting race trial would be taken as a screening sample;
- adopting a told trial without running it keeps Optuna's value but leaves the study's table without its seeds;
- running it again costs its trials once more (they are deterministic on a CPU: the same value as told; on a GPU the
  told value stays, as Optuna does not change a finished trial, and the table holds the rerun's).
The sampler is the other half: its random stream was saved with the searcher, before these trials' draws
(adbs_lab/search/samplers.py: TrialSeededTPE has none; `draw_afresh` for a sampler that has one).
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from adbs_lab.records.tune_keys import RACE_OF, SEEDS_ATTR
from adbs_lab.search.samplers import TrialSeededTPE
from adbs_lab.search.seeds.policy import SeedPolicy

__all__ = ["RERUN", "left_behind", "group", "draw_afresh"]

RERUN = "rerun"
"""Mark of an adopted trial without a seed list, which StudySearch.suggest hands out once."""

_ASKED = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
"""States of a trial some searcher asked for: WAITING ones are enqueued, not yet asked."""


def left_behind(storage: optuna.storages.BaseStorage, study_name: str, known: set[int]) -> list[FrozenTrial]:
    """The trials of study `study_name` asked for (RUNNING or finished) whose numbers `known` (the restored
    searcher's) lacks, by number; none when the storage holds no such study (nothing ran)."""
    try:
        study_id = storage.get_study_id_from_name(study_name)
    except KeyError:
        return []
    return sorted((t for t in storage.get_all_trials(study_id, deepcopy=False, states=_ASKED) if t.number not in known),
                  key=lambda t: t.number)


def group(trial: FrozenTrial, policy: SeedPolicy, *, seed_axis: bool = False) -> dict[str, Any]:
    """The searcher's record of trial `trial` left behind (StudySearch._groups, in the shape its `_open` makes it),
    every seed still to run: the seeds its user attribute `seeds` names, else those its seed policy gives such a
    trial (`SeedPolicy.adopted`: a seed list's; --seeds auto's first batch; a race's seed 0, or none for a race's
    contender, whose seeds its looks give; none where the seed is a grid axis, `seed_axis`). Told already (`told`):
    a configuration the policy's standing tells is told no more."""
    race_of = trial.user_attrs.get(RACE_OF)
    step = policy.adopted(copy=race_of is not None)
    mine = [int(s) for s in trial.user_attrs.get(SEEDS_ATTR, [] if seed_axis else step.seeds)]
    g: dict[str, Any] = {"params": dict(trial.params), "seeds_left": list(mine), "members": {}, "seeds": list(mine),
                         "row": policy.label(dict(trial.params)), "final": step.final,
                         "told": step.final and trial.state.is_finished()}
    if race_of is not None:
        g[RACE_OF] = int(race_of)
    if not mine and not step.final:
        g[RERUN] = True  # a grid point with its seed (a study begun when seeds were a grid axis): run once
    return g


def draw_afresh(sampler: optuna.samplers.BaseSampler) -> None:
    """After adopting trials left behind: a sampler whose next draws come from a random stream saved before theirs
    would draw their values again (a TPESampler of a study started before TrialSeededTPE: its start-up values twice),
    so it gets a fresh random state (Optuna's reseed_rng: from the operating system, not reproducible). TrialSeededTPE
    draws from the trial number, and GridSampler gives trial n its point n and never a point RUNNING or finished while
    another is left (optuna/samplers/_grid.py): neither repeats a draw, and neither is touched."""
    if not isinstance(sampler, (TrialSeededTPE, optuna.samplers.GridSampler)):
        sampler.reseed_rng()
