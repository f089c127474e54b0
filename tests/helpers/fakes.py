"""Hand-made objects for the tests: a base session to cache (tests/adbs/test_cache.py, tests/adbs/test_objstore.py)
and a small study's trials table, where one option decides the accuracy and another adds noise
(tests/adbs_lab/results/test_importance.py, tests/adbs_lab/results/test_analysis_failure.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from adbs.state import BaseSession
from adbs_lab.records import metrics_keys as K


def base_session(v: float = 1.0) -> BaseSession:
    return BaseSession(
        backbone_state={"w": torch.full((3,), v)},
        prototypes=torch.randn(4, 2),
        boundaries=torch.ones(4) * v,
        curve=[{"epoch": 1, "val_acc": 50.0}],
        best_epoch=1,
    )


def importance_trials(n_a: int = 6, n_b: int = 2, seeds=(0, 1)):
    rows = []
    rng = np.random.default_rng(0)
    for a in np.linspace(0.01, 0.1, n_a):
        for b in (8.0, 16.0, 32.0)[:n_b]:
            for seed in seeds:
                # a decides; b and the seed add noise
                rows.append({"label": f"alpha={a:.4g} temperature={b:g}", "alpha": float(a), "temperature": b,
                             "seed": seed, "state": K.COMPLETE, "val_avg_acc": 50 + 300 * a + rng.normal(0, 0.3),
                             K.WARNING: ""})
    return pd.DataFrame(rows)
