"""The TPE sampler of a sampled study, every setting that decides what it samples named here, not left to Optuna's
defaults: Optuna 5.0 changed them (multivariate TPE and the constant liar became the defaults; Optuna 4 had both
off), and a study must not sample differently because a newer Optuna was installed. The values are Optuna 5.0's
defaults, so naming them changed no study's numbers; tests/adbs_lab/search/test_sampler_settings.py reads them off
the sampler a study builds (adbs_lab/driver/launch.py: _search).
"""

from __future__ import annotations

import optuna

__all__ = ["STARTUP_TRIALS", "tpe"]

STARTUP_TRIALS = 10
"""Configurations drawn at random before TPE models the results (Optuna's default since its first TPE)."""


def tpe(n_objectives: int, seed: int) -> optuna.samplers.TPESampler:
    """TPE for a study of `n_objectives` objectives, seeded by --sampler-seed:

    - multivariate TPE (the searched knobs modelled jointly) for one objective, independent TPE for several: Optuna
      5.0's rule when `multivariate` is not given (optuna/samplers/_tpe/sampler.py: `_is_multivariate`);
    - the constant liar: a configuration still running counts as a poor result, so trials started together spread
      out instead of all sampling near the same point (a study runs several at once);
    - STARTUP_TRIALS random configurations first."""
    return optuna.samplers.TPESampler(multivariate=n_objectives == 1, constant_liar=True,
                                      n_startup_trials=STARTUP_TRIALS, seed=seed)
