"""The sampler a study samples with, read off the object the study builds (adbs_lab/driver/launch.py: sampler, from
the study's own Prepared; Optuna keeps the settings in attributes of its own, with no public accessor), so that an
Optuna upgrade that changes a default fails here instead of changing what a study samples: multivariate TPE for one
objective and independent TPE for several, the constant liar, 10 random startup trials, --sampler-seed as the seed;
a grid's sampler seeded the same way. No Ray."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution

from adbs_lab import study
from adbs_lab.driver import launch, options
from adbs_lab.search import sampler as study_sampler
from adbs_lab.search import space as sp

SAMPLED = study.Plan(name="s", space={"variant": "adb+ic", "alpha": FloatDistribution(0.01, 0.2)}, space_source="tests")
GRID = study.Plan(name="g", space={"variant": "adb+ic", "alpha": [0.01, 0.05]}, space_source="tests")


def _built(tmp_path, plan: study.Plan, *flags: str):
    """The Optuna sampler the study hands its searcher (adbs_lab/driver/launch.py: sampler, from the study's own
    Prepared), and that Prepared."""
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
    assert type(sampler) is optuna.samplers.TPESampler
    assert sampler._multivariate is True  # named, not None (Optuna's default, which Optuna 5.0 changed)
    assert sampler._constant_liar is True
    assert sampler._n_startup_trials == study_sampler.STARTUP_TRIALS == 10
    assert sampler._n_ei_candidates == 24 and sampler._group is False
    assert _seeded_like(sampler._rng.rng, 7) and p.sampler_seed == 7


def test_a_study_of_several_objectives_samples_each_knob_on_its_own(tmp_path):
    sampler, p = _built(tmp_path, SAMPLED, "--objectives", "val_last_base_acc:max", "val_last_novel_acc:max")
    assert len(p.objectives) == 2
    assert sampler._multivariate is False and sampler._constant_liar is True
    assert sampler._n_startup_trials == 10


def test_a_grid_is_sampled_in_an_order_its_seed_fixes(tmp_path):
    sampler, p = _built(tmp_path, GRID, "--sampler-seed", "3")
    assert isinstance(sampler, optuna.samplers.GridSampler) and p.is_grid
    same = optuna.samplers.GridSampler(sp.grid_points(p.space), seed=3)  # its grid shuffled by seed 3, as the study's
    assert sampler._all_grids == same._all_grids and _same_state(sampler._rng.rng, same._rng.rng)


@pytest.mark.skipif(not optuna.__version__.startswith("5.0."), reason="the settings are Optuna 5.0's defaults")
@pytest.mark.parametrize("objectives", [1, 2])
def test_the_sampler_draws_the_same_configurations_as_optuna_5_0_s_defaults_did(objectives):
    """Naming the settings changed no study: the same seed draws the same configurations as a TPESampler left to
    Optuna 5.0's defaults (the release the ranges of pyproject.toml were tested with), past the startup trials."""
    def draws(sampler) -> list[float]:
        st = optuna.create_study(sampler=sampler, directions=["maximize"] * objectives)
        out = []
        for _ in range(14):
            t = st.ask({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
            out.append(t.params["x"])
            st.tell(t, [t.params["x"] * t.params["y"]] * objectives)
        return out

    assert draws(study_sampler.tpe(objectives, 5)) == draws(optuna.samplers.TPESampler(seed=5))
