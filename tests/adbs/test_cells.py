"""A number reads the same in every table (adbs/cells.py), and the departure line is one sentence (adbs/departures.py)
whether `python -m adbs.run` prints it above its session table or a study above its table."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from adbs import cells, departures
from adbs.run import session_table
from adbs_lab.results import compare
from adbs_lab.results import renderings
from adbs_lab.results import tables
from adbs_lab.records import metrics_keys as K


@pytest.mark.parametrize("v, digits, signed, shown", [
    (58.714, 2, False, "58.71"), (np.float64(0.12345), 3, False, "0.123"), (3.0, 2, True, "+3.00"),
    (-0.5, 2, True, "-0.50"), (math.nan, 2, False, "-"), (math.inf, 2, False, "-"), (None, 2, False, "-"),
    (True, 2, False, "-"),
])
def test_a_number(v, digits, signed, shown):
    assert cells.number(v, digits, signed=signed) == shown


def test_a_mean_with_its_interval():
    assert cells.mean_ci(58.714, 1.2) == "58.71 ± 1.20"
    assert cells.mean_ci(58.714, math.nan) == cells.mean_ci(58.714) == "58.71"
    assert cells.mean_ci(math.nan, 1.2) == "-"
    assert cells.mean_ci(0.5, 0.25, 3, pm=" $\\pm$ ") == "0.500 $\\pm$ 0.250"


def _table(seeds: int) -> pd.DataFrame:
    return pd.DataFrame([{"config": "adb", "seeds": seeds, "0": (70.0, 1.5), "avg": (60.0, math.nan),
                          "delta_last": 2.0, "d_cs": (0.8512, 0.01)}])


def test_every_table_formats_its_cells_alike():
    text = tables.format_table(_table(3))
    assert "70.00 ± 1.50" in text and "60.00" in text and "+2.00" in text and "0.851 ± 0.010" in text
    assert "70.00 ±" not in tables.format_table(_table(1))  # one seed: no interval
    latex = renderings.to_latex(_table(3))
    assert "70.00 $\\pm$ 1.50" in latex and "+2.00" in latex
    plain = renderings.render_plain(pd.DataFrame([{"a": 1.234, "D_cs": 0.12345, "n": 3, "b": math.nan}]), "text")
    assert "1.23" in plain and "0.1235" in plain and " 3" in plain and "-" in plain
    assert compare.format_paired((8.0, 1.2, 3)) == "+8.00 ± 1.20 (n=3)"
    assert compare.format_paired((8.0, math.nan, 1)) == "+8.00 (n < 2: no interval)"
    assert compare.format_paired((math.nan, 1.0, 3)) == "-"


def test_one_departure_sentence_for_a_run_and_a_study():
    cfg = {"boundary_lr_scale": 0.1, "alpha": 0.05}
    row = {"session": 0, "n_classes": 60, "val_acc": 70.0, "test_acc": 69.0, "test_base_acc": 69.0,
           "test_novel_acc": math.nan, "test_hmean": math.nan, "test_pred_novel_share": math.nan,
           "test_unpredicted_classes": 0, "boundary_negative": 0, "boundary_base_abs_mean": 1.0,
           "boundary_novel_abs_mean": math.nan}
    summary = {"val_avg_acc": 70.0, "test_avg_acc": 69.0, "test_last_acc": 69.0, "test_pd": 0.0, "d_cs": 0.5,
               "best_base_epoch": 3, "wall_time_s": 1.0}
    run_line = session_table(SimpleNamespace(config=cfg, sessions=[row], summary=summary, warnings=[])).splitlines()[0]
    trials = pd.DataFrame([{"label": "a", "seed": s, "state": K.COMPLETE, "boundary_lr_scale": 0.1} for s in (0, 1)])
    study_line = tables.departure_lines(trials)[0]
    remedy = "boundary_lr_scale=0.1 (a boundary remedy; docs/boundary-dynamics.md, studies/boundary.py)"
    assert run_line == "departs from the released code: " + remedy
    assert study_line == "departs from the released code in every trial: " + remedy
    assert departures.changed({"boundary_lr_scale": 1.0, "alpha": 0.5}) == {}
