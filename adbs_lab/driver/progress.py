"""One line per trial event a person can follow: started / finished / pruned / failed, counts, best so far on the
study's objective (or, for several --objectives, the size of the Pareto front so far); and, while a trial trains
its base session, its base epochs (throttled) with s/epoch and the trial's ETA."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from ray.tune import Callback

from adbs.cells import duration
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.objectives import DEFAULT, Objective
from adbs_lab.results.pareto import front
from adbs_lab.records.tune_keys import describe
from adbs_lab.results.tables import LABEL_WIDTH

if TYPE_CHECKING:
    from ray.tune.stopper import Stopper

__all__ = ["EPOCH_LINE_EVERY_S", "Progress"]


EPOCH_LINE_EVERY_S = 30.0
"""At most one base-epoch line per trial this often (the first and last epoch always print): a GPU trial's epochs
take minutes and each one prints, while a CPU study's seconds-long epochs stay a few lines per trial."""


class Progress(Callback):
    def __init__(self, *, study: str, total: int, varying: list[str], ended: Callable[[object], str],
                 max_concurrent: int = 1, epoch_every_s: float = EPOCH_LINE_EVERY_S,
                 clock: Callable[[], float] = time.time, objectives: tuple[Objective, ...] = DEFAULT,
                 no_best: str | None = None, to_train: int | None = None) -> None:
        """`ended(trial)`: how the trial ended, as the study classified it once (StudySearch.ended); `objectives`:
        what the search optimises (adbs_lab/records/objectives.py); `no_best`: what the lines end with instead of
        the best so far, in a study that names no best (adbs_lab/results/best.py: progress_text); `to_train`: the
        base sessions the trials will train, the others loading theirs from the cache (adbs_lab/driver/
        base_sessions.py), None where that is not told before they start."""
        self.study, self.total, self.varying, self.ended = study, total, varying, ended
        self.objectives = tuple(objectives) or DEFAULT
        self.no_best = no_best
        self.to_train = to_train
        self.max_concurrent, self.epoch_every_s, self.clock = max(1, max_concurrent), epoch_every_s, clock
        self.t0 = clock()
        self.states: dict[str, str] = {}  # trial id -> final state, as classified when the trial ended
        self.epochs: dict[str, dict] = {}  # trial id -> {"printed": time of its last epoch line, "times": [s]}
        self.estimated = False  # the study's time estimate from a measured epoch, printed once
        self.cached: set[str] = set()  # trials whose base session came from the cache (adbs/cache.py)
        self.started: set[str] = set()  # trials this process saw start: a second start is a restart, said so
        self.numbers: dict[str, int] = {}  # trial id -> "trial N" in these lines, where its label is too long
        self.earlier: set[str] = set()  # trials that ended before --resume (Tune restores them ended)

    def setup(self, stop: Stopper | None = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        self.t0 = self.clock()
        if total_num_samples and total_num_samples > self.total:  # restored by --more-seeds: its new budget
            self.total = total_num_samples

    def _stamp(self) -> str:
        el = int(self.clock() - self.t0)
        return f"[{self.study} {el // 60:02d}:{el % 60:02d}]"

    def _name(self, trial) -> str:
        """The trial as these lines name it: its label (what differs, and its seed), or, where that is longer than
        a table's row label may be (a search of several knobs: ~150 characters), "trial N", numbered as the trials
        start; its start line gives the label in full, once."""
        label = describe(trial.config, self.varying)
        if len(label) <= LABEL_WIDTH:
            return label
        numbers = self.__dict__.setdefault("numbers", {})  # a Progress unpickled from an older run has none
        return f"trial {numbers.setdefault(trial.trial_id, len(numbers) + 1)}"

    def _line(self, trials, trial, event: str) -> None:
        counts = {K.COMPLETE: 0, K.PRUNED: 0, K.DIVERGED: 0, K.FAILED: 0}
        running = 0
        done = []
        for t in trials:
            state = self.states.get(t.trial_id)
            if state is None:
                running += t.status == "RUNNING" or t is trial
                continue
            counts[state] = counts.get(state, 0) + 1
            if state == K.COMPLETE:
                done.append(t)
        best_txt = self._best(done)
        print(
            f"{self._stamp()} {self._name(trial)}: {event} | "
            f"done {counts[K.COMPLETE]}/{self.total}, running {running}, pruned {counts[K.PRUNED]}, "
            f"{f'diverged {counts[K.DIVERGED]}, ' if counts[K.DIVERGED] else ''}failed {counts[K.FAILED]} | {best_txt}",
            flush=True,
        )

    def _best(self, done: list) -> str:
        """The best complete trial so far on the objective, or the trials on the Pareto front of several (trials,
        not configurations: the seeds' means are in the study's table and pareto.json at the end)."""
        no_best = getattr(self, "no_best", None)  # a Progress unpickled from an older run has none
        if no_best:
            return no_best
        objs = self.objectives
        on, values = self._front(done)
        if len(objs) > 1:
            return f"Pareto front so far: {len(on)} of {len(done)} complete trials ({', '.join(o.text for o in objs)})"
        o = objs[0]
        name = "val avg acc" if o == DEFAULT[0] else o.name
        if not on:  # one objective: the front is the best value (all of them where tied)
            return f"best {name} -"
        return f"best {name} {values[0][0]:.2f} ({self._name(on[0])})"

    def _front(self, done: list) -> tuple[list, list[list[float]]]:
        """The complete trials on the front (in `done`'s order) and their values. Only the last front and the trials
        completed since are compared: a trial off the front is dominated by one on it (dominance is transitive), so
        it stays off. Comparing every complete trial on every line made the driver's work per trial grow with the
        study (py-spy on bench/scale_study.py's driver, docs/benchmarks.md). When a trial left `done` (a restored
        trial runs again) every trial is compared again."""
        ids = {t.trial_id for t in done}
        # (getattr: a Progress unpickled from an earlier version has neither)
        basis: set[str] = getattr(self, "_front_basis", set())
        was_on: set[str] = getattr(self, "_front_ids", set())
        if not basis <= ids:
            basis, was_on = set(), set()
        maybe = [t for t in done if t.trial_id in was_on or t.trial_id not in basis]
        values = [[(t.last_result or {}).get(o.key, float("nan")) for o in self.objectives] for t in maybe]
        on = front(values, [o.direction for o in self.objectives])
        self._front_basis, self._front_ids = ids, {maybe[i].trial_id for i in on}
        return [maybe[i] for i in on], [values[i] for i in on]

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        for t in trials:
            if t.trial_id not in self.states and t.trial_id not in self.started and t.status in ("TERMINATED", "ERROR"):
                # ended before --resume: Tune restores it ended, and this callback (unpickled as the interrupted run
                # started it, ray/tune/tuner.py: restore) was not told; counted as the searcher classified it
                self.states[t.trial_id] = self.ended(t)
                # (setdefault: a callback pickled by code from before `earlier` lacks it)
                self.__dict__.setdefault("earlier", set()).add(t.trial_id)
        self.states.pop(trial.trial_id, None)  # a restored trial runs again
        again = trial.trial_id in self.started  # Tune starts a trial again after a failure (--max-failures)
        self.started.add(trial.trial_id)
        label = describe(trial.config, self.varying)
        event = "started again, from its last checkpoint" if again else "started"
        self._line(trials, trial, event if self._name(trial) == label else f"{event} ({label})")

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        """A line per base epoch of a running trial (throttled): epoch i/N, validation accuracy, s/epoch, ETA."""
        if result.get(K.REPORT_KIND) != K.KIND_BASE or not K.finite(result.get(K.BASE_STEP)):
            return
        if result.get(K.REUSED) == 1:  # a cached base session replayed in a moment: said once, no epochs
            if trial.trial_id not in self.cached:
                self.cached.add(trial.trial_id)
                print(f"{self._stamp()} {self._name(trial)}: base session from cache (an earlier "
                      "trial trained the same one; adbs/cache.py), only its incremental sessions run", flush=True)
            return
        epoch = int(result[K.BASE_STEP])
        n = result.get(K.BASE + "epochs")
        n = int(n) if K.finite(n) else int(trial.config.get("base_epochs") or epoch)
        seen = self.epochs.setdefault(trial.trial_id, {"printed": None, "times": []})
        secs = result.get(K.BASE + "epoch_time_s")
        if K.finite(secs):
            seen["times"].append(float(secs))
        now = self.clock()
        first = seen["printed"] is None  # epoch 1, or the first epoch after a restart from a checkpoint
        if not (first or epoch >= n or now - seen["printed"] >= self.epoch_every_s):
            return
        seen["printed"] = now
        times = seen["times"]
        # the first epoch carries one-off costs (data on the device, cuDNN autotuning): left out once others exist
        per = sum(times[1:]) / len(times[1:]) if len(times) > 1 else (times[0] if times else None)
        parts = [f"base epoch {epoch}/{n}", f"val acc {result.get(K.BASE_PRUNE_VALUE, float('nan')):.2f}"]
        if per is not None:
            parts.append(f"{per:.1f} s/epoch")
            if epoch < n:
                parts.append(f"trial ETA {duration((n - epoch) * per)} + its incremental sessions")
        print(f"{self._stamp()} {self._name(trial)}: {', '.join(parts)}", flush=True)
        if per is not None and not self.estimated:
            self.estimated = True
            self._estimate(n, per)

    def _estimate(self, n: int, per: float) -> None:
        """The study's time from its first measured base epoch (`n` epochs of `per` s): the base sessions still to
        train, not those the cache provides (`to_train`, else less the trials seen loading theirs so far)."""
        earlier = getattr(self, "earlier", ())  # a callback pickled before `earlier` existed lacks it
        left = self.total - len(earlier)
        to_train = getattr(self, "to_train", None)  # likewise
        training = max(1, min(left, to_train) if to_train is not None else left - len(self.cached))
        waves = -(-training // self.max_concurrent)
        trials = f"{left} trials to go" if earlier else f"{self.total} trials"
        if training < left:  # the others load theirs: trained by an earlier study or trial (adbs/cache.py)
            others = left - training
            trials += (f", {training} of them training a base session "
                       f"({'the other one loads its own' if others == 1 else f'the other {others} load theirs'})")
        print(f"{self._stamp()} estimate from this epoch: base session ~{duration(n * per)} per trial "
              f"({n} epochs x {per:.1f} s); {trials}, {self.max_concurrent} at a time: ~"
              f"{duration(waves * n * per)} of base sessions in all (less where trials are pruned; the incremental "
              "sessions add a little)", flush=True)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        result = trial.last_result or {}
        state = self.ended(trial)
        self.states[trial.trial_id] = state
        if state == K.PRUNED:
            epoch = result.get(K.BASE_STEP)
            event = f"pruned at base epoch {int(epoch)}" if K.finite(epoch) else "pruned"
        elif state == K.DIVERGED:
            event = f"DIVERGED: {result.get(K.ERROR) or 'a NaN/inf loss'}"
        elif state == K.FAILED:
            event = f"FAILED: {result.get(K.ERROR) or 'it ended without a finite objective'}"
        else:
            event = (f"finished: val avg acc {result[K.OBJECTIVE]:.2f}, "
                     f"test avg acc {result.get('summary/test_avg_acc', float('nan')):.2f}")
            if self.objectives != DEFAULT:
                event += "; " + ", ".join(f"{o.name} {result.get(o.key, float('nan')):.2f}" for o in self.objectives
                                          if o != DEFAULT[0])
            if trial.trial_id in self.cached:
                event += " (base session from cache)"
            if result.get(K.WARNING):
                event += f" | WARNING: {result[K.WARNING]}"
        self._line(trials, trial, event)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self.states[trial.trial_id] = K.FAILED
        self._line(trials, trial, f"FAILED: {_last_line(trial)} (traceback: the trial's error.txt, MLflow tag "
                                  "adbs.error)")

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """A trial that raised and that Tune runs again from its last checkpoint (--max-failures)."""
        self._line(trials, trial, f"raised {_last_line(trial)}; Ray Tune runs it again from its last checkpoint "
                                  f"(failure {trial.num_failures})")


def _last_line(trial) -> str:
    """The error line of the traceback that ended Tune trial `trial` (its full text is in Tune's error file)."""
    from adbs_lab.driver.outcome import error_line, trial_error

    return error_line(trial_error(trial))
