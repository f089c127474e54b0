"""The Optuna storage a study's searcher and stopper share, looked up by URL in this process: opened once per URL
(`optuna_storage`; a lost race to create Optuna's tables in a new database tried again), patient with a database
server that goes away for a while (`PatientStorage`), a study that stops at once with one line when it stays away
(`stops_when_down`, `StoreDown`), the study created once and atomically (`create_study`), its values named after its
objectives (`name_metrics`), a `tell` outside study.optimize, and the lazily loaded Optuna study a searcher or
stopper holds without pickling it (`_LiveStudy`)."""

from __future__ import annotations

import functools
import os
import signal
import threading
import warnings
from typing import Any, Callable, Sequence

import optuna
from optuna.trial import TrialState

from adbs.redaction import redact, reveal
from adbs_lab.records.objectives import DEFAULT, Objective
from adbs_lab.search import shadows
from adbs_lab.stores import db_server
from adbs_lab.stores.db_server import store_down

__all__ = ["optuna_storage", "PatientStorage", "create_study", "StudyNameTaken", "StoreDown", "STORE_DOWN",
           "stops_when_down", "name_metrics", "tell"]

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
