"""Metric names and the other keys of what a trial reports are contracts: one place defines them, study, tuner,
tracker and tables import them (and nothing else from each other for them, so no module imports back).

- `base/<k>`    one value per base epoch, MLflow step = epoch (1-based, as adbs.loops reports it);
- `session/<k>` one value per session, MLflow step = session index (0 = base session);
- `summary/<k>` once per trial.

The search objective is validation average accuracy over all sessions; test metrics are
reported, never optimised (docs/protocols.md, "Validation, not test": the released code picks its best base
epoch on test accuracy).
"""

from __future__ import annotations

import base64
import json
import math
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BASE", "SESSION", "SUMMARY", "OBJECTIVE", "MODE", "BASE_STEP", "BASE_PRUNE_VALUE", "REUSED", "SESSION_STEP",
           "REPORT_KIND", "KIND_BASE", "KIND_SESSION", "KIND_SUMMARY", "KIND_FAILED", "ERROR", "WARNING",
           "SESSION_METRICS", "LEGACY_NAMES", "COMPLETE", "PRUNED", "FAILED", "DIVERGED", "ENDED", "INTERRUPTED",
           "RUNNING", "base", "session", "summary", "strip", "finite", "BOUNDARIES_KEY", "EMBEDDINGS_KEY",
           "OPTUNA_TRIAL_KEY", "EMBEDDINGS", "encode_embeddings", "decode_embeddings"]

BASE = "base/"
SESSION = "session/"
SUMMARY = "summary/"

OBJECTIVE = "summary/val_avg_acc"
"""The one search objective (Optuna direction and Tune searcher metric), maximised."""
MODE = "max"

BASE_STEP = "base/epoch"
"""Step of a base-epoch report (1-based epoch)."""
BASE_PRUNE_VALUE = "base/val_acc"
"""What the pruner sees per base epoch: validation accuracy of the base session."""
REUSED = "base/reused"
"""1 on a base epoch replayed from a base session the cache held (adbs/trial.py: run_trial), 0 on one trained."""
SESSION_STEP = "session/session"
"""Step of a session report (0 = base)."""

REPORT_KIND = "report_kind"
"""Numeric tag on every tune.report: which of the three report kinds it is."""
KIND_BASE, KIND_SESSION, KIND_SUMMARY = 0, 1, 2
KIND_FAILED = 3
"""A trial that stopped on a numerical fault (NaN/inf); its reason is under ERROR."""
ERROR = "error"
WARNING = "warning"
"""Summary-report key (and trials.parquet column, MLflow tag adbs.warning): the trial's collapse warnings
(adbs.metrics.collapse_warnings) joined by '; ', empty when none."""

# Session columns of the results table / paper table (without prefix).
SESSION_METRICS = (
    "n_classes", "val_acc", "val_base_acc", "val_novel_acc", "val_hmean",
    "test_acc", "test_base_acc", "test_novel_acc", "test_hmean",
    "test_pred_novel_share", "test_unpredicted_classes", "val_pred_novel_share", "val_unpredicted_classes",
    "boundary_mean", "boundary_min", "boundary_max", "boundary_negative", "boundary_base_mean", "boundary_novel_mean",
    "boundary_base_abs_min", "boundary_base_abs_mean", "boundary_base_abs_max",
    "boundary_novel_abs_min", "boundary_novel_abs_mean", "boundary_novel_abs_max",
)
LEGACY_NAMES = {"margin_mean": "boundary_mean", "margin_min": "boundary_min", "margin_max": "boundary_max",
                "margin_base_mean": "boundary_base_mean", "margin_novel_mean": "boundary_novel_mean"}
"""Metric names of runs logged before the boundary diagnostics (m was called margin): read under the new names."""

# Trial states recorded in MLflow (tag adbs.state), in the tables and (as Optuna states) in the study.
COMPLETE, PRUNED, FAILED = "COMPLETE", "PRUNED", "FAILED"
"""FAILED: the trial raised an error (or ended without a result for no reason the platform gave): a study with one
exits 1 (adbs_lab/driver/outcome.py: study_code)."""
DIVERGED = "DIVERGED"
"""The trial stopped on a NaN/inf loss or boundary (adbs.loops.NumericalError): an outcome of the search, recorded
as such, not an error; Optuna holds it FAIL (a configuration that diverges has no mean), MLflow status FAILED."""
ENDED = (COMPLETE, PRUNED, DIVERGED, FAILED)
"""The states of a trial that ran to its end."""
INTERRUPTED = "INTERRUPTED"
"""Tables only: the study was stopped (Ctrl-C, crash) before this trial ended; --resume continues it."""
RUNNING = "RUNNING"
"""Reports only (studies/report.py): the trial was still running in a study that is still running."""


def base(metrics: dict[str, float]) -> dict[str, float]:
    return {BASE + k: float(v) for k, v in metrics.items() if _is_number(v)}


def session(metrics: dict[str, float]) -> dict[str, float]:
    return {SESSION + k: float(v) for k, v in metrics.items() if _is_number(v)}


def summary(metrics: dict[str, float]) -> dict[str, float]:
    return {SUMMARY + k: float(v) for k, v in metrics.items() if _is_number(v)}


def strip(prefix: str, result: dict) -> dict[str, float]:
    """The metrics of one prefix, prefix removed."""
    return {k[len(prefix):]: v for k, v in result.items() if isinstance(k, str) and k.startswith(prefix)}


def finite(x) -> TypeGuard[int | float | np.integer | np.floating]:
    return _is_number(x) and math.isfinite(float(x))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or _is_np_number(v)


def _is_np_number(v) -> bool:
    try:
        import numpy as np

        return isinstance(v, (np.integer, np.floating))
    except ImportError:  # pragma: no cover
        return False


# What a trial reports besides metrics: keys of its summary report and of its Tune config, and the column of
# trials.parquet they become; trainable writes them, records, tracking and the figures read them.
BOUNDARIES_KEY = "boundaries_json"
"""Key of the trial's summary report holding json.dumps(TrialResult.boundaries): one list of m per session."""

EMBEDDINGS_KEY = "embeddings_json"
"""Key of the trial's summary report holding encode_embeddings(TrialResult.extra["embeddings"]) (keep_embeddings)."""

OPTUNA_TRIAL_KEY = "_optuna_trial"
"""Trial-config key holding the Optuna trial number (logged as tag adbs.optuna_trial)."""

EMBEDDINGS = "embeddings"
"""trials.parquet column: a trial's embedding sample (encode_embeddings); None when it kept none."""

_ARRAYS = ("features", "similarity")


def encode_embeddings(sample: dict[str, Any]) -> str:
    """adbs.metrics.embedding_sample as compact JSON: its two matrices as base64 float16 (~70 kB a trial, not
    ~400 kB of decimals), since the string travels in Tune's result, trials.parquet and an MLflow artifact."""
    import numpy as np  # late: the keys alone are imported by every process

    out = {k: v for k, v in sample.items() if k not in _ARRAYS}
    for k in _ARRAYS:
        a = np.asarray(sample[k], dtype=np.float16)
        out[k] = {"shape": list(a.shape), "float16_base64": base64.b64encode(a.tobytes()).decode("ascii")}
    return json.dumps(out, separators=(",", ":"))


def decode_embeddings(text: str) -> dict[str, Any]:
    """encode_embeddings' inverse: the two matrices as float32 numpy arrays."""
    import numpy as np  # late: the keys alone are imported by every process

    d = json.loads(text)
    for k in _ARRAYS:
        a = d[k]
        d[k] = np.frombuffer(base64.b64decode(a["float16_base64"]), dtype=np.float16).reshape(a["shape"]).astype(
            np.float32)
    return d
