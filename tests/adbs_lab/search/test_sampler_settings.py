"""The sampler a study samples with, read off the object the study builds (adbs_lab/driver/launch.py: sampler, from
the study's own Study; Optuna keeps the settings in attributes of its own, with no public accessor), so that an
Optuna upgrade that changes a default fails here instead of changing what a study samples: each trial's TPE with
multivariate TPE for one objective and independent TPE for several, the constant liar, 10 random startup trials, and
its seed from --sampler-seed and the trial's number (adbs_lab/search/samplers.py); a grid's sampler seeded by
--sampler-seed. No Ray."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution

from adbs_lab import study
from adbs_lab.driver import launch, options
from adbs_lab.search import samplers
from adbs_lab.search import space as sp

SAMPLED = study.Plan(name="s", space={"variant": "adb+ic", "alpha": FloatDistribution(0.01, 0.2)}, space_source="tests")
GRID = study.Plan(name="g", space={"variant": "adb+ic", "alpha": [0.01, 0.05]}, space_source="tests")


def _built(tmp_path, plan: study.Plan, *flags: str):
    """The Optuna sampler the study hands its searcher (adbs_lab/driver/launch.py: sampler, from the study's own
    Study), and that Study."""
    opts = options.parse("t", options.Defaults(num_samples=4), argv=[
        "--storage", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--gpus-per-trial", "0", *flags])[0]
    p = study.preflight(plan, opts)
    return launch.sampler(p), p


def _same_state(a: np.random.RandomState, b: np.random.RandomState) -> bool:
    sa, sb = a.get_state(), b.get_state()
    return bool((sa[1] == sb[1]).all() and sa[2] == sb[2])


def _seeded_like(rng: np.random.RandomState, seed: int) -> bool:
    return _same_state(rng, np.random.RandomState(seed))


def test_a_sampled_study_samples_with_multivariate_tpe_the_constant_liar_and_its_seed(tmp_path):
    sampler, p = _built(tmp_path, SAMPLED, "--sampler-seed", "7")
    assert type(sampler) is samplers.TrialSeededTPE and p.sampler_seed == 7
    for number in (0, 5):  # the TPESampler each trial gets
        tpe = sampler.tpe(number)
        assert type(tpe) is optuna.samplers.TPESampler
        assert tpe._multivariate is True  # named, not None (Optuna's default, which Optuna 5.0 changed)
        assert tpe._constant_liar is True
        assert tpe._n_startup_trials == samplers.STARTUP_TRIALS == 10
        assert tpe._n_ei_candidates == 24 and tpe._group is False
        assert _seeded_like(tpe._rng.rng, samplers.trial_seed(7, number))


def test_a_study_of_several_objectives_samples_each_knob_on_its_own(tmp_path):
    sampler, p = _built(tmp_path, SAMPLED, "--objectives", "val_last_base_acc:max", "val_last_novel_acc:max")
    assert len(p.objectives) == 2
    tpe = sampler.tpe(0)
    assert tpe._multivariate is False and tpe._constant_liar is True and tpe._n_startup_trials == 10


def test_a_grid_is_sampled_in_an_order_its_seed_fixes(tmp_path):
    sampler, p = _built(tmp_path, GRID, "--sampler-seed", "3")
    assert isinstance(sampler, optuna.samplers.GridSampler) and p.is_grid
    same = optuna.samplers.GridSampler(sp.grid_points(p.space), seed=3)  # its grid shuffled by seed 3, as the study's
    assert sampler._all_grids == same._all_grids and _same_state(sampler._rng.rng, same._rng.rng)


@pytest.mark.skipif(not optuna.__version__.startswith("5.0."), reason="the settings are Optuna 5.0's defaults")
@pytest.mark.parametrize("objectives", [1, 2])
def test_the_named_settings_draw_what_optuna_5_0_s_defaults_did(objectives):
    """Naming the settings changed no study: a trial's TPE with them draws the same configurations as a TPESampler
    left to Optuna 5.0's defaults (the release the ranges of pyproject.toml were tested with), past the startup
    trials; and a sampler pickled before they were named (no settings) samples as one with them."""
    def draws(sampler) -> list[float]:
        st = optuna.create_study(sampler=sampler, directions=["maximize"] * objectives)
        out = []
        for _ in range(14):
            t = st.ask({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
            out.append(t.params["x"])
            st.tell(t, [t.params["x"] * t.params["y"]] * objectives)
        return out

    named = optuna.samplers.TPESampler(seed=5, **samplers.tpe_settings(objectives))
    assert draws(named) == draws(optuna.samplers.TPESampler(seed=5))
    old = samplers.TrialSeededTPE(seed=5, n_objectives=objectives)
    del old.settings  # as unpickled from a study started before the settings were named
    assert draws(old) == draws(samplers.TrialSeededTPE(seed=5, n_objectives=objectives))
