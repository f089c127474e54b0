"""The sampled search's sampler: Optuna's TPE, its every draw a pure function of the study's seed, the trial's number
and the trials the storage holds.

A TPESampler keeps one random stream in the driver's memory. Ray Tune pickles it with the searcher when it saves its
state, so a driver killed after asking Optuna for trials that Tune had not saved comes back with the stream as it was
before them, and its next draws are the ones it made for those trials: the same sampled value under another number
(adbs_lab/search/orphans.py). `TrialSeededTPE` gives trial n a TPESampler of its own, seeded from (seed, n) through
numpy's SeedSequence, so there is no stream to restore: a resumed study draws for trial n what the uninterrupted study
draws (given the same finished trials, as TPE's model reads them), and no two trials share a draw. Optuna's
GridSampler already works this way: trial n gets point n of its seeded shuffle (optuna/samplers/_grid.py:
before_trial). The draws differ from a single TPESampler(seed) stream's; a study started with that sampler keeps it
on --resume (Ray Tune restores the searcher, and its sampler, from the study's files).

Every setting of TPE that decides what it samples is named here (`tpe_settings`), not left to Optuna's defaults:
Optuna 5.0 changed them (multivariate TPE and the constant liar became the defaults; Optuna 4 had both off), and a
study must not sample differently because a newer Optuna was installed. The values are Optuna 5.0's defaults, so
naming them changed no study's draws; tests/adbs_lab/search/test_sampler_settings.py reads them off the sampler a
study builds (adbs_lab/driver/launch.py: sampler).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

__all__ = ["TrialSeededTPE", "trial_seed", "tpe_settings", "STARTUP_TRIALS"]

STARTUP_TRIALS = 10
"""Configurations drawn at random before TPE models the results (Optuna's default since its first TPE)."""


def tpe_settings(n_objectives: int) -> dict[str, Any]:
    """TPE's settings for a study of `n_objectives` objectives (its seed aside):

    - multivariate TPE (the searched knobs modelled jointly) for one objective, independent TPE for several: Optuna
      5.0's rule when `multivariate` is not given (optuna/samplers/_tpe/sampler.py: `_is_multivariate`);
    - the constant liar: a configuration still running counts as a poor result, so trials started together spread
      out instead of all sampling near the same point (a study runs several at once);
    - STARTUP_TRIALS random configurations first."""
    return {"multivariate": n_objectives == 1, "constant_liar": True, "n_startup_trials": STARTUP_TRIALS}


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial `number`'s draws in a study seeded `seed` (SeedSequence: independent streams per pair, the
    same on every machine)."""
    return int(np.random.SeedSequence([int(seed), int(number)]).generate_state(1)[0])


class TrialSeededTPE(optuna.samplers.BaseSampler):
    """Optuna's TPESampler (with `tpe_settings`) with the random stream of each trial seeded from (seed, trial number)."""

    def __init__(self, seed: int, n_objectives: int = 1) -> None:
        self._seed = int(seed)
        self.settings = tpe_settings(n_objectives)
        self._open: dict[int, optuna.samplers.TPESampler] = {}  # trial number -> its sampler, until it is told

    def __getstate__(self) -> dict[str, Any]:
        # nothing drawn is state: a restored sampler holds none
        return {"_seed": self._seed, "settings": self.settings, "_open": {}}

    def tpe(self, number: int) -> optuna.samplers.TPESampler:
        """A TPESampler as trial `number` gets it: its seed from (seed, number), the study's settings (a sampler
        pickled before they were named holds none: Optuna's defaults, which are the same on Optuna 5.0)."""
        return optuna.samplers.TPESampler(seed=trial_seed(self._seed, number), **getattr(self, "settings", {}))

    def _of(self, trial: FrozenTrial) -> optuna.samplers.TPESampler:
        """Trial `trial`'s sampler: one per number, so its parameters draw one stream in turn, as TPE's do."""
        if trial.number not in self._open:
            self._open[trial.number] = self.tpe(trial.number)
        return self._open[trial.number]

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._of(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._of(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._of(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._of(trial).before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._of(trial).after_trial(study, trial, state, values)
        self._open.pop(trial.number, None)

    def reseed_rng(self) -> None:
        """Nothing to reseed: the draws depend on no stream this object keeps (Optuna calls this for n_jobs > 1)."""
