"""One line per trial event a person can follow: started / finished / pruned / failed, counts, best so far."""

from __future__ import annotations

import time

from ray.tune import Callback

from adbs_lab import metrics_keys as K
from adbs_lab.pruning import outcome
from adbs_lab.space import describe


class Progress(Callback):
    def __init__(self, *, study: str, total: int, varying: list[str]) -> None:
        self.study, self.total, self.varying = study, total, varying
        self.t0 = time.time()

    def setup(self, **info) -> None:
        self.t0 = time.time()

    def _line(self, trials, trial, event: str, status: str | None = None) -> None:
        done = pruned = failed = running = 0
        best, best_name = None, ""
        for t in trials:
            # The callback runs before Tune updates the ending trial's status.
            st = status if (t is trial and status) else t.status
            if st == "RUNNING":
                running += 1
            elif st == "ERROR":
                failed += 1
            elif st == "TERMINATED":
                o = outcome(t.last_result, error=False)
                if o == K.PRUNED:
                    pruned += 1
                elif o == K.FAILED:
                    failed += 1
                else:
                    done += 1
                    if best is None or o > best:
                        best, best_name = o, describe(t.config, self.varying)
        el = int(time.time() - self.t0)
        best_txt = f"best val avg acc {best:.2f} ({best_name})" if best is not None else "best val avg acc -"
        print(
            f"[{self.study} {el // 60:02d}:{el % 60:02d}] {describe(trial.config, self.varying)}: {event} | "
            f"done {done}/{self.total}, running {running}, pruned {pruned}, failed {failed} | {best_txt}",
            flush=True,
        )

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self._line(trials, trial, "started", "RUNNING")

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        o = outcome(trial.last_result, error=False)
        if o == K.PRUNED:
            epoch = (trial.last_result or {}).get(K.BASE_STEP)
            event = f"pruned at base epoch {int(epoch)}" if K.finite(epoch) else "pruned"
        elif o == K.FAILED:
            event = "failed (no finite objective)"
        else:
            event = f"finished: val avg acc {o:.2f}, test avg acc {trial.last_result.get('summary/test_avg_acc', float('nan')):.2f}"
            warning = (trial.last_result or {}).get(K.WARNING)
            if warning:
                event += f" | WARNING: {warning}"
        self._line(trials, trial, event, "TERMINATED")

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self._line(trials, trial, "FAILED (see the trial's error file / MLflow tag adbs.error)", "ERROR")
