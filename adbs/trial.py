"""One trial: the loops of adbs/loops.py, with the base-session cache, checkpoints and resume.

A trial has one path: validate, build the data, get the base session from the base-session store (the
cache, or a store that trains every time), then run the incremental sessions. Where it starts depends
only on `resume`, a state handed earlier to `Hooks.on_checkpoint`:

- none, or a base-session state: the base session is trained from there (or, with the cache, loaded
  when an identical one was trained before, adbs/cache.py: base_key), then every session runs;
- a session state: its base session comes from the state itself, or from the cache by its key (trained
  again, to the same numbers, when the cache no longer has it), and the sessions after it run.

Every state handed to `Hooks.on_checkpoint` carries the key of the configuration that wrote it (`checkpoint_key`):
resumed by a trial of another configuration (a checkpoint copied or restored beside another trial), it is refused
with CheckpointKeyError before anything runs, so no trial continues another's training; a state written before states
carried their key is not resumed from (the trial starts again, to the same numbers: training is deterministic).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from functools import partial
from typing import Any, Callable, Protocol

from adbs.cache import BaseCache, base_key
from adbs.config import Config
from adbs.data import FSCILData, build_data
from adbs.loops import train_base
from adbs.trainer import Hooks
from adbs.runtime import resolve_device
from adbs.sessions import run_sessions
from adbs.metrics import base_novel_summary
from adbs.state import (
    BaseCheckpoint,
    BaseSession,
    Checkpoint,
    CheckpointKeyError,
    SessionCheckpoint,
    TrialResult,
    read_checkpoint,
)


class _BaseStore(Protocol):
    """What run_trial needs of a base-session store: BaseCache, or _NoStore without the cache."""

    def get_or_train(self, key: str, train: Callable[[], BaseSession],
                     meta: dict[str, Any] | None = None) -> tuple[BaseSession, bool]: ...


class _NoStore:
    """The base-session store without the cache: every base session is trained."""

    persistent = False

    def get_or_train(self, key: str, train, meta: dict[str, Any] | None = None):
        return train(), False


def checkpoint_key(cfg: Config) -> str:
    """The key a trial's checkpoints carry: a hash of its whole configuration (seed included), which a trial
    resumed from one must have."""
    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:20]


def _keyed(hooks: Hooks, key: str) -> Hooks:
    """`hooks` whose on_checkpoint states carry `key`."""
    save = hooks.on_checkpoint
    return hooks if save is None else dataclasses.replace(hooks, on_checkpoint=lambda state: save({**state, "key": key}))


def _resumed(cfg: Config, resume: dict[str, Any] | Checkpoint | None, hooks: Hooks) -> Checkpoint | None:
    """The checkpoint to resume from: `resume` read (another format: StateFormatError), checked to be this
    configuration's (another's: CheckpointKeyError); None for a saved state without a key (written before states
    carried one), said in a line."""
    if resume is None:
        return None
    checkpoint = read_checkpoint(resume)
    if not isinstance(resume, dict):  # a typed checkpoint handed over in this process
        return checkpoint
    key, got = checkpoint_key(cfg), resume.get("key")
    if got is None:
        if hooks.log:
            hooks.log("the trial checkpoint carries no configuration key (written before checkpoints carried one); "
                      "the trial starts again from the beginning, to the same numbers")
        return None
    if got != key:
        raise CheckpointKeyError(f"the trial checkpoint was written by another configuration (key {str(got)[:40]!r}, "
                                 f"this trial's is {key!r}): it is not resumed from; start the trial without it, or "
                                 "resume it with the configuration that wrote it")
    return checkpoint


def run_trial(
    cfg: Config,
    *,
    hooks: Hooks | None = None,
    data: FSCILData | None = None,
    cache: BaseCache | str | None = None,
    resume: dict[str, Any] | Checkpoint | None = None,
) -> TrialResult:
    """The full pipeline for one config and seed: validate, build data, base session, all sessions.

    With `cache` (a BaseCache or its folder), the base session is loaded when an
    identical one was trained before (see adbs.cache.base_key) and stored
    otherwise; a reused base session replays its per-epoch curve through
    `hooks.on_base_epoch` with reused=1, so curves stay comparable.

    With `resume` (a state from `hooks.on_checkpoint`), the trial continues where
    that state was taken; hooks are called only for epochs/sessions after it. A state of
    another format (adbs/state.py: FORMAT) is refused (StateFormatError) before anything runs.
    """
    t0 = time.perf_counter()
    hooks = hooks or Hooks()
    cfg.validate()
    checkpoint = _resumed(cfg, resume, hooks)
    hooks = _keyed(hooks, checkpoint_key(cfg))
    data = data if data is not None else build_data(cfg)
    if isinstance(cache, BaseCache):
        base_cache: BaseCache | None = cache
    else:
        base_cache = None if cache is None else BaseCache(cache)
    store: _BaseStore = _NoStore() if base_cache is None else base_cache
    cached = base_cache is not None
    kind = resolve_device(cfg).type
    # the key hashes the input files (remembered per file version): only computed when the cache is used
    key = base_key(cfg, kind) if cached else "uncached"
    session_resume = checkpoint if isinstance(checkpoint, SessionCheckpoint) else None

    if session_resume is not None and session_resume.base is not None:  # the checkpoint carries its base session
        base_session, reused = session_resume.base, session_resume.base_reused
    elif session_resume is not None:  # it refers to the cached base session: loaded, or trained again (deterministic)
        if not cached and hooks.log:
            hooks.log(f"base session {session_resume.base_key} is not available without the cache; training it again")
        base_session, _ = store.get_or_train(key, lambda: train_base(cfg, data, Hooks(log=hooks.log)),
                                             meta={"config": cfg.to_dict()})
        reused = session_resume.base_reused
    else:
        base_resume = checkpoint if isinstance(checkpoint, BaseCheckpoint) else None
        base_session, reused = store.get_or_train(key, lambda: train_base(cfg, data, hooks, base_resume),
                                                  meta={"config": cfg.to_dict()})
        if reused:
            if hooks.log:
                hooks.log(f"base session reused from cache {key} (best epoch {base_session.best_epoch})")
            for row in base_session.curve:
                if hooks.on_base_epoch:
                    hooks.on_base_epoch({**row, "reused": 1.0})
    # Session checkpoints name the cached base session instead of carrying it (base_ref), when there is one.
    carried = session_resume is not None and session_resume.base is not None
    base_ref = {"base_key": key, "base_reused": reused} if cached and not carried else None
    features = None if base_cache is None else partial(base_cache.features, key)  # stored val/test features
    result = run_sessions(cfg, data, base_session, hooks, session_resume, features, base_ref)
    # added beside the summary run_sessions made, never over it: the numbers existing studies report stay put
    result.summary.update({k: v for k, v in base_novel_summary(result.sessions).items() if k not in result.summary})
    result.summary["base_reused"] = float(reused)
    result.summary["wall_time_s"] = time.perf_counter() - t0
    return result
