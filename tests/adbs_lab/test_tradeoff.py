"""The base/novel trade-off figure: per configuration the mean over seeds of each trial's last session, the Pareto
front worked out by hand, validation and test panels, drawn for every study."""

import pandas as pd

from adbs_lab import metrics_keys as K
from adbs_lab import run_files, tradeoff


def _sessions():
    rows = []
    # (label, seed, last val base, last val novel); session 1 is not the last one and must not count
    for lab, seed, base, novel in [("baseline", 0, 70, 20), ("baseline", 1, 72, 22), ("adb", 0, 60, 40),
                                   ("adb+ic", 0, 58, 38), ("x", 0, 50, 50)]:
        for s, (b, n) in enumerate([(80, float("nan")), (1, 1), (base, novel)]):
            rows.append({"label": lab, "trial_id": f"{lab}{seed}", "seed": seed, "session": s, "state": K.COMPLETE,
                         "val_base_acc": b, "val_novel_acc": n, "test_base_acc": b - 1, "test_novel_acc": n,
                         "test_acc": b})
    return pd.DataFrame(rows)


def test_points_average_each_trials_last_session_and_the_front_by_hand():
    p = tradeoff.points(_sessions(), "val").set_index("label")
    assert p.loc["baseline", "base"] == 71 and p.loc["baseline", "novel"] == 21 and p.loc["baseline", "seeds"] == 2
    p = p.reset_index()
    # adb+ic (58, 38) is beaten by adb (60, 40) on both; the other three are each best somewhere
    assert sorted(p.loc[tradeoff.pareto(p), "label"]) == ["adb", "baseline", "x"]


def test_every_study_draws_it_with_the_baseline_marked(tmp_path):
    s = _sessions()
    trials = s.drop_duplicates("trial_id")[["label", "trial_id", "seed", "state"]]
    files = run_files.study_figures("ablation", s, trials, tmp_path)
    assert (tmp_path / "tradeoff.png") in files and (tmp_path / "tradeoff.png").stat().st_size > 5000
    assert tradeoff.baselines({"SAVC+ADBS": "SAVC", "SAVC": "SAVC"}) == {"SAVC"}
    # _space_baseline: a private helper of adbs_lab/run_files.py, tested directly (which row a study's figure marks)
    assert run_files._space_baseline("ablation") == "baseline"
