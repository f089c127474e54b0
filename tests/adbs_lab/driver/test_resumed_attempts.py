"""A study's driver killed at a named moment, then --resume'd, played in this process with stub trials: the real
searcher (StudySearch, Optuna in a SQLite storage), the real MLflow tracker (MlflowTracker, a SQLite store), and Ray
Tune's part by hand, as Tune does it (each trial's callbacks in Tune's order; its experiment state saved when a
trial ends, so a trial started since is unknown to the resumed study; on --resume the searcher and the tracker
unpickled from tuner.pkl, the searcher restored from its saved state). The kill is SIGKILL's: what the store and
the files hold stays, what the driver held in memory is gone.

The moments: in a trial's base session, between two looks of --seeds auto (the look just taken), while the tracker
writes a trial's results, and after the searcher told Optuna the value of a configuration asked for since Tune last
saved its state. The shapes: a fixed seed list, --seeds auto over rows (both grids), a sampled race, a sampled search
over a seed list. After --resume, the tables studies/report.py rebuilds from the store (adbs_lab/results/from_store.py)
equal the study's own (Tune's results), and so do the best configuration and every verdict; the killed attempts are
marked superseded by their reruns in MLflow (a configuration the searcher had told Optuna runs again too, under its
own Optuna trial: adbs_lab/search/orphans.py); a store written before those tags existed reads the same. The Optuna
storage, what optuna-dashboard shows, holds one trial per configuration the study ran, with its seeds and their mean,
no sampled value twice, trial for trial as the same study run without a kill. studies/report.py over the store, with
Ray and a real SIGKILL: tests/e2e/test_sigkill_and_report.py."""

from __future__ import annotations

import dataclasses
import json
import pickle
from types import SimpleNamespace

import optuna
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from adbs.config import Config
from adbs_lab.driver.tracker import MlflowTracker
from adbs_lab.records import metrics_keys as K
from adbs_lab.records import objectives, trial_records
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY
from adbs_lab.records.tune_keys import RACE_OF, ROW_KEY, SEED_KEY, SEEDS_ATTR
from adbs_lab.results import from_store, tables
from adbs_lab.search import space as sp
from adbs_lab.search import tune_staging
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.samplers import TrialSeededTPE
from adbs_lab.search.searcher import StudySearch
from adbs_lab.stats.looks import Looks
from adbs_lab.stores.tracking_store import load_runs
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.seeds import race, until_resolved

STUDY = "s"
ROWS = {"ref": {"alpha": 0.1}, "a": {"alpha": 0.2}, "b": {"alpha": 0.3}}
# last-session accuracy by row and seed (b - ref: 3, 6, 9, then 6, 6)
LAST = {"ref": [50.0, 50.2, 49.8, 50.1, 49.9], "a": [60.0, 60.3, 59.9, 60.2, 60.0],
        "b": [53.0, 56.2, 58.8, 56.1, 55.9]}


BASE = Config(keep_embeddings=False)  # no embedding sample to look for in the store per trial: seconds


@dataclasses.dataclass(frozen=True)
class Shape:
    """One kind of study: how its searcher is made, and what its table compares."""

    name: str
    rows: tuple[str, ...] = ()
    """The grid's rows; none: a sampled search (Optuna's TPE over alpha)."""
    seeds: tuple[int, ...] = ()
    auto: bool = False
    race: bool = False
    """--seeds auto on a sampled search."""
    total: int = 0
    """Tune's num_samples: the trials it makes at most (a seed list's searcher never says it is done)."""
    told: int = 1
    """"after_tell": the driver is killed once the searcher has told Optuna this many configurations asked for since
    Tune last saved its state (a race: the screening's last, whose end named the contenders and made their race's
    Optuna trials)."""

    @property
    def sampled(self) -> bool:
        return not self.rows

    @property
    def space(self) -> dict:
        return {"alpha": FloatDistribution(0.01, 0.1, log=True)} if self.sampled else {ROW_KEY: list(self.rows)}

    @property
    def varying(self) -> list[str]:
        return ["alpha" if self.sampled else ROW_KEY, SEED_KEY]

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((row, "ref") for row in self.rows if row != "ref")

    @property
    def looks(self) -> Looks | None:
        return Looks(max_seeds=5) if self.auto else None

    def searcher(self, url: str) -> StudySearch:
        if self.race:  # 3 samples on seed 0, the best 2 race on 3 fresh seeds
            plan = race(Looks(max_seeds=3), top=2, samples=3, delta=1.0)
            s = StudySearch(sp.optuna_distributions(self.space), storage_url=url, study_name=STUDY,
                            sampler=TrialSeededTPE(seed=0), trial=sp.TrialMaker(BASE), policy=plan)
        elif self.sampled:  # 3 samples x the seed list
            s = StudySearch(sp.optuna_distributions(self.space), storage_url=url, study_name=STUDY,
                            sampler=TrialSeededTPE(seed=0), policy=SeedList(tuple(self.seeds)),
                            trial=sp.TrialMaker(BASE))
        else:
            policy = (until_resolved(Looks(max_seeds=5), self.rows, self.pairs, 1.0, (ROW_KEY,)) if self.auto else
                      SeedList(tuple(self.seeds)))
            s = StudySearch(sp.optuna_distributions(self.space), storage_url=url, study_name=STUDY,
                            sampler=optuna.samplers.GridSampler(sp.grid_points(self.space), seed=0),
                            policy=policy, trial=sp.TrialMaker(BASE, ROWS))
        s.set_search_properties(None, None, {})
        return s

    def tags(self) -> dict[str, str]:
        """The parent run's tags that studies/report.py reads the table's layout from (adbs_lab/driver/launch.py)."""
        looks = {"adbs.looks": json.dumps(dataclasses.asdict(self.looks))} if self.looks else {}
        return {"adbs.baseline": "" if self.sampled else "ref", "adbs.order": json.dumps(list(self.rows)),
                "adbs.comparisons": json.dumps([list(p) for p in self.pairs]), "adbs.resolve": "1", **looks,
                objectives.TAG: json.dumps(objectives.texts(objectives.DEFAULT)),
                **VerdictPolicy(delta=1.0, pairs=self.pairs, looks=self.looks).tags()}  # as launch.py records it

    def table(self, sessions: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
        """The study's table as it makes it (adbs_lab/driver/summarise.py: _tables)."""
        return tables.paper_table(sessions, baseline=None if self.sampled else "ref", order=list(self.rows) or None,
                                  trials=trials, verdicts=VerdictPolicy(pairs=tuple(self.pairs), looks=self.looks))


# a seed list (rows x 2 seeds), --seeds auto over rows (b - ref resolved at the second look), a sampled race, a sampled
# search over a seed list (3 samples x 2 seeds)
SHAPES = [Shape("seed_list", rows=("ref", "a", "b"), seeds=(0, 1), total=6),
          Shape("seeds_auto", rows=("ref", "b"), auto=True, total=10),
          Shape("sampled_race", race=True, total=9, told=2),
          Shape("sampled", seeds=(0, 1), total=6)]


class Killed(BaseException):
    """SIGKILL of the driver: nothing after this runs, nothing it held in memory is kept."""


def _reports(trial) -> list[dict]:
    """What the trainable reports for a stub trial (adbs_lab/search/trainable.py): two base epochs, two sessions, the
    summary; its last-session accuracy is LAST's for a row, rises with alpha for a sampled value."""
    cfg = trial.config
    row, seed = cfg.get(ROW_KEY), int(cfg[SEED_KEY])
    last = LAST[row][seed] if row else 1000.0 * float(cfg["alpha"]) + 0.3 * ((seed * 7) % 3 - 1)
    out: list[dict] = [{**K.base({"epoch": e, "val_acc": last / 2 * e, "train_loss": 1.0 / e}), K.OBJECTIVE: float("nan"),
                        K.REPORT_KIND: K.KIND_BASE} for e in (1, 2)]
    out += [{**K.session({"session": s, "n_classes": 60 + 5 * s, "val_acc": last + 3 * (1 - s), "test_acc": last + 3 * (1 - s),
                          "test_base_acc": last, "test_novel_acc": last - 10}), K.OBJECTIVE: float("nan"),
             K.REPORT_KIND: K.KIND_SESSION} for s in (0, 1)]
    out.append({**K.summary({"val_avg_acc": last + 1.5, "test_avg_acc": last + 1.5, "val_last_acc": last,
                             "test_last_acc": last, "wall_time_s": 1.0}), K.REPORT_KIND: K.KIND_SUMMARY, K.WARNING: ""})
    for i, r in enumerate(out):
        r.update(trial_id=trial.trial_id, timestamp=trial.started + i, time_total_s=float(i))
    return out


class Study:
    """One study's driver, its Ray Tune played by hand (see the module's docstring)."""

    def __init__(self, shape: Shape, tmp_path, uri: str | None, kill_at: str | None):
        """`uri`: the MLflow store; None: no tracker (the study's Optuna storage alone is looked at)."""
        self.shape, self.dir, self.uri, self.kill_at = shape, tmp_path / STUDY, uri, kill_at
        self.trials: dict[str, SimpleNamespace] = {}  # Tune's trials, in the order it made them
        self.reports: dict[str, list[dict]] = {}
        self.saved: tuple[list[str], set[str]] = ([], set())  # Tune's saved state: its trials, those that ended
        self.checkpoint = str(tmp_path / "searcher.pkl")
        self.clock = 1_000_000
        self.made = 0  # Tune trials made, for their ids
        self.optuna_url = f"sqlite:///{tmp_path / 'optuna.db'}"

    def tracker(self, searcher, resume: bool):
        if self.uri is None:
            return _Untracked()
        return MlflowTracker(uri=self.uri, study=STUDY, folder=STUDY, study_dir=self.dir, run_name="s",
                             tags=self.shape.tags(), varying=self.shape.varying, resume=resume, ends=searcher)

    def start(self) -> None:
        searcher = self.shape.searcher(self.optuna_url)
        tracker = self.tracker(searcher, resume=False)
        self.tuner_pkl = pickle.dumps((searcher, tracker))  # what Tune keeps of them in tuner.pkl
        self._save(searcher)
        try:
            self._fit(searcher, tracker, [])
        except Killed:
            return
        tracker.finish()

    def resume(self) -> None:
        searcher, tracker = pickle.loads(self.tuner_pkl)  # Tuner.restore unpickles both
        searcher.restore(self.checkpoint)
        self.tracker(searcher, resume=True)  # the resumed driver's own: it reopens the study's parent run
        known, ended = self.saved
        self.trials = {tid: self.trials[tid] for tid in known}
        self._fit(searcher, tracker, [self.trials[tid] for tid in known if tid not in ended])
        tracker.finish()

    def _save(self, searcher) -> None:
        searcher.save(self.checkpoint)
        self.saved = (list(self.trials), {tid for tid, t in self.trials.items() if t.ended})

    def _fit(self, searcher, tracker, unfinished: list) -> None:
        tracker.setup()
        while True:
            tracker.on_step_begin(0, list(self.trials.values()))
            if unfinished:  # Tune restarts the trials its saved state holds unfinished, under their own ids
                trial = unfinished.pop(0)
            elif len(self.trials) == self.shape.total:
                break
            else:
                tid, self.made = f"t{self.made}", self.made + 1
                config = searcher.suggest(tid)
                if not isinstance(config, dict):
                    break
                trial = self.trials[tid] = SimpleNamespace(trial_id=tid, config=config, last_result=None, ended=False)
            self._run(searcher, tracker, trial)
            if self.kill_at != "after_tell" or sum(t.ended for t in self.trials.values()) == 1:
                # a trial ended: Tune's next save of its experiment state holds it; before "after_tell", Tune saves
                # after the first trial only (its periodic save outpaced by fast trials, TUNE_GLOBAL_CHECKPOINT_S)
                self._save(searcher)
        tracker.on_experiment_end(list(self.trials.values()))

    def _run(self, searcher, tracker, trial) -> None:
        self.clock += 100
        trial.started = self.clock
        tracker.on_trial_start(0, [], trial)
        self.reports[trial.trial_id] = reports = _reports(trial)
        for report in reports:
            trial.last_result = report
            tracker.on_trial_result(0, [], trial, report)
            if self.kill_at == "base_session" and report.get(K.BASE_STEP) == 1 and \
                    trial.config[SEED_KEY] == (3 if self.shape.auto else 1):  # --seeds auto: a seed its look added
                raise Killed
        looks = self._looks(searcher)
        searcher.on_trial_complete(trial.trial_id, result=trial.last_result)  # Tune tells its searcher first
        tracker.on_trial_complete(0, [], trial)
        trial.ended = True
        if self.kill_at == "after_tell" and self._told_since_save(trial):
            raise Killed  # the searcher told Optuna a configuration asked for since Tune last saved its state
        if self.kill_at == "between_looks" and self._looks(searcher) > looks and looks == 0:
            raise Killed  # the first look was taken on this trial's end; the next batch has not started

    def _told_since_save(self, trial) -> bool:
        """Whether the searcher has told `shape.told` configurations that Tune's saved state does not know."""
        known = {self.trials[tid].config[OPTUNA_TRIAL_KEY] for tid in self.saved[0]}
        return sum(number not in known and state != "RUNNING"
                   for number, state, *_ in optuna_record(self.optuna_url)) >= self.shape.told

    def _looks(self, searcher) -> int:
        return len(searcher.standing().looks)

    def own_tables(self):
        """The study's own records (adbs_lab/driver/summarise.py: _tables): Tune's results, its runs file."""
        results = [SimpleNamespace(config=t.config, metrics={**t.last_result, "done": True}, error=None,
                                   metrics_dataframe=pd.DataFrame(self.reports[tid]), path=f"/tune/{tid}")
                   for tid, t in self.trials.items()]
        recs = trial_records.from_results(results, varying=self.shape.varying, runs=load_runs(self.dir))
        return trial_records.frames(recs)


class _Untracked:
    """No MLflow tracker: Tune's callbacks do nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def optuna_record(url: str) -> list[tuple]:
    """The study's Optuna trials as the dashboard shows them: number, state, parameters, values, seeds, race_of."""
    return [(t.number, t.state.name, t.params, t.values, t.user_attrs.get(SEEDS_ATTR), t.user_attrs.get(RACE_OF))
            for t in optuna.load_study(study_name=STUDY, storage=url).trials if t.state != TrialState.WAITING]


def _killed_writing_results(monkeypatch, nth: int) -> None:
    """The tracker writes a trial's results (`_end`): the runs file says how it ended, then its artifacts, tags and
    status follow; the driver is killed as the `nth` trial's artifacts are written."""
    ends = []

    def artifacts(self, run_id, **data):
        if "sessions" in data:
            ends.append(run_id)
            if len(ends) == nth:
                raise Killed

    monkeypatch.setattr(MlflowTracker, "_log_trial_artifacts", artifacts)


def _identity(run) -> tuple[str, str, str]:
    """A trial's run named as the tracker names its trial: Optuna trial, configuration, seed."""
    return run.data.tags["adbs.optuna_trial"], run.data.tags["adbs.label"], run.data.params["seed"]


POINTS = ("base_session", "between_looks", "writing_results", "after_tell")
CASES = [(shape, point) for shape in SHAPES for point in POINTS
         if point == "after_tell" or (shape.name, point) in (("seed_list", "base_session"), ("seed_list", "writing_results"),
                                                             ("seeds_auto", "base_session"), ("seeds_auto", "between_looks"),
                                                             ("sampled_race", "between_looks"),
                                                             ("sampled_race", "writing_results"))]


@pytest.mark.parametrize("shape,point", CASES, ids=[f"{s.name}-{p}" for s, p in CASES])
def test_a_study_killed_and_resumed_reports_from_the_store_what_it_reported_itself(shape, point, tmp_path,
                                                                                   tracking_uri, monkeypatch):
    monkeypatch.setattr(tune_staging, "hold", lambda: None)
    monkeypatch.setattr(tune_staging, "release", lambda: None)
    # the tracker's private _log_trial_artifacts: a trial's config.json and figures are nothing a reader counts, and
    # drawing them costs a second a trial; "while writing results" kills the driver in it
    monkeypatch.setattr(MlflowTracker, "_log_trial_artifacts", lambda self, run_id, **data: None)
    if point == "writing_results":
        _killed_writing_results(monkeypatch, 2)
    study = Study(shape, tmp_path, tracking_uri, point)
    study.start()
    study.kill_at = None
    study.resume()

    client = MlflowClient(tracking_uri)
    runs = [r for r in from_store.trial_runs(client, from_store.find_parent(client, STUDY))]
    orphans = [r for r in runs if "adbs.orphaned" in r.data.tags]
    assert orphans, "the kill left no attempt behind: the case tests nothing"
    sessions, trials = study.own_tables()
    ours = from_store.load_study(client, STUDY)
    assert len(ours.trials) == len(trials) == len(runs) - len(orphans)
    assert tables.format_table(from_store.study_table(ours)) == tables.format_table(shape.table(sessions, trials))
    best = tables.best_config(trials, objectives.DEFAULT)
    assert tables.best_config(ours.trials, objectives.DEFAULT)["config_label"] == best["config_label"]
    assert (ours.trials["state"] == K.COMPLETE).all()
    _optuna_holds_the_study(shape, study, trials, tmp_path)

    # each attempt left behind names the run that holds its trial now: every one ran again (a configuration the
    # searcher had told Optuna too)
    standing = {_identity(r): r.info.run_id for r in runs if "adbs.orphaned" not in r.data.tags}
    for r in orphans:
        assert r.info.status == "KILLED" and r.data.tags["adbs.state"] == K.INTERRUPTED
        assert r.data.tags.get("adbs.superseded_by") == standing[_identity(r)]
    assert load_runs(study.dir).get("superseded", {}) == {
        r.info.run_id: r.data.tags["adbs.superseded_by"] for r in orphans if "adbs.superseded_by" in r.data.tags}

    # a store written before adbs.superseded_by existed, then before adbs.orphaned did (its first attempts closed, or
    # left RUNNING): the same trials, by their identity alone
    expected = tables.format_table(from_store.study_table(ours))
    for tag in ("adbs.superseded_by", "adbs.orphaned"):
        for r in orphans:
            if "adbs.superseded_by" in r.data.tags:
                client.delete_tag(r.info.run_id, tag)
        assert tables.format_table(from_store.study_table(from_store.load_study(client, STUDY))) == expected, tag


def test_the_tracker_pauses_at_the_named_points_where_these_kills_happen(tmp_path, tracking_uri, monkeypatch):
    """ADBS_FAULT_INJECTION's points in the driver (adbs/light.py: pause_point), where
    tests/e2e/test_sigkill_and_report.py kills a real driver: in a trial's base session (each base report), while
    writing a trial's results (its end recorded in the runs file, its MLflow tags not yet), between looks (a trial's
    end took a look of --seeds auto); each with the trial's seed, which the injection may name."""
    from adbs_lab.driver import tracker as tracker_module
    from adbs_lab.records.tune_keys import CONFIG_KEY

    calls: list[tuple[str, dict]] = []
    monkeypatch.setattr(tracker_module, "pause_point", lambda name, **facts: calls.append((name, facts)))
    monkeypatch.setattr(MlflowTracker, "_log_trial_artifacts", lambda self, run_id, **data: None)
    looks = [0]
    ends = SimpleNamespace(ended=lambda trial: K.COMPLETE, reopen=lambda tid: None, looks_taken=lambda: looks[0])
    t = MlflowTracker(uri=tracking_uri, study=STUDY, folder=STUDY, study_dir=tmp_path / STUDY, run_name="s", tags={},
                      varying=[SEED_KEY], resume=False, ends=ends)
    for seed, took_a_look in ((0, False), (1, True)):
        trial = SimpleNamespace(trial_id=f"t{seed}", config={CONFIG_KEY: Config(seed=seed), SEED_KEY: seed},
                                last_result=None, started=seed)
        t.on_trial_start(0, [], trial)
        for report in _reports(SimpleNamespace(trial_id=trial.trial_id, config={**trial.config, "alpha": 0.05},
                                               started=seed)):
            trial.last_result = report
            t.on_trial_result(0, [], trial, report)
        looks[0] += took_a_look
        t.on_trial_complete(0, [], trial)
    assert calls == [("base_session", {"seed": 0})] * 2 + [("writing_results", {"seed": 0})] \
        + [("base_session", {"seed": 1})] * 2 + [("writing_results", {"seed": 1}), ("between_looks", {"seed": 1})]
    assert load_runs(tmp_path / STUDY)["ended"] == {"t0": K.COMPLETE, "t1": K.COMPLETE}


def test_a_named_point_pauses_only_where_its_facts_match(tmp_path, monkeypatch):
    import threading
    import time

    from adbs.light import pause_point
    from adbs_lab.search.trainable import FAULT_ENV

    monkeypatch.setenv(FAULT_ENV, json.dumps({"pause_at": "base_session", "seed": 2, "marker_dir": str(tmp_path)}))
    pause_point("base_session", seed=1)  # another trial's: no pause
    pause_point("writing_results", seed=2)  # another point
    assert not list(tmp_path.iterdir())
    threading.Thread(target=pause_point, args=("base_session",), kwargs={"seed": 2}, daemon=True).start()
    deadline = time.monotonic() + 10
    while not (tmp_path / "paused-base_session").exists():
        assert time.monotonic() < deadline, "the point named with its seed did not pause"
        time.sleep(0.02)


def _optuna_holds_the_study(shape: Shape, study: Study, trials: pd.DataFrame, tmp_path) -> None:
    """What optuna-dashboard shows is the study: one Optuna trial per configuration the study ran (a race's contender:
    its race's trial too), each holding the seeds the study ran it on and told their mean; no sampled value (no grid
    point) twice; and the storage the one of the same study run without a kill, trial for trial."""
    record = optuna_record(study.optuna_url)
    assert [r[0] for r in record] == sorted(set(trials["optuna_trial"].astype(int))), record
    for number, state, _, values, seeds, _ in record:
        rows = trials[trials["optuna_trial"] == number]
        assert sorted(rows["seed"].astype(int)) == sorted(seeds), (number, seeds, rows["seed"].tolist())
        assert state == "COMPLETE" and values == pytest.approx([rows["val_avg_acc"].mean()]), (number, values)
    drawn = [json.dumps(params, sort_keys=True) for _, _, params, _, _, race_of in record if race_of is None]
    assert len(set(drawn)) == len(drawn), drawn
    (tmp_path / "uninterrupted").mkdir()
    clean = Study(shape, tmp_path / "uninterrupted", None, None)
    clean.start()
    assert record == optuna_record(clean.optuna_url)
