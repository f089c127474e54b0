"""One line per trial event a person can follow: started / finished / pruned / failed, counts, best so far."""

from __future__ import annotations

import time
from typing import Callable

from ray.tune import Callback

from adbs_lab import metrics_keys as K
from adbs_lab.records import classify
from adbs_lab.space import describe


class Progress(Callback):
    def __init__(self, *, study: str, total: int, varying: list[str], is_pruned: Callable[[object], bool]) -> None:
        """`is_pruned(trial)`: whether Optuna holds the trial's configuration as PRUNED (the study's one answer)."""
        self.study, self.total, self.varying, self.is_pruned = study, total, varying, is_pruned
        self.t0 = time.time()
        self.states: dict[str, str] = {}  # trial id -> final state, as classified when the trial ended

    def setup(self, **info) -> None:
        self.t0 = time.time()

    def _line(self, trials, trial, event: str) -> None:
        counts = {K.COMPLETE: 0, K.PRUNED: 0, K.FAILED: 0}
        running = 0
        best, best_name = None, ""
        for t in trials:
            state = self.states.get(t.trial_id)
            if state is None:
                running += t.status == "RUNNING" or t is trial
                continue
            counts[state] = counts.get(state, 0) + 1
            value = (t.last_result or {}).get(K.OBJECTIVE)
            if state == K.COMPLETE and (best is None or value > best):
                best, best_name = value, describe(t.config, self.varying)
        el = int(time.time() - self.t0)
        best_txt = f"best val avg acc {best:.2f} ({best_name})" if best is not None else "best val avg acc -"
        print(
            f"[{self.study} {el // 60:02d}:{el % 60:02d}] {describe(trial.config, self.varying)}: {event} | "
            f"done {counts[K.COMPLETE]}/{self.total}, running {running}, pruned {counts[K.PRUNED]}, "
            f"failed {counts[K.FAILED]} | {best_txt}",
            flush=True,
        )

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self.states.pop(trial.trial_id, None)  # a restored trial runs again
        self._line(trials, trial, "started")

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        result = trial.last_result or {}
        state = classify(result, pruned=self.is_pruned(trial))
        self.states[trial.trial_id] = state
        if state == K.PRUNED:
            epoch = result.get(K.BASE_STEP)
            event = f"pruned at base epoch {int(epoch)}" if K.finite(epoch) else "pruned"
        elif state == K.FAILED:
            event = f"FAILED: {result.get(K.ERROR) or 'it ended without a finite objective'}"
        else:
            event = (f"finished: val avg acc {result[K.OBJECTIVE]:.2f}, "
                     f"test avg acc {result.get('summary/test_avg_acc', float('nan')):.2f}")
            if result.get(K.WARNING):
                event += f" | WARNING: {result[K.WARNING]}"
        self._line(trials, trial, event)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self.states[trial.trial_id] = K.FAILED
        self._line(trials, trial, "FAILED (see the trial's error file / MLflow tag adbs.error)")
