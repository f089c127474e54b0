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
