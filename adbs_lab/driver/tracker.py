"""MLflow tracking, logged from ONE process: the Tune driver, through a ray.tune Callback.

SQLite does not tolerate many writer processes (mlflow#6490), so trials never touch MLflow;
their reports reach this callback in the driver. Layout:
experiment = study name (`<study>-smoke` for a --smoke run); one parent run per study invocation; one nested run per trial
(tag mlflow.parentRunId) with params = the full resolved Config, step metrics base/* (step =
epoch) and session/* (step = session index), summary/*, and tags adbs.state etc.

The trial -> MLflow run id map is kept in `<study dir>/mlflow_runs.json`, so a restored
trial reopens its run instead of creating a duplicate (Ray's MLflowLoggerCallback would). The same file
records how each trial ended (`ended`: the state StudySearch classified, adbs_lab/search/searcher.py), which the
study's tables read (adbs_lab/driver/summarise.py).
"""

from __future__ import annotations

import json
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ray.tune import Callback

from adbs_lab.driver import reruns
from adbs.light import pause_point
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.attempts import identity
from adbs_lab.search import tune_staging
from adbs_lab.stores.tracking_store import (
    EXPERIMENT_KIND,
    MODEL_TRAINING,
    NOTE,
    NOTE_MAX,
    RUNS_FILE,
    TABLE_MD,
    VIEW_TAG,
    _Patient,
    load_runs,
    note_with_table,
    runs_view,
)
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY
from adbs_lab.stores.paths import artifact_root
from adbs.redaction import redact, reveal
from adbs_lab.records.objectives import from_tag
from adbs_lab.records.tune_keys import LAB_KEYS, SEED_KEY, describe, trial_config
from adbs_lab.records.trial_records import base_boundaries, is_shadow_report

if TYPE_CHECKING:
    from ray.tune.stopper import Stopper

_IN_TUNE: weakref.WeakValueDictionary[str, MlflowTracker] = weakref.WeakValueDictionary()
"""Parent run id -> the tracker Ray Tune set up for that study in this process (MlflowTracker.in_tune)."""


class MlflowTracker(Callback):
    FLUSH_S = 5.0
    """A trial's metric points wait at most this long in the driver before one log_batch writes them (also at
    each of its checkpoints and at its end): one store commit per trial of tracking-only reports instead of one
    per report (a third of the driver's CPU at 100 trials, docs/benchmarks.md), and still a live curve in the
    MLflow UI for a real trial, whose epochs are seconds apart."""
    BATCH = 1000  # MLflow's limit of metrics in one log_batch (MAX_METRICS_PER_BATCH of the mlflow package)

    def __init__(self, *, uri: str, study: str, folder: str, study_dir: Path, run_name: str, tags: dict[str, str],
                 varying: list[str], resume: bool, ends=None, storage: str | None = None,
                 description: str = "", experiment: str | None = None) -> None:
        """`folder`: the study's folder name (study_folder.rebound); `ends`: how trials ended (StudySearch);
        `experiment`: its MLflow experiment (default `study`; StudyOptions.experiment: `<study>-smoke` for --smoke);
        `storage`: the study's --storage, where a database store's artifacts go (adbs_lab/stores/paths.py: artifact_root);
        `description`: the parent run's description (Markdown), shown by the MLflow UI above its details."""
        self.uri, self.study, self.folder, self.study_dir = uri, study, folder, Path(study_dir)
        self.experiment = experiment or study
        self.storage = storage
        self.description = description
        self.run_name, self.tags, self.varying = run_name, tags, varying
        self.resume, self.ends = resume, ends
        self._client = None
        self.parent_run_id: str | None = None
        self.experiment_id: str | None = None
        self._sessions: dict[str, dict[int, dict]] = {}  # trial id -> session -> its metrics (session_curve.png)
        self._last_step: dict[tuple[str, str], int] = {}  # (trial id, prefix) -> last step logged
        self._pending: dict[str, tuple[float, list]] = {}  # trial id -> (when the first waited, Metric points)
        self.start()
        # made just before Tune's fit(): no other study on this machine starts its fit() in the same second
        tune_staging.hold()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_pending")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from adbs_lab.stores.study_folder import rebound

        self.__dict__.update({"experiment": state.get("study"), **state})  # pickled before `experiment` existed
        self._client = None
        self._pending = {}
        # --resume elsewhere: this driver's staging folder (study_folder.rebind)
        self.study_dir = rebound(self.folder, "study_dir", self.study_dir)
        # and the MLflow store this command names (a copied store, a rotated password, a moved server): the resumed
        # trials are logged where the user says, not to the URI pickled when the study started (which kept only its
        # redacted text anyway: adbs/redaction.py, SecretUrl)
        self.uri = rebound(self.folder, "tracking_uri", self.uri)

    @property
    def client(self):
        if self._client is None:
            from mlflow.tracking import MlflowClient

            self._client = _Patient(MlflowClient(reveal(self.uri)))  # a SecretUrl: the URL it hides
        return self._client

    # -- parent run ------------------------------------------------------------------
    def start(self) -> None:
        """Experiment and parent run; on --resume the interrupted invocation's parent run is reopened."""
        exp = self.client.get_experiment_by_name(self.experiment)
        self.experiment_id = exp.experiment_id if exp else self._create_experiment()
        if exp is not None and exp.tags.get(EXPERIMENT_KIND) is None:  # made before this tag was set
            self.client.set_experiment_tag(self.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
        runs = load_runs(self.study_dir)
        if self.resume and runs.get("parent"):
            self.parent_run_id = runs["parent"]
            self.client.update_run(self.parent_run_id, status="RUNNING")
        else:
            run = self.client.create_run(self.experiment_id, run_name=self.run_name,
                                         tags={**self.tags, "adbs.role": "study", "adbs.study": self.study,
                                               **({NOTE: self.description[:NOTE_MAX]} if self.description else {})})
            self.parent_run_id = run.info.run_id
            runs = {"parent": self.parent_run_id, "trials": {}, "ended": {}}
        self._name_experiment()
        self._runs = runs
        self._save()

    def _name_experiment(self) -> None:
        """What the MLflow UI shows of the experiment before any click: the study's description above its runs (this
        invocation's: several --name studies share one experiment), and the view of this invocation's trials
        (tracking_store.runs_view: their session curves; the objectives, the searched parameters, the seed as
        columns), which the links adbs_lab/stores/serve.py prints open."""
        params = [k for k in self.varying if k not in LAB_KEYS]
        self.client.set_experiment_tag(self.experiment_id, VIEW_TAG,
                                       runs_view(params, [o.key for o in from_tag(self.tags)], self.parent_run_id))
        if self.description:
            self.client.set_experiment_tag(self.experiment_id, NOTE, self.description[:NOTE_MAX])

    def _create_experiment(self) -> str:
        """The study's experiment, made now; when another study of the same name (another --name) made it between
        our look-up and now (two studies started together: bench/load.py found it), that one."""
        try:
            return self.client.create_experiment(self.experiment, artifact_location=artifact_root(self.uri, self.storage),
                                                 tags={EXPERIMENT_KIND: MODEL_TRAINING})
        except Exception as e:  # noqa: BLE001 - MlflowException (RESOURCE_ALREADY_EXISTS) or the database's error
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None or "already exists" not in str(e) and "UNIQUE constraint" not in str(e):
                raise
            return exp.experiment_id

    def _save(self) -> None:
        self.study_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.study_dir / (RUNS_FILE + ".tmp")
        tmp.write_text(json.dumps(self._runs, indent=1))
        tmp.replace(self.study_dir / RUNS_FILE)

    def log_params(self, params: dict[str, Any]) -> None:
        """The study's own settings on the parent run."""
        from mlflow.entities import Param

        self.client.log_batch(self.parent_run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])

    def finish(self, status: str = "FINISHED", artifacts: Sequence[Path] = (),
               metrics: dict[str, float] | None = None) -> None:
        """Attach the study's files and its study/* metrics (best objective, trial counts, wall time) to the parent run."""
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        if metrics:
            self.client.log_batch(self.parent_run_id,
                                  metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items() if K.finite(v)])
        for a in artifacts:
            if Path(a).exists():
                self.client.log_artifact(self.parent_run_id, str(a))
        table = next((Path(a) for a in artifacts if Path(a).name == TABLE_MD and Path(a).exists()), None)
        if table is not None:  # the run's description: what the study searched, then what it found
            self.client.set_tag(self.parent_run_id, NOTE, note_with_table(getattr(self, "description", ""),
                                                                          table.read_text()))
        self.client.set_terminated(self.parent_run_id, status=status)

    def close_open_runs(self) -> int:
        """Trial runs still RUNNING when the study stops (Ctrl-C, SIGTERM, a full disk): KILLED, state
        INTERRUPTED; `--resume` reopens them. Returns how many."""
        self.flush()
        n = 0
        for run_id in self._runs["trials"].values():
            if self.client.get_run(run_id).info.status == "RUNNING":
                self.client.set_tag(run_id, "adbs.state", K.INTERRUPTED)
                self.client.set_terminated(run_id, status="KILLED")
                n += 1
        return n

    def setup(self, stop: Stopper | None = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        tune_staging.release()  # Tune has named its staging folder by now (adbs_lab/search/tune_staging.py)
        self._orphans_checked = False
        # After Tuner.restore this callback is the one unpickled from the interrupted run:
        # the run-id map on disk is the current one.
        self._runs = load_runs(self.study_dir)
        self.parent_run_id = self._runs.get("parent") or self.parent_run_id
        if self.parent_run_id:
            _IN_TUNE[self.parent_run_id] = self

    def in_tune(self) -> MlflowTracker:
        """The tracker Ray Tune runs for this study: on --resume the one it unpickled from its tuner.pkl
        (ray/tune/tuner.py: restore), not this one, which the driver made; that one holds the metric points still
        waiting (FLUSH_S) and the runs of the trials it started, so the study's end and an interruption (a second
        Ctrl-C ends fit without on_experiment_end) flush and close through it. This one until Tune set one up."""
        twin = _IN_TUNE.get(self.parent_run_id or "")
        return twin if twin is not None else self

    def on_step_begin(self, iteration, trials, **info) -> None:
        """Once per fit: runs of trials that Tune does not know. A driver killed after a trial started (its run
        made and recorded here) but before Tune saved its state comes back without that trial, and --resume runs
        its configuration again as another trial (adbs_lab/search/searcher.py: _adopt_orphans); the first run would
        stay RUNNING with part of the metrics beside the new one (bench/load.py --kill). It is closed as KILLED, state
        INTERRUPTED, tagged adbs.orphaned, moved out of the trial map, and marked superseded when its trial's rerun
        starts (adbs_lab/driver/reruns.py)."""
        self.flush_waiting()
        if getattr(self, "_orphans_checked", True):
            return
        self._orphans_checked = True
        if reruns.close_orphans(self.client, self.experiment_id, self.parent_run_id, self._runs,
                                {t.trial_id for t in trials}):
            self._save()
        self._awaiting = reruns.awaiting_rerun(self.client, self._runs)

    # -- trial runs ------------------------------------------------------------------
    def trial_run_id(self, trial_id: str) -> str | None:
        return self._runs["trials"].get(trial_id)

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        from mlflow.entities import Param

        run_id = self.trial_run_id(trial.trial_id)
        if run_id:  # restored trial: continue its run (fault tolerance); how it ended before no longer holds
            self.ends.reopen(trial.trial_id)
            if self._runs.setdefault("ended", {}).pop(trial.trial_id, None):
                self._save()
            self.client.update_run(run_id, status="RUNNING")
            self._read_logged_steps(trial.trial_id, run_id)
            return
        cfg = trial_config(trial.config)
        tags = {
            "mlflow.parentRunId": self.parent_run_id,
            "adbs.role": "trial",
            "adbs.study": self.study,
            "adbs.trial_id": trial.trial_id,
            "adbs.optuna_trial": str(trial.config.get(OPTUNA_TRIAL_KEY, "")),
            "adbs.state": "RUNNING",
            "adbs.code_version": self.tags.get("adbs.code_version", "unknown"),
        }
        label_keys = [k for k in self.varying if k != SEED_KEY]
        tags["adbs.label"] = describe(trial.config, label_keys) if label_keys else "all"  # paper-table row
        run = self.client.create_run(self.experiment_id, run_name=describe(trial.config, self.varying), tags=tags)
        params = [Param(k, json.dumps(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in cfg.to_dict().items()]
        self.client.log_batch(run.info.run_id, params=params)
        self._log_trial_artifacts(run.info.run_id, config=cfg.to_dict())
        self._runs["trials"][trial.trial_id] = run.info.run_id
        reruns.supersede(self.client, self._runs, getattr(self, "_awaiting", {}),  # the attempt a killed driver left
                         identity(tags["adbs.optuna_trial"], tags["adbs.label"], cfg.seed), run.info.run_id)
        self._save()

    def _read_logged_steps(self, trial_id: str, run_id: str) -> None:
        """The last step of each prefix that the reopened run already holds, read from MLflow itself.

        A driver killed with SIGKILL comes back with the callback state Tune pickled seconds before, so
        its own record may miss steps it logged after that (a fast trial can log all its sessions in
        between); the run in the store is the record that survives."""
        metrics = self.client.get_run(run_id).data.metrics
        for prefix in (K.BASE, K.SESSION, K.SUMMARY):
            steps = [m.step for key in metrics if key.startswith(prefix)
                     for m in self.client.get_metric_history(run_id, key)]
            if steps:
                last = self._last_step.get((trial_id, prefix), -1)
                self._last_step[(trial_id, prefix)] = max(last, *steps)

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        from mlflow.entities import Metric

        run_id = self.trial_run_id(trial.trial_id)
        if run_id is None:
            return
        kind = result.get(K.REPORT_KIND)
        if kind == K.KIND_BASE:
            prefix, step = K.BASE, int(result[K.BASE_STEP])
        elif kind == K.KIND_SESSION:
            prefix, step = K.SESSION, int(result[K.SESSION_STEP])
            # kept for the trial's session_curve.png
            self._sessions.setdefault(trial.trial_id, {})[step] = K.strip(K.SESSION, result)
        elif kind == K.KIND_SUMMARY:
            prefix, step = K.SUMMARY, 0
        else:
            return
        # A trial restarted from its checkpoint re-reports the steps between that checkpoint and
        # the crash (and its summary, if it had ended but Tune had not saved that); they are identical
        # (deterministic resume), so log each step once.
        if step <= self._last_step.get((trial.trial_id, prefix), -1):
            return
        self._last_step[(trial.trial_id, prefix)] = step
        ts = int(time.time() * 1000)
        metrics = [Metric(k, float(v), ts, step) for k, v in result.items()
                   if isinstance(k, str) and k.startswith(prefix) and k not in (K.BASE_STEP, K.SESSION_STEP)
                   and K.finite(v)]
        if metrics:
            since, points = self._pending.setdefault(trial.trial_id, (time.monotonic(), []))
            points.extend(metrics)
            if time.monotonic() - since >= self.FLUSH_S:
                self.flush(trial.trial_id)
        if kind == K.KIND_BASE:
            pause_point("base_session", seed=trial_config(trial.config).seed)

    def flush(self, trial_id: str | None = None) -> None:
        """Write the metric points waiting for one trial (or for all): a trial's points reach the store before
        Tune records a checkpoint of it (on_checkpoint), so a restarted trial, which reports again from its
        checkpoint on, never leaves a gap (_read_logged_steps reads the store)."""
        for tid in [trial_id] if trial_id is not None else list(self._pending):
            _, points = self._pending.pop(tid, (0.0, []))
            run_id = self.trial_run_id(tid)
            for i in range(0, len(points) if run_id else 0, self.BATCH):
                self.client.log_batch(run_id, metrics=points[i:i + self.BATCH])

    def flush_waiting(self) -> None:
        """Write the points of every trial that have waited FLUSH_S: Tune calls on_step_begin many times a second,
        and a trial's next report may be a base epoch (minutes on a CPU) away, which left its last point out of the
        MLflow UI's live curve until then."""
        now = time.monotonic()
        for tid in [tid for tid, (since, _) in self._pending.items() if now - since >= self.FLUSH_S]:
            self.flush(tid)

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info) -> None:
        # Tune calls this after on_trial_result of the report the checkpoint rides with, and before its next
        # save of the experiment state names the checkpoint (ray/tune/execution/tune_controller.py)
        self.flush(trial.trial_id)

    def on_experiment_end(self, trials, **info) -> None:
        self.flush()

    def _log_trial_artifacts(self, run_id: str, **data) -> None:
        """config.json at the start; session_curve.png and boundaries.csv at the end."""
        from adbs_lab.results import run_files

        try:
            with tempfile.TemporaryDirectory() as tmp:
                for f in run_files.write_trial_artifacts(Path(tmp), **data):
                    self.client.log_artifact(run_id, str(f))
        except Exception as e:  # noqa: BLE001 - a missing picture must not fail the study
            # MLflow's error may quote the tracking URI
            print(f"warning: artifacts of run {run_id} not logged: {redact(str(e))}", flush=True)

    def _end(self, trial, state: str, reason: str | None = None) -> None:
        self.flush(trial.trial_id)
        self._runs.setdefault("ended", {})[trial.trial_id] = state  # the tables' record (adbs_lab/study.py)
        self._save()
        pause_point("writing_results", seed=trial_config(trial.config).seed)
        run_id = self.trial_run_id(trial.trial_id)
        if run_id is None:
            return
        from adbs_lab.records.metrics_keys import BOUNDARIES_KEY, EMBEDDINGS_KEY

        sessions = [v for _, v in sorted(self._sessions.pop(trial.trial_id, {}).items())]
        boundaries = (trial.last_result or {}).get(BOUNDARIES_KEY)
        self._log_trial_artifacts(run_id, sessions=sessions, boundaries=json.loads(boundaries) if boundaries else None,
                                  title=f"{self.study}: {describe(trial.config, self.varying)}",
                                  embeddings=(trial.last_result or {}).get(EMBEDDINGS_KEY))
        self.client.set_tag(run_id, "adbs.state", state)
        if is_shadow_report(state, trial.last_result):  # pruned, run on to measure the pruner (search/shadows.py)
            self.client.set_tag(run_id, "adbs.shadow", "true")
        base_m = base_boundaries(boundaries)
        if base_m:  # the boundary study's histograms, rebuilt from the store by studies/report.py
            self.client.set_tag(run_id, "adbs.base_boundaries", base_m[:8000])
        warning = (trial.last_result or {}).get(K.WARNING)
        if warning:  # the collapsed boundary regime (adbs.metrics.collapse_warnings); trials.parquet has it too
            self.client.set_tag(run_id, "adbs.warning", warning[:4000])
        if reason:
            reason = redact(reason)  # a traceback may quote a URL with its credentials (adbs/redaction.py)
            self.client.set_tag(run_id, "adbs.error", reason[:4000])
            if len(reason) > 4000:  # a long traceback whole, beside the tag's first 4000 characters
                self.client.log_text(run_id, reason, "error.txt")
        status = {K.COMPLETE: "FINISHED", K.PRUNED: "KILLED", K.DIVERGED: "FAILED", K.FAILED: "FAILED"}[state]
        self.client.set_terminated(run_id, status=status)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        state = self.ends.ended(trial)  # as StudySearch classified it when Tune told it the trial ended
        reason = (trial.last_result or {}).get(K.ERROR)
        if state == K.FAILED and not reason:
            reason = "the trial ended without a finite objective"
        self._end(trial, state, reason=reason)
        looks = getattr(self.ends, "looks_taken", lambda: 0)()  # --seeds auto: the searcher took a look on its end
        if looks > getattr(self, "_looks", 0):
            self._looks = looks
            pause_point("between_looks", seed=trial_config(trial.config).seed)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        # the full traceback (Tune's error file) goes to MLflow; the terminal shows its last line (adbs_lab/driver/progress.py)
        from adbs_lab.driver.outcome import trial_error

        self._end(trial, K.FAILED, reason=trial_error(trial) or "the trial raised an error (no traceback saved)")
