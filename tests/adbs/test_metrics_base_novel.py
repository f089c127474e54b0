"""Per-trial summaries of base and novel accuracy (adbs.metrics.base_novel_summary), beside the summary a trial
already reported (which must not move)."""

import math

import pytest

from adbs.data import build_data
from adbs.metrics import base_novel_summary, trial_summary
from adbs.config import preset
from adbs.trial import run_trial


def _row(t, vb, vn, tb, tn):
    return {"session": t, "val_base_acc": vb, "val_novel_acc": vn, "test_base_acc": tb, "test_novel_acc": tn}


def test_last_and_mean_over_the_incremental_sessions_by_hand():
    rows = [_row(2, 60.0, 30.0, 58.0, 20.0), _row(0, 80.0, math.nan, 79.0, math.nan), _row(1, 70.0, 40.0, 66.0, 30.0)]
    s = base_novel_summary(rows)
    assert s["val_last_base_acc"] == 60.0 and s["val_last_novel_acc"] == 30.0
    assert s["test_last_base_acc"] == 58.0 and s["test_last_novel_acc"] == 20.0
    assert s["val_mean_base_acc"] == 65.0 and s["val_mean_novel_acc"] == 35.0  # sessions 1..2, not 0
    assert s["test_mean_base_acc"] == 62.0 and s["test_mean_novel_acc"] == 25.0
    assert s["val_last_hmean"] == pytest.approx(2 * 60 * 30 / 90) and s["test_last_hmean"] == pytest.approx(2 * 58 * 20 / 78)


def test_no_incremental_session_gives_nan_not_the_base_session():
    s = base_novel_summary([_row(0, 80.0, math.nan, 79.0, math.nan)])
    assert all(math.isnan(v) for v in s.values())


def test_a_trial_reports_them_and_its_earlier_summary_is_unchanged():
    cfg = preset("smoke", base_epochs=2, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
                 finetune_epochs=2, threads=1)
    r = run_trial(cfg, data=build_data(cfg))
    rows = r.sessions
    assert r.summary["test_last_novel_acc"] == rows[-1]["test_novel_acc"]
    assert r.summary["val_mean_base_acc"] == pytest.approx(sum(x["val_base_acc"] for x in rows[1:]) / 2)
    # what trials reported before: the same function of the same rows, the last hmean the session's own
    for split in ("val", "test"):
        for k, v in trial_summary([x[f"{split}_acc"] for x in rows]).items():
            assert r.summary[f"{split}_{k}"] == v
    assert r.summary["test_last_hmean"] == rows[-1]["test_hmean"]
