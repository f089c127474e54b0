"""The search: Optuna samples configurations and prunes base sessions, inside Ray Tune.

Ray's OptunaSearch hard-codes a no-op pruner, reports Tune's `training_iteration` as the
step, and tells a trial stopped by Tune as COMPLETE with its cut-short value. Two pieces
replace that:

- `StudySearch`, an OptunaSearch subclass: asks Optuna for one configuration per Optuna
  trial, repeats it over seeds (one Tune trial per seed; Optuna is told the mean over
  seeds, like ray.tune.search.Repeater), never tells a placeholder as a final value, and
  tells FAIL for failed trials.
- `BaseEpochStopper`, a Tune Stopper: on every *base-epoch* report it calls Optuna's
  trial.report(base val acc, step=epoch) and should_prune(); on a prune it tells Optuna
  PRUNED and stops the Tune trial. Session and summary reports are never pruned on.

Both talk to Optuna through the persisted storage only (looked up by URL in this process),
so they stay consistent after Tuner.restore, which unpickles them as separate objects.

A trial ends once: Tune tells the searcher before its callbacks (ray/tune/execution/tune_controller.py:
stop_trial, _process_trial_failure), so `StudySearch.on_trial_complete` reads the trial's Optuna state (the
only read of it), classifies the trial (trial_records.classify) and keeps that record; the MLflow tracker and the
progress line ask `StudySearch.ended` for it, and the tracker writes it to the study's runs file, where the
tables read it (adbs_lab/driver/summarise.py).
"""

from __future__ import annotations

import functools
import math
import os
import pickle
import signal
import threading
import warnings
from typing import Any, Callable, Sequence

import optuna
from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch
from ray.tune.stopper import Stopper
from ray.tune.utils.util import unflatten_dict

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY  # also importable from here
from adbs_lab.records.objectives import DEFAULT, Objective
from adbs_lab.records.objectives import PRUNERS
from adbs.redaction import redact, reveal
from adbs.config import Config
from adbs_lab.search.auto_seeds import LAST_KEY, AutoPlan, AutoSeeds, look_line, replay
from adbs_lab.search import orphans, racing
from adbs_lab.search import shadows
from adbs_lab.search.space import TrialMaker
from adbs_lab.records.tune_keys import CONFIG_KEY, SEED_KEY, SEEDS_ATTR, describe
from adbs_lab.stores import db_server
from adbs_lab.stores.db_server import store_down
from adbs_lab.records.trial_records import classify, objective

__all__ = ["optuna_storage", "PatientStorage", "create_study", "StudyNameTaken", "StoreDown", "STORE_DOWN", "stops_when_down",
           "make_pruner", "StudySearch", "name_metrics", "tell", "BaseEpochStopper", "StudyGridSampler"]

_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def optuna_storage(url: str) -> optuna.storages.BaseStorage:
    """One Optuna storage object per URL in this process (the Tune driver is the only writer); a SecretUrl opens the
    URL it hides (adbs/redaction.py)."""
    real = reveal(url)
    if real not in _STORAGES:
        _STORAGES[real] = _first_open(real)
    return _STORAGES[real]


# What the loser of a race to create Optuna's tables in a new database sees: PostgreSQL's duplicate type or key,
# SQLite's "table studies already exists" or alembic_version's UNIQUE constraint.
_LOST_CREATE_RACE = ("already exists", "duplicate key", "unique constraint failed")


def _first_open(url: str, tries: int = 5) -> optuna.storages.BaseStorage:
    """A storage opened while other studies may be creating Optuna's tables in the same new database (a lab's shared
    --optuna-storage; bench/load.py, studies started together): SQLAlchemy looks for the tables and then creates
    them, so two processes can both find none, and the second one's CREATE fails. Opened again after the winner's
    schema is in, it just loads. SQLite waits up to 60 s for a lock instead of failing at once."""
    import time

    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    for attempt in range(tries):
        try:
            if url.startswith("sqlite:"):
                rdb = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
                return optuna.storages.get_storage(rdb)
            if db_server.is_server(url):
                return optuna.storages.get_storage(PatientStorage(url, engine_kwargs=db_server.engine_kwargs(url)))
            return optuna.storages.get_storage(url)
        except (IntegrityError, OperationalError, ProgrammingError) as e:
            text = str(e).lower()
            if attempt == tries - 1 or not any(m in text for m in _LOST_CREATE_RACE):
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


class PatientStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage on a database server that may go away for a while (a restart, a fail-over): each call
    of the storage API that finds the server not answering is tried again for up to db_server.STORE_WAIT_S
    (db_server.patiently), so the study carries on once the server is back; after that, `stops_when_down` stops
    the study with the --resume command. Its engine tests a pooled connection before use (db_server.engine_kwargs:
    pool_pre_ping, which Optuna sets only for MySQL), so one the server closed while idle is replaced, not failed.

    A call is retried only after it raised, and Optuna commits each call in one transaction, so a retried call
    repeats nothing that was stored; the one exception is a commit the server made whose answer the connection lost
    (the server gone in that instant), where a retried `create_new_trial` would add a second trial."""


_WAITING = threading.local()  # inside a patient call: the calls it makes are waited for by it, not again


def _patient_method(name: str) -> Callable[..., Any]:
    method = getattr(optuna.storages.RDBStorage, name)

    @functools.wraps(method)
    def call(self: PatientStorage, *args: Any, **kwargs: Any) -> Any:
        if getattr(_WAITING, "on", False):
            return method(self, *args, **kwargs)
        _WAITING.on = True
        try:
            return db_server.patiently(method, self, *args, what=f"the Optuna storage {redact(self.url)}", **kwargs)
        finally:
            _WAITING.on = False
    return call


# Every public method of Optuna's storage API (BaseStorage), as RDBStorage implements it, and the private ones that
# Optuna's cache in front of it (optuna/storages/_cached_storage.py: _CachedStorage) calls instead of public ones
# (found by bench/load.py: a study's get_all_trials reached the server through _get_trials, unwaited)
_CACHE_CALLS = ("_create_new_trial", "_get_trials", "_set_trial_param", "_get_best_trial_id", "_get_stale_trial_ids")
for _name, _value in [*vars(optuna.storages.BaseStorage).items(), *((n, None) for n in _CACHE_CALLS)]:
    if (_value is None or callable(_value) and not _name.startswith("_")) and hasattr(optuna.storages.RDBStorage, _name):
        setattr(PatientStorage, _name, _patient_method(_name))


class StoreDown(RuntimeError):
    """The Optuna storage stopped answering: the study stops at once (adbs_lab/driver/launch.py: _fit), as one
    error line with the --resume command, instead of each trial failing and being retried against it."""


STORE_DOWN: list[str] = []
"""Why the Optuna storage failed in this process (the first time), for the driver; empty while it answers."""


def stops_when_down(method: Callable[..., Any]) -> Callable[..., Any]:
    """A searcher or stopper call that reads or writes the Optuna storage: when the storage stops answering, the
    first failure asks Ray Tune to stop the study gracefully (SIGUSR1: Tune saves its state, so --resume runs the
    trial whose end was not told again) and every failure raises StoreDown, which the driver reports once."""
    @functools.wraps(method)
    def call(self, *args: Any, **kwargs: Any) -> Any:
        if STORE_DOWN:  # given up on already: the calls of Tune's stop do not each wait for it again
            raise StoreDown(STORE_DOWN[0])
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            if isinstance(e, StoreDown) or not store_down(e):
                raise
            if not STORE_DOWN:
                STORE_DOWN.append(f"the Optuna storage {redact(self._storage_url)} stopped answering{_waited(self)} "
                                  f"({str(e.__cause__ or e).strip().splitlines()[0][:200]}); start it again")
                if hasattr(signal, "SIGUSR1"):
                    os.kill(os.getpid(), signal.SIGUSR1)
            raise StoreDown(STORE_DOWN[0]) from None
    return call


def _waited(searcher: Any) -> str:
    """" for 300 s" where the storage was waited for (a database server: PatientStorage), else ""."""
    return f" for {db_server.STORE_WAIT_S:.0f} s" if db_server.is_server(reveal(searcher._storage_url)) else ""


class StudyNameTaken(RuntimeError):
    """The Optuna storage holds a study of this name already: another run owns it."""


def create_study(url: str, name: str, objectives: Sequence[Objective] = DEFAULT) -> None:
    """Create Optuna study `name` in the storage at `url`, one direction per objective, once: the database's unique
    study name makes the create atomic (optuna/storages/_rdb/storage.py: create_new_study raises
    DuplicatedStudyError), so of two runs that create the same name at the same time exactly one succeeds, and the
    other gets StudyNameTaken. A check ("does the storage hold it?") followed by create_study(load_if_exists=True)
    would let both pass the check and then share one study, each running part of the other's grid."""
    try:
        optuna.create_study(storage=optuna_storage(url), study_name=name,
                            directions=[o.optuna_direction for o in objectives])
    except optuna.exceptions.DuplicatedStudyError:
        raise StudyNameTaken(name) from None


def make_pruner(name: str, base_epochs: int) -> optuna.pruners.BasePruner | None:
    """median (warm-up a quarter of the base epochs), auto (the median pruner at a base epoch only once base
    accuracy there predicts the objective: adbs_lab/search/shadows.py, AutoPruner), halving, hyperband, none."""
    if name == "auto":
        return shadows.AutoPruner(optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=base_epochs // 4))
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=base_epochs // 4)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=base_epochs, reduction_factor=3)
    if name == "none":
        return None
    raise ValueError(f"unknown pruner {name!r}; valid choices: {', '.join(PRUNERS)}")


class _LiveStudy:
    """Mixin: a lazily loaded optuna Study that is never pickled."""

    _storage_url: str
    _study_name: str
    _live: optuna.Study | None = None

    def _study(self, **kwargs: Any) -> optuna.Study:
        if self._live is None:
            self._live = optuna.load_study(study_name=self._study_name, storage=optuna_storage(self._storage_url),
                                           **kwargs)
        return self._live

    def _storage_trial_id(self, number: int) -> int:
        """The storage's id of Optuna trial `number`, through the storage object this process holds
        (optuna_storage; BaseStorage's methods are Optuna's public storage API)."""
        storage = optuna_storage(self._storage_url)
        return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(self._study_name),
                                                               number)

    def _state(self, number: int) -> TrialState:
        return optuna_storage(self._storage_url).get_trial(self._storage_trial_id(number)).state

    def _shadow(self, number: int, tune_trial: str) -> bool:
        """Whether Tune trial `tune_trial` runs on as the shadow of PRUNED Optuna trial `number` (its attribute is
        written before PRUNED is told, so it is final once the state is: adbs_lab/search/shadows.py)."""
        return shadows.is_shadow(optuna_storage(self._storage_url).get_trial(self._storage_trial_id(number)), tune_trial)


class StudySearch(_LiveStudy, OptunaSearch):
    def __init__(
        self,
        space: dict[str, optuna.distributions.BaseDistribution],
        *,
        storage_url: str,
        study_name: str,
        sampler: optuna.samplers.BaseSampler,
        seeds: list[int] | None = None,
        trial: TrialMaker | None = None,
        points_to_evaluate: list[dict] | None = None,
        snapshot: dict[str, str] | None = None,
        objectives: tuple[Objective, ...] = DEFAULT,
        auto: AutoPlan | None = None,
        race: racing.RacePlan | None = None,
    ) -> None:
        """`trial`: makes each trial's Config from its point (adbs_lab/search/space.py: TrialMaker; the study's
        Prepared.trial, its threads set by launch; None: the defaults of Config). `snapshot`: {name: local file}
        copied beside the searcher state each time Tune saves it (study_folder.snapshot_into), so a study on an object store
        uploads its optuna.db with the trial list it belongs to. `objectives`: what Optuna is told (--objectives;
        adbs_lab/records/objectives.py), each a mean over the configuration's seeds. `auto` (--seeds auto): the rows
        run seeds in batches, the next batch chosen by the looks (`_suggest_auto`); `seeds` is then unused. `race`
        (--seeds auto on a sampled search): the samples run seed 0, then the best race on fresh seeds
        (adbs_lab/search/racing.py, `_suggest_race`); `seeds` is then unused."""
        self._objectives = tuple(objectives)
        if self._objectives != DEFAULT:
            # OptunaSearch creates the study with one direction from its metric and mode, which stay K.OBJECTIVE/max:
            # Tune checks that every report carries the searcher's metric (strict metric checking), and only
            # K.OBJECTIVE rides on every report (trainable.PLACEHOLDER). Created here first with a direction per
            # objective, the study is loaded by OptunaSearch as it is (create_study(load_if_exists=True)). A study's
            # driver has created it already (`create_study`, before its folder is claimed); this is for other callers.
            optuna.create_study(storage=optuna_storage(storage_url), study_name=study_name, sampler=sampler,
                                directions=[o.optuna_direction for o in self._objectives], load_if_exists=True)
        self._storage_url = storage_url
        self._snapshot = dict(snapshot or {})
        self._seeds = list(seeds or [])
        self._trial = trial or TrialMaker(Config())
        self._groups: dict[int, dict[str, Any]] = {}
        self._open: int | None = None
        self._number: dict[str, int] = {}
        self._ended: dict[str, str] = {}  # Tune trial id -> its state when it ended (trial_records.classify)
        self._auto = auto
        self._seed_of: dict[str, int] = {}  # --seeds auto: Tune trial id -> its seed
        self._auto_ended: dict[str, dict[int, tuple[str, float]]] = {}  # row -> seed -> (state, last test acc)
        self._looks_said = 0  # looks printed
        self._race = race
        self._race_screen: dict[str, float] = {}  # race: screening label -> its objective (NaN: not complete)
        self._race_screen_ids: set[str] = set()  # race: the screening trials that ended (Tune trial ids)
        self._race_ended: dict[str, dict[int, tuple[str, float]]] = {}  # race: label -> fresh seed -> (state, value)
        self._race_number: dict[str, int] = {}  # race: contender label -> its race's Optuna trial number
        super().__init__(
            space, metric=K.OBJECTIVE, mode=K.MODE, sampler=sampler, study_name=study_name,
            storage=optuna_storage(storage_url), points_to_evaluate=points_to_evaluate,
        )
        self._live = None
        name_metrics(optuna_storage(storage_url), study_name, self._objectives)

    # Pickled by Tune with the tuner and in searcher checkpoints: no live DB handles; the trial maker travels with it
    # (a Config and the study's rows), so a resumed study makes its trials' Configs from the base it started with.
    def __getstate__(self) -> dict[str, Any]:
        # _ot_study/_ot_trials/_storage are OptunaSearch's own attributes (no public accessor): a live Study
        # bound to the storage of the driver that pickled it. _storage (Optuna's RDBStorage) is rebuilt from
        # _storage_url, which names this driver's database on --resume (study_folder.rebound).
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_live", "_ot_study", "_ot_trials", "_storage")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from adbs_lab.stores.study_folder import rebound

        self.__dict__.update(state)
        self._live, self._ot_study, self._ot_trials = None, None, {}
        self._storage_url = rebound(self._study_name, "optuna_url", self._storage_url)
        self._storage = optuna_storage(self._storage_url)
        if self._snapshot:  # the files live in the study's (rebound) staging folder
            self._snapshot = {k: os.path.join(rebound(self._study_name, "study_dir", os.path.dirname(v)), k)
                              for k, v in self._snapshot.items()}

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)
        if self._snapshot:
            from adbs_lab.stores.study_folder import snapshot_into

            snapshot_into(os.path.dirname(checkpoint_path), self._snapshot)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__setstate__(pickle.load(f))
        self._adopt_orphans()

    def _adopt_orphans(self) -> None:
        """The Optuna trials a driver killed before Tune saved this state had asked for, RUNNING or already told
        (adbs_lab/search/orphans.py: why they are adopted and run again): each becomes this searcher's again, with
        its own number, parameters and seeds, every seed still to run (none of its Tune trials was saved), so Optuna
        gets no second trial for it and the sampler draws nothing for it. Left alone, a told one is a sample Optuna
        holds and the study never ran (and its grid point runs twice to fill the budget), and a RUNNING one stays
        taken for good. One told already is not told again (on_trial_complete, _auto_look and _race_look tell only
        a RUNNING trial)."""
        found = orphans.left_behind(optuna_storage(self._storage_url), self._study_name, set(self._groups))
        seeds = self._seeds if not (isinstance(self._space, dict) and SEED_KEY in self._space) else []
        for t in found:
            g = self._groups[t.number] = orphans.group(t, seeds=seeds, auto=getattr(self, "_auto", None),
                                                       race=getattr(self, "_race", None))
            if racing.RACE_OF in g:
                self._race_number[g["row"]] = t.number
        if found:
            assert self._sampler is not None, "StudySearch is always built with a sampler"
            orphans.draw_afresh(self._sampler)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        """Tune hands over the param space on every run, --resume included. A searcher pickled before it held its
        trial maker (it kept only the rows) takes that param space as the maker's base, as it did then."""
        if "_trial" not in self.__dict__:
            from adbs.config import FIELDS, from_dict

            self._trial = TrialMaker(from_dict({k: v for k, v in (config or {}).items() if k in FIELDS}),
                                     self.__dict__.get("_rows"))
        return super().set_search_properties(metric, mode, config, **spec)

    def _study(self, **kwargs: Any) -> optuna.Study:
        return super()._study(sampler=self._sampler)

    @stops_when_down
    def suggest(self, trial_id: str) -> dict | str | None:
        if getattr(self, "_auto", None) is not None:
            return self._suggest_auto(trial_id)
        if getattr(self, "_race", None) is not None:
            return self._suggest_race(trial_id)
        # A configuration's seeds are handed out together; if it gets pruned meanwhile, its remaining
        # seeds still run but BaseEpochStopper stops them at their first base epoch, so the budget
        # (configurations x seeds) and the Optuna trial's bookkeeping stay exact.
        g = self._groups.get(self._open) if self._open is not None else None
        left = None if g is not None and g["seeds_left"] else \
            next((n for n, h in sorted(self._groups.items()) if h["seeds_left"] or h.get(orphans.RERUN)), None)
        if left is not None:  # a trial left behind by a killed driver (_adopt_orphans) runs before a new ask
            self._open, g = left, self._groups[left]
            g.pop(orphans.RERUN, None)
        elif g is None or not g["seeds_left"]:
            space = self._space
            # OptunaSearch also takes a list or a define-by-run function; StudySearch passes it a dict of Optuna
            # distributions, which OptunaSearch keeps as a (flattened) dict
            assert isinstance(space, dict), "StudySearch's space is a dict of Optuna distributions"
            ot_trial = self._study().ask(fixed_distributions=space)
            self._open = ot_trial.number
            # A configuration runs over every seed, one Optuna trial for all of them: a seed is no parameter (it
            # would show as one in Optuna's importance and plots), so the trial keeps its seeds as a user attribute.
            # A study begun when grids had the seed as an axis (its pickled space holds it) goes on that way.
            repeat = self._seeds if SEED_KEY not in space else []
            if repeat:
                ot_trial.set_user_attr(SEEDS_ATTR, list(repeat))
            g = self._groups[ot_trial.number] = {"params": dict(ot_trial.params), "seeds_left": list(repeat), "members": {}}
        assert self._open is not None, "a configuration is open: just asked for, or one with seeds left"
        return self._hand_out(trial_id, self._open, g)

    def _hand_out(self, trial_id: str, number: int, g: dict[str, Any]) -> dict:
        """Tune trial `trial_id` runs configuration `number`'s next seed (or the configuration, seed in its point)."""
        params = dict(g["params"])
        if g["seeds_left"]:
            params[SEED_KEY] = g["seeds_left"].pop(0)
            self._seed_of[trial_id] = params[SEED_KEY]
        if g.get(racing.RACE_OF) is not None:  # a race's seed: BaseEpochStopper never prunes it
            params[racing.RACE_OF] = g[racing.RACE_OF]
        g["members"][trial_id] = None
        self._number[trial_id] = number
        params[OPTUNA_TRIAL_KEY] = number
        config = unflatten_dict(params)
        # The trial's Config, made once, here, by the study's one trial maker (its base is Tune's param space); the
        # trainable, the tracker and the tables read it (tune_keys.trial_config).
        config[CONFIG_KEY] = self._trial.config(config)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """No-op: BaseEpochStopper reports base epochs; Tune's iteration is not a step Optuna should see."""

    @stops_when_down
    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        number = self._number.get(trial_id)
        if number is None:
            return
        g = self._groups[number]
        # The one read of this trial's Optuna state: the stopper tells Optuna PRUNED before Tune ends the trial
        # (and a shadow, pruned but run on to its end, is PRUNED to the study: adbs_lab/search/shadows.py).
        held = self._state(number)
        self._ended[trial_id] = classify(result, error=error, pruned=held == TrialState.PRUNED,
                                         shadow=held == TrialState.PRUNED and self._shadow(number, trial_id))
        g["members"][trial_id] = (self._ended[trial_id], self._values(result))
        if getattr(self, "_auto", None) is not None:
            self._auto_record(trial_id, result)
            return
        if getattr(self, "_race", None) is not None:
            self._race_record(trial_id, result)
            if g.get(racing.RACE_OF) is not None:
                return  # a race's trial is told when the race leaves its configuration (_race_look)
        if any(v is None for v in g["members"].values()) or (g["seeds_left"] and self._open == number):
            return  # other seeds of this configuration still to come
        if held != TrialState.RUNNING:
            return  # told already (the stopper told PRUNED)
        self._tell_group(number)

    def _tell_group(self, number: int) -> None:
        """Tell Optuna configuration `number`'s value over every seed it ran: the mean per objective, or PRUNED /
        FAIL."""
        g = self._groups[number]
        states = [state for state, _ in g["members"].values()]
        values = [value for _, value in g["members"].values() if value is not None]
        study = self._study()
        if K.PRUNED in states:
            tell(study, number, state=TrialState.PRUNED)
        elif K.FAILED in states or K.DIVERGED in states or not values:
            # a configuration with a failed or diverged seed has no honest mean: Optuna holds it FAIL, as every
            # table does
            tell(study, number, state=TrialState.FAIL)
        else:
            # one mean over the seeds per objective; an objective the trial could not measure (NaN: e.g. novel
            # accuracy without an incremental session) leaves the configuration without a value: FAIL
            means = [sum(v[i] for v in values) / len(values) for i in range(len(values[0]))]
            if not all(math.isfinite(m) for m in means):
                tell(study, number, state=TrialState.FAIL)
            else:
                tell(study, number, means[0] if len(means) == 1 else means)

    # --- --seeds auto (adbs_lab/search/auto_seeds.py) ------------------------------------------------------------
    # Every row runs seeds 0 .. n0-1 first (one Optuna trial per row, asked once); when every trial handed out has
    # ended, `auto_seeds.replay` takes the look on the finished trials alone and either stops the study (suggest
    # returns FINISHED) or queues the next seed numbers of the rows it names. A row the looks leave out runs no more
    # seeds: Optuna is told its value then, the mean over all the seeds it ran (its user attribute `seeds`, which
    # grows with each batch it runs); a row still running batches stays RUNNING in Optuna until its last one.

    def _suggest_auto(self, trial_id: str) -> dict | str | None:
        from ray.tune.search import Searcher

        auto = self._auto
        assert auto is not None
        state = self.auto_state()
        open_ = [n for n in sorted(self._groups) if self._groups[n]["seeds_left"]]
        if open_:
            return self._hand_out(trial_id, open_[0], self._groups[open_[0]])
        if state.done:
            return Searcher.FINISHED
        if len(self._groups) < len(auto.rows):
            ot_trial = self._study().ask(fixed_distributions=self._space)  # type: ignore[arg-type]
            first = list(range(auto.looks.n0))
            ot_trial.set_user_attr(SEEDS_ATTR, first)
            self._groups[ot_trial.number] = {"params": dict(ot_trial.params), "seeds_left": list(first),
                                             "members": {}, "seeds": list(first), "told": False,
                                             "row": describe(dict(ot_trial.params), list(auto.label_keys))}
            return self._hand_out(trial_id, ot_trial.number, self._groups[ot_trial.number])
        return None  # the batch under way must end before the next look

    def auto_state(self) -> AutoSeeds:
        """Where the --seeds auto study stands: the looks replayed from the trials that ended."""
        auto = self._auto
        assert auto is not None
        values = {row: {s: v for s, (st, v) in seeds.items() if st == K.COMPLETE}
                  for row, seeds in self._auto_ended.items()}
        states = {row: {s: st for s, (st, _) in seeds.items()} for row, seeds in self._auto_ended.items()}
        return replay(auto.rows, values, states, auto.pairs, auto.looks, auto.delta)

    def _auto_record(self, trial_id: str, result: dict | None) -> None:
        """A trial of a --seeds auto study ended: keep its row's seed, then take the look its batch completes."""
        number, seed = self._number.get(trial_id), self._seed_of.get(trial_id)
        state = self._ended.get(trial_id)
        if number is None or seed is None or state not in K.ENDED:
            return
        value = float((result or {}).get(LAST_KEY, math.nan)) if state == K.COMPLETE else math.nan
        self._auto_ended.setdefault(self._groups[number]["row"], {})[seed] = (state, value)
        self._auto_look()

    def _auto_look(self) -> None:
        """Queue the seeds the looks ask for, print each new look, and tell Optuna the rows that run no more."""
        auto = self._auto
        assert auto is not None
        state = self.auto_state()
        for number in sorted(self._groups):
            g = self._groups[number]
            target = state.targets.get(g["row"], 0)
            if target > len(g["seeds"]):
                more = list(range(len(g["seeds"]), target))
                g["seeds"] += more
                g["seeds_left"] += more
                if self._state(number) == TrialState.RUNNING:  # told before a --resume replays this look: kept
                    optuna_storage(self._storage_url).set_trial_user_attr(self._storage_trial_id(number), SEEDS_ATTR,
                                                                          list(g["seeds"]))
        for look in state.looks[self._looks_said:]:
            print(f"[{self._study_name}] {look_line(look, auto.looks)}", flush=True)
        self._looks_said = len(state.looks)
        for number in sorted(self._groups):
            g = self._groups[number]
            if g["told"] or not state.final(g["row"]) or any(v is None for v in g["members"].values()):
                continue
            g["told"] = True
            if self._state(number) == TrialState.RUNNING:  # not told PRUNED by the stopper
                self._tell_group(number)

    # --- --seeds auto on a sampled search: the race (adbs_lab/search/racing.py) -----------------------------------
    # The samples are asked one at a time and run seed 0, each told its value when it ends, as without --seeds auto
    # (TPE models them the same way). Once all have ended, `racing.replay` names the contenders; each gets an Optuna
    # trial of its own with the same parameters (enqueued, user attributes `race_of`: the screening trial's number,
    # and `seeds`: the fresh seeds it has been given), so every told value covers exactly the seeds in that trial's
    # `seeds`: seed 0 for a screening trial, the fresh seeds for a race's trial, told once the race leaves it.

    def _suggest_race(self, trial_id: str) -> dict | str | None:
        from ray.tune.search import Searcher

        race = self._race
        assert race is not None
        open_ = [n for n in sorted(self._groups) if self._groups[n]["seeds_left"]]
        if open_:
            return self._hand_out(trial_id, open_[0], self._groups[open_[0]])
        if sum(1 for g in self._groups.values() if g.get(racing.RACE_OF) is None) < race.samples:
            ot_trial = self._study().ask(fixed_distributions=self._space)  # type: ignore[arg-type]
            ot_trial.set_user_attr(SEEDS_ATTR, [racing.SCREEN_SEED])
            self._groups[ot_trial.number] = {"params": dict(ot_trial.params), "seeds_left": [racing.SCREEN_SEED],
                                             "members": {}, "row": describe(dict(ot_trial.params),
                                                                            list(race.label_keys))}
            return self._hand_out(trial_id, ot_trial.number, self._groups[ot_trial.number])
        if self.race_state().done:
            return Searcher.FINISHED
        return None  # the screening or the race's batch under way must end before the next look

    def race_state(self) -> racing.Race:
        """Where the race stands: replayed from the trials that ended."""
        race = self._race
        assert race is not None
        values = {row: {s: v for s, (st, v) in seeds.items() if st == K.COMPLETE}
                  for row, seeds in self._race_ended.items()}
        states = {row: {s: st for s, (st, _) in seeds.items()} for row, seeds in self._race_ended.items()}
        return racing.replay(self._race_screen, len(self._race_screen_ids) >= race.samples, values, states, race)

    def _race_record(self, trial_id: str, result: dict | None) -> None:
        """A trial of a raced study ended: keep its value (the first objective, validation), then look."""
        race = self._race
        assert race is not None
        number, seed, state = self._number.get(trial_id), self._seed_of.get(trial_id), self._ended.get(trial_id)
        if number is None or seed is None or state not in K.ENDED:
            return
        g = self._groups[number]
        values = self._values(result) if state == K.COMPLETE else None
        value = values[0] if values else math.nan
        if g.get(racing.RACE_OF) is None:
            self._race_screen_ids.add(trial_id)
            racing.screened(self._race_screen, g["row"], value, race.sign)
        else:
            self._race_ended.setdefault(g["row"], {})[seed] = (state, value)
        self._race_look()

    def _race_look(self) -> None:
        """Give each contender the fresh seeds the race asks for, print each new look, tell the race's trials that
        run no more."""
        race = self._race
        assert race is not None
        state = self.race_state()
        if not state.screened:
            return
        for c in state.contenders:
            self._race_seeds(c, state.seeds_of(c))
        for look in state.looks[self._looks_said:]:
            print(f"[{self._study_name}] {racing.look_line(look, race)}", flush=True)
        self._looks_said = len(state.looks)
        for c, number in sorted(self._race_number.items()):
            g = self._groups[number]
            if g.get("told") or not state.final(c) or any(v is None for v in g["members"].values()):
                continue
            g["told"] = True
            if self._state(number) == TrialState.RUNNING:
                self._tell_group(number)

    def _race_seeds(self, row: str, want: list[int]) -> None:
        """Contender `row` runs the fresh seeds `want`: its race's Optuna trial is made on first need."""
        number = self._race_number.get(row)
        if number is None:
            if not want:
                return
            screen = next(n for n, g in sorted(self._groups.items())
                          if g.get(racing.RACE_OF) is None and g["row"] == row)
            study = self._study()
            study.enqueue_trial(self._groups[screen]["params"], user_attrs={racing.RACE_OF: screen})
            ot_trial = study.ask(fixed_distributions=self._space)  # type: ignore[arg-type]
            number = self._race_number[row] = ot_trial.number
            self._groups[number] = {"params": dict(ot_trial.params), "seeds_left": [], "members": {}, "seeds": [],
                                    "row": row, racing.RACE_OF: screen}
        g = self._groups[number]
        more = [s for s in want if s not in g["seeds"]]
        if more:
            g["seeds"] += more
            g["seeds_left"] += more
            if self._state(number) == TrialState.RUNNING:
                optuna_storage(self._storage_url).set_trial_user_attr(self._storage_trial_id(number), SEEDS_ATTR,
                                                                      list(g["seeds"]))

    def _values(self, result: dict | None) -> list[float] | None:
        """The trial's value of each objective when it completed, else None. A StudySearch pickled before
        --objectives existed has no _objectives: it searched the default objective."""
        obj = objective(result)
        if obj is None:
            return None
        assert result is not None, "objective() has a value only from a report"
        keys = [o.key for o in getattr(self, "_objectives", DEFAULT)]
        return [obj if k == K.OBJECTIVE else float(result.get(k, math.nan)) for k in keys]

    @stops_when_down
    def ended(self, trial) -> str:
        """How Tune trial `trial` ended, as on_trial_complete classified it. Tune tells this searcher first;
        only a trial it did not tell (one continued by --resume after an error: Tune's ConcurrencyLimiter
        forgot it) is classified here, with the same single read of its Optuna state."""
        if trial.trial_id not in self._ended:
            number = (trial.config or {}).get(OPTUNA_TRIAL_KEY)
            pruned = number is not None and self._state(int(number)) == TrialState.PRUNED
            shadow = pruned and number is not None and self._shadow(int(number), trial.trial_id)
            self._ended[trial.trial_id] = classify(trial.last_result, pruned=pruned, shadow=shadow)
            if getattr(self, "_auto", None) is not None and trial.trial_id in self._number:
                self._auto_record(trial.trial_id, trial.last_result)
            if getattr(self, "_race", None) is not None and trial.trial_id in self._number:
                self._race_record(trial.trial_id, trial.last_result)
        return self._ended[trial.trial_id]

    def reopen(self, trial_id: str) -> None:
        """Trial `trial_id` runs again (restored by Tune): how it ended before is no longer how it ends."""
        self._ended.pop(trial_id, None)

    def looks_taken(self) -> int:
        """The looks of --seeds auto (a grid's or a race's) taken so far; 0 for a seed list."""
        return getattr(self, "_looks_said", 0)


def name_metrics(storage: optuna.storages.BaseStorage, study_name: str, objectives: Sequence[Objective]) -> None:
    """Name the study's values after its objectives (optuna-dashboard and Optuna's plots then say `val_avg_acc`, not
    `Objective 0`; the directions were set when the study was created)."""
    study = optuna.load_study(study_name=study_name, storage=storage)
    with warnings.catch_warnings():  # set_metric_names is marked experimental since Optuna 3.2
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.name for o in objectives])


def tell(study: optuna.Study, number: int, value: float | Sequence[float] | None = None,
         state: TrialState | None = None) -> None:
    """study.tell outside study.optimize: GridSampler.after_trial calls study.stop() when the grid is
    used up, which raises there; the trial's state is stored before that (optuna/study/_tell.py)."""
    try:
        study.tell(number, value, state=state)
    except RuntimeError as e:
        if "Study.stop" not in str(e):
            raise


class StudyGridSampler(optuna.samplers.GridSampler):
    """Optuna's GridSampler, less its after_trial: that reads every trial of the study (its search space and grid
    point) to decide whether to call study.stop(), which only ends study.optimize()'s loop and raises outside it
    (`tell`). The study asks and tells itself and Ray Tune's num_samples ends it, so the read did nothing but grow
    with the study: 0.04 s per trial at 230 trials, 0.1 s at 500 (py-spy on bench/scale_study.py's driver,
    docs/benchmarks.md), the study's work growing with trials squared. Which point a trial gets is unchanged
    (before_trial, the same seed). A study started before this class existed goes on with the sampler it pickled."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        return None


def _seed(config: dict) -> int | None:
    """A trial's seed as JSON takes it (a grid's seed axis may hand a numpy integer), None without one."""
    seed = config.get(SEED_KEY)
    return None if seed is None else int(seed)


class BaseEpochStopper(_LiveStudy, Stopper):
    """Tune Stopper that runs an Optuna pruner on base-session validation accuracy (never on sessions).

    On every base-epoch report it reads the Optuna trial's state: another seed of the same configuration may
    have been pruned meanwhile (stop this one too), or the configuration was told already (nothing to report).
    """

    def __init__(self, *, storage_url: str, study_name: str, pruner: optuna.pruners.BasePruner,
                 shadow_share: float = 0.0, shadow_seed: int = 0) -> None:
        """`shadow_share`: the share s of the trials the pruner stops that run on to the end as shadows, drawn with
        `shadow_seed` (the study's sampler seed; adbs_lab/search/shadows.py)."""
        self._storage_url = storage_url
        self._study_name = study_name
        self._pruner = pruner
        self._shadow_share = shadow_share
        self._shadow_seed = shadow_seed

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_live"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from adbs_lab.stores.study_folder import rebound

        self.__dict__.update(state)
        self._live = None
        self._storage_url = rebound(self._study_name, "optuna_url", self._storage_url)

    def _study(self, **kwargs: Any) -> optuna.Study:
        return super()._study(pruner=self._pruner)

    @stops_when_down
    def __call__(self, trial_id: str, result: dict) -> bool:
        config = result.get("config") or {}
        number = config.get(OPTUNA_TRIAL_KEY)
        if number is None or config.get(racing.RACE_OF) is not None:
            return False  # a race's seed is a paired value, never pruned (adbs_lab/search/racing.py)
        storage, trial_id_ = optuna_storage(self._storage_url), self._storage_trial_id(number)
        held = storage.get_trial(trial_id_)
        if held.state == TrialState.PRUNED:
            if shadows.is_shadow(held, trial_id):  # runs on to its end, unseen by the pruner and the sampler
                self._follow(number, result)
                return False
            return True  # pruned, by this seed's report or another seed's of the same configuration
        if held.state == TrialState.RUNNING and result.get(K.REPORT_KIND) == K.KIND_SUMMARY:
            novel = result.get(K.SUMMARY + shadows.NOVEL_KEY)
            if K.finite(novel):  # the premise's novel accuracy of a completed configuration, per seed
                storage.set_trial_user_attr(trial_id_, f"{shadows.NOVEL_KEY}:{_seed(config) or 0}",
                                            float(novel))
            return False
        # Only base-epoch reports are pruned on, never incremental sessions: pruning must not peek at them.
        if held.state != TrialState.RUNNING or result.get(K.REPORT_KIND) != K.KIND_BASE:
            return False
        value = result.get(K.BASE_PRUNE_VALUE)
        if not K.finite(value):
            return False
        study = self._study()
        # Optuna has no public way to reopen a trial by number outside study.ask(); Trial(study, id) is what
        # ask() itself builds (optuna/study/study.py), so the pruner sees the trial as it would in optimize().
        trial = optuna.trial.Trial(study, trial_id_)
        step = int(result[K.BASE_STEP])
        with warnings.catch_warnings():  # other seeds of this configuration reported this step already
            warnings.simplefilter("ignore", UserWarning)
            trial.report(float(value), step=step)
        if not trial.should_prune():
            return False
        shadow = shadows.chosen(getattr(self, "_shadow_seed", 0), number, getattr(self, "_shadow_share", 0.0))
        if shadow:  # recorded before PRUNED is told: a finished trial's attributes cannot be written
            shadows.start_record(storage, storage.get_study_id_from_name(self._study_name), trial_id_, number,
                                 tune_trial=trial_id, seed=_seed(config), step=step, value=float(value))
        tell(study, number, state=TrialState.PRUNED)
        return not shadow

    def _follow(self, number: int, result: dict) -> None:
        """A shadow's base epochs and its end go to its study record (adbs_lab/search/shadows.py)."""
        storage = optuna_storage(self._storage_url)
        study_id = storage.get_study_id_from_name(self._study_name)
        kind = result.get(K.REPORT_KIND)
        if kind == K.KIND_BASE and K.finite(result.get(K.BASE_PRUNE_VALUE)):
            shadows.follow(storage, study_id, number, step=int(result[K.BASE_STEP]),
                           value=float(result[K.BASE_PRUNE_VALUE]))
        elif kind == K.KIND_SUMMARY and K.finite(result.get(K.OBJECTIVE)):
            novel = result.get(K.SUMMARY + shadows.NOVEL_KEY)
            shadows.follow(storage, study_id, number, objective=float(result[K.OBJECTIVE]),
                           novel=float(novel) if K.finite(novel) else None)

    def stop_all(self) -> bool:
        return False
