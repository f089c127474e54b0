"""Small sessions/trials frames of a study, built by hand for the tables' and the verdicts' tests."""

from __future__ import annotations

import pandas as pd

from adbs_lab.records import metrics_keys as K


def study_frames(values: dict[str, list[float | None]], states: dict[tuple[str, int], str] | None = None):
    """(sessions, trials) of rows with one last-session value per seed (None: the trial did not complete)."""
    sessions, trials = [], []
    for lab, vals in values.items():
        for seed, v in enumerate(vals):
            tid = f"{lab}-{seed}"
            state = (states or {}).get((lab, seed), K.COMPLETE if v is not None else K.DIVERGED)
            trials.append({"trial_id": tid, "label": lab, "seed": seed, "state": state,
                           "started_at": 100.0, "finished_at": 100.0 + 10 * (1 + len(lab))})
            if state == K.COMPLETE:
                for session, acc in ((0, 80.0), (1, v)):
                    sessions.append({"trial_id": tid, "label": lab, "seed": seed, "session": session,
                                     "test_acc": acc, "state": state})
    return pd.DataFrame(sessions), pd.DataFrame(trials)


def split_frames(values: dict[str, list[dict[str, float] | None]], sessions: int = 2):
    """(sessions, trials) of rows with base, novel and H per session: each seed's dict gives its last session's
    test_acc, test_base_acc, test_novel_acc, test_hmean (and `h1`: H of session 1, where there are 2 incremental
    sessions; else the last one's); session 0 has no novel classes (novel and H NaN). None: the trial diverged."""
    rows, trials = [], []
    for lab, seeds in values.items():
        for seed, v in enumerate(seeds):
            tid = f"{lab}-{seed}"
            state = K.COMPLETE if v is not None else K.DIVERGED
            trials.append({"trial_id": tid, "label": lab, "seed": seed, "state": state,
                           "started_at": 100.0, "finished_at": 110.0})
            if v is None:
                continue
            nan = float("nan")
            rows.append({"trial_id": tid, "label": lab, "seed": seed, "session": 0, "state": state, "test_acc": 80.0,
                         "test_base_acc": 80.0, "test_novel_acc": nan, "test_hmean": nan})
            for session in range(1, sessions + 1):
                last = session == sessions
                rows.append({"trial_id": tid, "label": lab, "seed": seed, "session": session, "state": state,
                             "test_acc": v["test_acc"] + (0 if last else 1), "test_base_acc": v["test_base_acc"],
                             "test_novel_acc": v["test_novel_acc"],
                             "test_hmean": v["test_hmean"] if last else v.get("h1", v["test_hmean"])})
    return pd.DataFrame(rows), pd.DataFrame(trials)
