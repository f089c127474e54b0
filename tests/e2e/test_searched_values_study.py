"""A study that searches None beside other values (base_images_per_class over {40, 80, None}: None = all images, here
the best; data_on_device over {True, None}; num_workers over {2, None}), end to end with a fake trial function (a
second a trial): Ray Tune runs the grid, Optuna holds it, MLflow records it; the study's importance,
best_config.json and trials.parquet, studies/report.py from the store, and best_config.json fed to
`python -m adbs.run --config` keep every value as it ran. Slow tier (Ray); the generated shapes of every reader are
tests/adbs_lab/results/test_searched_values.py's, in the fast tier."""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
import ray.cloudpickle as cloudpickle

from adbs import exits
from adbs_lab import study
from adbs_lab.driver import options
from adbs_lab.records import config_values as cv
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.value_text import text
from adbs_lab.results import from_store, tables
from tests.helpers.scripts import in_process
from tests.helpers.values import same

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import test modules

REPO = Path(__file__).resolve().parents[2]
SEARCHED = {"base_images_per_class": [40, 80, None], "data_on_device": [True, None], "num_workers": [2, None],
            "alpha": [0.01, 0.05]}
"""Three fields searched with None (the best of each) beside ints, a bool, and 0 (a value pandas and Python take for
false too), never as the grid's first value; and alpha."""


@dataclass
class FakeResult:
    summary: dict


def fake_trial(cfg, *, hooks):
    """A second a trial: quality grows with each searched field that is None, and a little with alpha."""
    q = 60 + 2 * sum(getattr(cfg, f) is None for f in SEARCHED if f != "alpha") + 20 * cfg.alpha
    for e in range(1, cfg.base_epochs + 1):
        hooks.on_base_epoch({"epoch": e, "train_loss": 1.0 / e, "train_acc": 50.0, "val_acc": q, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        time.sleep(0.02)
    accs = [q - 3 * s for s in range(3)]
    for s, acc in enumerate(accs):
        hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc + 1, "val_base_acc": acc,
                          "val_novel_acc": float("nan") if s == 0 else acc - 10, "val_hmean": acc,
                          "test_acc": acc, "test_base_acc": acc, "test_novel_acc": acc - 10, "test_hmean": acc,
                          "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0,
                          "boundary_base_mean": 1.0, "boundary_novel_mean": 1.0})
    return FakeResult({"val_avg_acc": sum(accs) / len(accs) + 1, "test_avg_acc": sum(accs) / len(accs),
                       "val_last_acc": accs[-1] + 1, "test_last_acc": accs[-1], "d_cs": 0.9, "wall_time_s": 0.1})


@pytest.mark.slow
def test_a_study_searching_none_keeps_it_in_every_result(ray_address, storage, tracking_uri, capsys, tmp_path):
    plan = study.Plan(name="searched", space={"variant": "adb+ic", **SEARCHED}, space_source="tests:searched",
                      trial_fn=fake_trial)
    opts = options.parse("t", options.Defaults(pruning=False), argv=[
        "--smoke", "--set", "base_epochs=2", "--seeds", "0", "--storage", str(storage), "--tracking-uri", tracking_uri,
        "--address", ray_address, "--gpus-per-trial", "0", "--max-concurrent", "2"])[0]
    out = study.run(plan, opts)
    assert out is not None and out.code == exits.OK
    n = math.prod(len(v) for v in SEARCHED.values())
    assert len(out.trials) == n and (out.trials["state"] == K.COMPLETE).all()
    for field, values in SEARCHED.items():  # each value in n / len(values) trials, as it ran (80 an int, None None)
        assert cv.texts(out.trials[field]).value_counts().to_dict() == {text(v): n // len(values) for v in values}
        assert all(any(same(x, v) for v in values) for x in out.trials[field])

    # Optuna holds None as a choice of the grid; importance ranks every field over every configuration
    st = optuna.load_study(study_name="searched-smoke", storage=f"sqlite:///{storage / 'searched-smoke' / 'optuna.db'}")
    assert all({text(t.params[f]) for t in st.trials} == {text(v) for v in vs} for f, vs in SEARCHED.items())
    md = (storage / "searched-smoke" / "importance.md").read_text()
    assert md.startswith(f"{n} complete configurations") and "trials left out: none" in md
    assert all(f"| {field} |" in md for field in SEARCHED)

    best = json.loads((storage / "searched-smoke" / "best_config.json").read_text())
    assert {f: best["config"][f] for f in SEARCHED} == {**{f: None for f in SEARCHED}, "alpha": 0.05}
    back = cv.read_parquet(storage / "searched-smoke" / "trials.parquet")
    assert all(same(x, y) for f in SEARCHED for x, y in zip(back[f], out.trials[f]))

    # studies/report.py from the store alone: the same configurations, importance and best
    from mlflow.tracking import MlflowClient

    loaded = from_store.load_study(MlflowClient(tracking_uri), "searched-smoke")
    assert tables.best_config(loaded.trials)["config"] == best["config"]
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "searched", "--smoke", "--tracking-uri",
                            tracking_uri, "--out", str(tmp_path / "report")])
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "report" / "report.md").read_text()
    assert all(f"| {field} |" in report for field in SEARCHED) and f"{n} complete configurations" in report

    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--config", str(storage / "searched-smoke" / "best_config.json"),
                            "--dry-run"])
    assert r.returncode == 0, r.stderr[-2000:]
