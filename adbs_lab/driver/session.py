"""The study's process and its Ray session, in one place: the environment Ray, Tune, Optuna and MLflow read
(`env_defaults`), Ray started or joined (`ray_session`, with a fast failure when nothing answers at --address),
Ctrl-C or SIGTERM before any trial ran (`interrupted`: exit 130; adbs_lab/driver/interrupts.py), and what
counts as a full disk (`disk_full`: a message and --resume instead of a traceback, adbs_lab/driver/launch.py and
summarise.py)."""

from __future__ import annotations

import errno
import logging
import os
import shlex
import socket
import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn

from adbs.exits import INTERRUPTED, Exit
from adbs.redaction import redact
from adbs_lab.cluster import auth
from adbs_lab.driver import interrupts
from adbs_lab.driver.prepared import Study, fail, resume_command
from adbs_lab.driver.options import StudyInputError

__all__ = ["env_defaults", "ray_session", "disk_full", "interrupted", "checkpoint_period", "set_checkpoint_period",
           "PERIOD_ENV"]


PERIOD_ENV = "TUNE_GLOBAL_CHECKPOINT_S"
"""How often Ray Tune saves its experiment state (seconds, or "auto"); read when the study's Tuner starts."""
_USER_PERIOD: str | None = None  # the user's own TUNE_GLOBAL_CHECKPOINT_S ("" if none), read by env_defaults


def checkpoint_period(trials: int) -> str:
    """Seconds between saves of Tune's experiment state for a study of `trials` trials: 2 s up to 100 trials,
    then in proportion to them (20 s at 1,000, 100 s at 5,000).

    Why: the state holds every trial (about 50 KB each, ray/tune/execution/experiment_state.py saves it whole), so
    at a fixed period the driver's saving work grows with trials squared (docs/benchmarks.md); a period in
    proportion to the state keeps it per trial constant. Why not Tune's "auto" (every max(10 s, 19 x the last
    save's time)): a driver killed between saves reruns the trials that ended since the last one (--resume closes
    their first runs as orphans, adbs_lab/driver/tracker.py), and 10 s is most of a small study; 2 s keeps that gap
    as before for studies up to 100 trials. A trial's checkpoints are never lost to the gap: Tune saves at once when
    a trial has made CheckpointConfig.num_to_keep of them (adbs_lab/driver/launch.py)."""
    return str(max(2, round(0.02 * trials)))


def set_checkpoint_period(trials: int) -> None:
    """TUNE_GLOBAL_CHECKPOINT_S for the study about to start (`checkpoint_period`), unless the user set it."""
    if not _USER_PERIOD:
        os.environ[PERIOD_ENV] = checkpoint_period(trials)


def env_defaults() -> None:
    """The environment a study's process sets before Ray, Tune, Optuna or MLflow read it (a variable the user set
    wins), and quiet loggers; first thing of `run` and of a composition (adbs_lab/driver/compose.py)."""
    # Telemetry and usage stats off unless the user turned them on.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # Ray >= 2.59 turns token auth on for local clusters depending on ~/.ray state: be explicit (token when the user
    # gives one, for a cluster with authentication; adbs_lab/cluster/auth.py)
    auth.set_default()
    # TUNE_GLOBAL_CHECKPOINT_S: set per study by `checkpoint_period` (the study's size is known only then), unless
    # the user set it; remembered here, before any study of this process set it.
    global _USER_PERIOD
    if _USER_PERIOD is None:
        _USER_PERIOD = os.environ.get(PERIOD_ENV, "")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Trials checkpoint after every session (seconds apart), which forces Tune state snapshots; that is
    # intended, so silence the "snapshotting triggered multiple times" warning.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Keep Tune's console quiet: its slow-operation warnings fire on a busy 2-core machine.
    os.environ.setdefault("TUNE_WARN_THRESHOLD_S", "10")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per artifact a report downloads
    # A trial's traceback goes to its error.txt and to MLflow (tag adbs.error); the terminal gets one line per
    # failed trial (adbs_lab/driver/progress.py) instead of Tune's traceback for every attempt.
    os.environ.setdefault("TUNE_PRINT_ALL_TRIAL_ERRORS", "0")
    import logging

    logging.getLogger("ray.tune.tune").addFilter(_NotCompleteLine())

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # progress lines come from adbs_lab.driver.progress
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # MLflow's SQL store logs every failed connection with its traceback before raising it; the study says once
    # that the store stopped answering (adbs_lab/stores/db_server.py: store_down), with the --resume command
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


class _NotCompleteLine:
    """Drops the lines of Tune's that the study says itself, logged at the end of ray/tune/tune.py: run through that
    module's logger, "ray.tune.tune" (the filter sits there: a logger's filters see only its own records): "Trials
    did not complete: [ids]" (the study's summary names the failed trials) and "Experiment has been interrupted ...
    Resume experiment with: Tuner.restore(...)", or any other line with that advice (the study prints its own
    command, the one with --resume: summarise.py; Tuner.restore alone would not rebind the study's stores)."""

    DROPPED = ("Trials did not complete", "Experiment has been interrupted")

    def filter(self, record) -> bool:
        msg = str(record.msg)
        return not (msg.startswith(self.DROPPED) or "Tuner.restore(" in msg)



def _probe_ray(address: str) -> None:
    """Fail fast when nothing answers at --address (ray.init would wait minutes and ignore Ctrl-C)."""
    target = address.split("://", 1)[-1]
    if address == "auto" or address.startswith("ray://") or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return
    except (OSError, ValueError) as e:
        raise StudyInputError(
            f"--address {redact(address)}: no Ray cluster answers there ({e.__class__.__name__}: {redact(str(e))}); "
            f"start one with `ray start --head --port={port}`, pass the address `ray start` printed, or drop --address to "
            "start a local Ray instance") from None


def _start_ray(p: Study) -> dict[str, float]:
    import ray

    from adbs_lab.search.trainable import FAULT_ENV

    if p.run.address:
        _probe_ray(p.run.address)
    if p.run.cache and IMAGES_ENV not in os.environ:
        # the trial processes load the embedded benchmark's images one made, instead of each generating them again
        # (about a quarter of a default CPU trial); the files are checked on every load (adbs/data/image_cache.py)
        os.environ[IMAGES_ENV] = p.where.images_location
    # Workers of an existing cluster do not inherit this shell's environment: forward what trials read.
    # (a local Ray's workers inherit it, so the images' folder is forwarded only to a cluster's)
    forward = {k: os.environ[k] for k in (FAULT_ENV,) + ((IMAGES_ENV,) if p.run.address else ()) if k in os.environ}
    try:
        ray.init(address=p.run.address, include_dashboard=False, log_to_driver=True, ignore_reinit_error=True,
                 configure_logging=True, logging_level=logging.WARNING,
                 runtime_env={"env_vars": forward} if forward else None)
    except Exception as e:  # noqa: BLE001 - ConnectionError, Ray's AuthenticationError, or Ray did not come up
        if isinstance(e, ConnectionError) or auth.refused(e):  # nothing there, or a cluster that wants its token
            raise StudyInputError(f"--address {redact(p.run.address or '')}: no Ray cluster there, or one that "
                                  f"refused this driver ({redact(str(e)).strip().splitlines()[0]}); start one with "
                                  f"`ray start --head`, or drop --address to start a local Ray instance; "
                                  f"{auth.HOW}") from None
        # its node timed out under load, a process died
        ray.shutdown()  # what it started of itself
        raise _NotStarted((redact(str(e)).strip().splitlines() or [type(e).__name__])[0][:300]) from None
    return ray.cluster_resources()


IMAGES_ENV = "ADBS_SYNTHETIC_CACHE"
"""adbs/data/synthetic.py: CACHE_ENV (named here so that starting Ray does not import the data code)."""


class _NotStarted(RuntimeError):
    """ray.init raised: Ray's start failed (ray/_private/node.py waits 30 s for its raylet, then gives up)."""


def _not_started(p: Study, why: str) -> NoReturn:
    """Ray's start failed before this run claimed or wrote anything: one line, exit 2, and the command to run again
    (--resume's where the study was claimed by an earlier run)."""
    cmd = resume_command(p.run) if p.run.resume else [sys.executable, *(redact(a) for a in p.run.argv)]
    what = f"joining the Ray cluster at --address {p.run.address} failed" if p.run.address else "Ray did not start"
    fail(f"{p.plan.name}: {what} ({redact(why)}); nothing of this run was written. A loaded machine can make Ray's "
         f"start time out: {'continue' if p.run.resume else 'start it again'} with: {shlex.join(cmd)}"
         + ("" if p.run.address else "; or start Ray beforehand (`ray start --head`) and pass --address auto"))



def disk_full(e: BaseException) -> bool:
    cur: BaseException | None = e  # then its causes, up the chain
    while cur is not None:
        if isinstance(cur, OSError) and cur.errno == errno.ENOSPC:
            return True
        text = str(cur).lower()
        if "no space left" in text or "database or disk is full" in text or "disk is full" in text:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@contextmanager
def ray_session(p: Study) -> Iterator[dict[str, float]]:
    """Ray started (or joined, --address) for the study; yields the cluster's resources. When the study ends
    inside the block (bad input, Ctrl-C), Ray is shut down here; otherwise it stays up: the trials run in it
    next, and it ends with this process (as a Ray session the caller started keeps running)."""
    import ray

    set_checkpoint_period(p.total)
    try:
        with interrupts.ray_starting():  # Ray's start is never cut in half, nor its SIGTERM handler ours
            res = _start_ray(p)
    except KeyboardInterrupt:
        ray.shutdown()
        interrupted("starting Ray", p)
    except StudyInputError as e:
        fail(str(e))
    except _NotStarted as e:
        _not_started(p, str(e))
    try:
        yield res
    except BaseException:
        ray.shutdown()
        raise


def interrupted(doing: str, p: Study | None = None, ran: bool = False) -> NoReturn:
    """A study stopped by the user outside Tune's fit: one line, exit 130. `p`: the study's folder was claimed,
    so the line says how to start it again (or, when trials ran or on --resume, to continue it)."""
    again = ""
    if p is not None:
        go_on = ran or p.run.resume
        cmd = resume_command(p.run) if go_on else [sys.executable, *[redact(a) for a in p.run.argv]]
        again = f"; {'continue' if go_on else 'start it again'} with: {shlex.join(cmd)}"
    print(f"\n{p.plan.name + ' ' if p is not None else ''}interrupted ({interrupts.current().name}) while {doing}"
          f"{'' if ran else '; no trial ran'}{again}", file=sys.stderr, flush=True)
    raise Exit(INTERRUPTED) from None

