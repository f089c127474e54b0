"""The Tune function trainable: one Tune trial = one config + one seed = the full FSCIL pipeline.

Reports, all through `tune.report` (Ray 2.60: never `ray.train.report` inside Tune):
- after each base epoch: `base/*` (step key base/epoch);
- after each session: `session/*` (step key session/session, 0 = base);
- at the end: `summary/*`.
Every report carries the objective key (strict metric checking), as NaN until the summary;
StudySearch never tells that placeholder to Optuna (it checks REPORT_KIND).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tempfile
from typing import Any, Callable

from adbs.exits import FAILED
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.metrics_keys import BOUNDARIES_KEY, EMBEDDINGS_KEY, encode_embeddings
from adbs_lab.records.tune_keys import trial_config

CHECKPOINT_FILE = "trial_state.pt"
CHECKPOINT_DIGEST = "trial_state.sha256"
"""Beside the state: its SHA-256, checked when a restarted trial loads it (write_checkpoint, load_checkpoint)."""
NODE_ID_KEY = "ray_node_id"


def make_trainable(*, trial_fn: Callable | None = None, cache_dir: str | None = None,
                   checkpoint_every: int = 5) -> Callable[[dict[str, Any]], None]:
    """`trial_fn(cfg, hooks=..., cache=..., resume=...)` defaults to adbs.trial.run_trial (tests may pass a fake).

    The trial's Config comes resolved in its Tune config (tune_keys.trial_config), its torch threads included
    (the driver writes --cpus-per-trial into them: adbs_lab/study.py; adbs/runtime.py applies them).
    cache_dir: base-session cache shared by the study's trials (None = --no-cache).
    Checkpoints: the trial state from adbs.loops's on_checkpoint hook is attached to the
    next report; a trial restarted by Ray Tune (FailureConfig) resumes from the latest one.
    A NaN/inf loss or boundary (NumericalError) ends the trial as FAILED with its reason, not as an
    error Tune would retry: it would fail the same way again.
    """

    def adbs_trial(config: dict[str, Any]) -> None:
        from ray import tune

        from adbs.trainer import Hooks, NumericalError

        _quiet_stop()
        # Ray Train logs every checkpoint at INFO ("Checkpoint successfully created at: ..."), one
        # long line per epoch/session per trial in the study's output; the progress lines say enough.
        import logging

        logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)
        cfg = trial_config(config)
        reports = _Reports(cfg)
        hooks = Hooks(on_base_epoch=reports.base_epoch, on_session=reports.session,
                      on_checkpoint=reports.checkpoint, checkpoint_every=checkpoint_every)
        resume, cache = _resume_state(), _cache(cache_dir)
        if trial_fn is None:
            from adbs.trial import run_trial as fn
        else:
            fn = trial_fn
        kwargs = {"cache": cache, "resume": resume} if trial_fn is None else {}
        try:
            result = fn(cfg, hooks=hooks, **kwargs)
        except NumericalError as e:
            tune.report({**PLACEHOLDER, K.REPORT_KIND: K.KIND_FAILED, K.ERROR: str(e)})
            return
        tune.report(_summary(result))

    return adbs_trial


PLACEHOLDER = {K.OBJECTIVE: float("nan")}
"""The objective in every report before the summary (strict metric checking); StudySearch never tells it."""


class _Reports:
    """The trial's base-epoch and session reports; a checkpoint rides with the report after it."""

    def __init__(self, cfg) -> None:
        self.cfg = cfg
        self.pending: list[dict[str, Any]] = []  # a checkpoint waiting for the report it belongs to

    def checkpoint(self, state: dict[str, Any]) -> None:
        self.pending[:] = [state]

    def report(self, metrics: dict[str, Any]) -> None:
        from ray import tune

        if not self.pending:
            tune.report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            write_checkpoint(self.pending.pop(), tmp)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))

    def base_epoch(self, m: dict[str, float]) -> None:
        self.report({**K.base(m), **PLACEHOLDER, K.REPORT_KIND: K.KIND_BASE})
        _inject_fault(self.cfg, int(m["epoch"]))

    def session(self, m: dict[str, float]) -> None:
        self.report({**K.session(m), **PLACEHOLDER, K.REPORT_KIND: K.KIND_SESSION})


def _resume_state() -> dict[str, Any] | None:
    """The latest checkpoint's trial state when Tune restarted this trial after a crash, else None."""
    from ray import tune

    ckpt = tune.get_checkpoint()
    if ckpt is None:
        return None
    with ckpt.as_directory() as d:
        return load_checkpoint(d)


def write_checkpoint(state: dict[str, Any], folder: str) -> None:
    """The trial state and its SHA-256 into `folder` (Tune copies the folder to the study's storage)."""
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    blob = buf.getvalue()
    with open(os.path.join(folder, CHECKPOINT_FILE), "wb") as f:
        f.write(blob)
    with open(os.path.join(folder, CHECKPOINT_DIGEST), "w") as f:
        f.write(hashlib.sha256(blob).hexdigest())


def load_checkpoint(folder: str) -> dict[str, Any] | None:
    """The trial state in `folder`, or None (the trial starts again from its beginning, to the same numbers: training
    is deterministic) when it is damaged: unreadable, or its bytes not those its SHA-256 was taken of. One line
    names it; a damaged state is never resumed from. A checkpoint without the digest (written before it existed)
    is only load-checked. A state of another format (adbs/state.py: FORMAT; e.g. written before checkpoints
    carried one) starts the trial over the same way: run_trial would refuse it, and fail every restart."""
    import torch

    from adbs.state import FORMAT

    path = os.path.join(folder, CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            blob = f.read()
        digest = os.path.join(folder, CHECKPOINT_DIGEST)
        if os.path.exists(digest):
            with open(digest) as f:
                if f.read().strip() != hashlib.sha256(blob).hexdigest():
                    raise ValueError("its bytes do not match the SHA-256 written with it")
        state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
        if not isinstance(state, dict) or "phase" not in state:
            raise ValueError(f"it holds a {type(state).__name__}, not a trial state")
    except Exception as e:  # noqa: BLE001 - damaged in any way: start over rather than fail or resume wrong
        print(f"trial checkpoint {path} is damaged ({type(e).__name__}: {str(e)[:120]}); the trial starts again "
              "from its beginning (the same numbers: training is deterministic)", file=sys.stderr, flush=True)
        return None
    got = state.get("format", 1)  # format 1: before checkpoints carried one (adbs/state.py)
    if got != FORMAT:
        version = "an older" if isinstance(got, int) and got < FORMAT else "another"
        print(f"trial checkpoint {path} is from {version} version of adbs (format {got!r}; this version reads "
              f"format {FORMAT}); the trial starts again from its beginning (the same numbers: training is "
              "deterministic)", file=sys.stderr, flush=True)
        return None
    return state


def _cache(cache_dir: str | None):
    """The study's base-session cache (None = --no-cache)."""
    if cache_dir is None:
        return None
    from ray import tune

    from adbs.cache import BaseCache

    # holder = this Tune trial: restarted after its worker died, it takes over its own lease at once
    return BaseCache(cache_dir, holder=tune.get_context().get_trial_id())


def _summary(result) -> dict[str, Any]:
    """The trial's last report: summary/*, m of every class after every session, embeddings, warnings, node."""
    import ray

    summary = K.summary(result.summary)
    summary.setdefault(K.OBJECTIVE, float("nan"))
    # m of every class after every session (the tracker logs it as boundaries.csv)
    boundaries = getattr(result, "boundaries", None)
    extra = {BOUNDARIES_KEY: json.dumps(boundaries)} if boundaries else {}
    sample = (getattr(result, "extra", None) or {}).get("embeddings")
    if sample:  # keep_embeddings: the t-SNE and similarity figures' data (the tracker logs embeddings.json)
        extra[EMBEDDINGS_KEY] = encode_embeddings(sample)
    extra[K.WARNING] = "; ".join(getattr(result, "warnings", None) or [])  # collapse warnings, "" if none
    # Which Ray node ran the trial (result.json beside Tune's node_ip/pid, which cannot tell apart
    # two nodes on one host); the tracker and the tables ignore keys outside base/ session/ summary/.
    extra[NODE_ID_KEY] = ray.get_runtime_context().get_node_id()
    return {**summary, K.REPORT_KIND: K.KIND_SUMMARY, **extra}


def _quiet_stop() -> None:
    """A trial stopped by the pruner ends with Ray sending its worker SIGTERM; Ray's handler raises SystemExit,
    and when that lands inside a garbage-collector callback Python prints it as "Exception ignored in ...
    SystemExit: 1" with a traceback, which Ray forwards into the study's progress output. Those (and only
    those) are dropped in the trial's process; any other unraisable exception is reported as before."""
    import sys

    if getattr(sys.unraisablehook, "_adbs_quiet_stop", False):
        return
    default = sys.unraisablehook

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, SystemExit):
            return
        default(unraisable)

    hook._adbs_quiet_stop = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


FAULT_ENV = "ADBS_FAULT_INJECTION"


def _inject_fault(cfg, epoch: int) -> None:
    """Fault injection for the reliability tests; does nothing unless ADBS_FAULT_INJECTION is set.

    JSON with any of: {"kill_at_base_epoch": N, "marker_dir": DIR} kills the trial's worker process
    (os._exit) after base epoch N, once per trial seed (a marker file remembers it), so Ray Tune
    restarts it from its checkpoint; {"nan_seed": S} raises the NumericalError a NaN loss would
    raise, in the trial with Config.seed == S; {"raise_if": {FIELD: VALUE, ...}} raises a RuntimeError (an error,
    not a numerical fault) after base epoch 1 of every trial whose Config has those values.
    """
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    import json

    from adbs.trainer import NumericalError

    f = json.loads(spec)
    if f.get("raise_if") and all(getattr(cfg, k) == v for k, v in f["raise_if"].items()):
        raise RuntimeError(f"injected error at base epoch {epoch}")
    if f.get("nan_seed") == cfg.seed:
        raise NumericalError(f"base training loss became NaN/inf at base epoch {epoch} (injected)")
    if f.get("kill_at_base_epoch") == epoch:
        marker = os.path.join(f["marker_dir"], f"killed-seed{cfg.seed}")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(FAILED)  # a worker that dies as a crash does, not by an exception

