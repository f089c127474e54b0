"""What a trial costs, and what the platform saves: four ratios, each measured in this run.

    python bench/bench.py            # ~9 min on a 2-core CPU (idle machine)
    python bench/bench.py --quick    # smaller trials, ~5 min (fixed start-up costs weigh more)

Prints one line per figure, each a ratio of two times measured in this run:
  1. kshot_grid (12 cells) with base-session reuse vs the same grid with --no-cache, both as a
     multiple of one full trial through the platform;
  2. all incremental sessions vs the base session of one trial (the pipeline called directly);
  3. platform overhead: one trial through studies/alpha_sweep.py vs the same pipeline called
     directly: end to end (Ray start, MLflow store, tables and figures included) and for the
     trial alone (its span inside Ray Tune);
  4. two concurrent trials vs one: trials per second, from the trials' spans inside Ray Tune
     (and end to end).
Every study runs on the embedded benchmark in a temporary storage and MLflow store, 1 CPU per
trial. Settings: the CPU preset with the `BENCH` overrides below (5 base epochs instead of 8, so
the uncached 12-cell grid fits the time budget). Trial spans come from trials.parquet
(started_at/finished_at, Tune's timestamps: 1 s resolution).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BENCH = {"base_epochs": 5}
QUICK = {"base_epochs": 2, "base_images_per_class": 20}


def study(script: str, storage: Path, *args: str) -> tuple[float, "pd.DataFrame"]:  # noqa: F821
    """Wall time of one study command (a fresh driver, as a user runs it) and its trials table."""
    import pandas as pd

    cmd = [sys.executable, str(ROOT / "studies" / script), "--storage", str(storage),
           "--tracking-uri", f"sqlite:///{storage}/mlflow.db", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    trials = pd.read_parquet(storage / script.removesuffix(".py") / "trials.parquet")
    if not (trials["state"] == "COMPLETE").all():
        sys.exit(f"bench: {script} had trials that did not complete:\n{trials[['label', 'state', 'error']]}")
    return wall, trials


def span(trials) -> float:
    """Seconds from the first trial's start to the last trial's end, inside Ray Tune."""
    return float(trials["finished_at"].max() - trials["started_at"].min())


def sets(overrides: dict) -> list[str]:
    return [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller trials (fixed start-up costs weigh more)")
    args = ap.parse_args()
    ov = QUICK if args.quick else BENCH
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    load = os.getloadavg()[0]
    print(f"bench settings: cpu preset + {ov}; machine: {os.cpu_count()} CPUs, load average {load:.2f} at start",
          flush=True)
    t_bench = time.perf_counter()

    # 2. incremental sessions vs base session, one trial called directly (1 thread, as a trial gets).
    # The imports are timed too: a trial's worker process pays them, so "called directly" does as well.
    t0 = time.perf_counter()
    import torch

    from adbs.config import preset
    from adbs.data import build_data
    from adbs.loops import train_base
    from adbs.trainer import Hooks
    from adbs.sessions import run_sessions

    t_import = time.perf_counter() - t0
    torch.set_num_threads(1)
    cfg = preset("cpu", **ov)
    t0 = time.perf_counter()
    data = build_data(cfg)
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = train_base(cfg, data, Hooks())
    t_base = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = run_sessions(cfg, data, base, Hooks())
    t_sessions = time.perf_counter() - t0
    t_features = result.extra["features_s"]
    t_direct = t_import + t_data + t_base + t_sessions
    per_epoch = t_base / cfg.base_epochs
    print(f"    one trial called directly: {t_direct:.1f}s = imports {t_import:.1f}s + data {t_data:.1f}s + base session "
          f"{t_base:.1f}s + sessions {t_sessions:.1f}s", flush=True)
    print(f"[2] incremental sessions / base session: {t_sessions:.1f}s / {t_base:.1f}s = "
          f"{100 * t_sessions / t_base:.1f}% (target < 5%), of which {t_features:.1f}s extract the val/test "
          f"features once (stored with the base session and reused by every trial on it) and "
          f"{t_sessions - t_features:.1f}s = {100 * (t_sessions - t_features) / t_base:.1f}% are the sessions' own work; "
          f"the {len(data.sessions) - 1} sessions cost "
          f"{t_sessions / per_epoch:.1f} base epochs here, so they are under 5% once a base session has "
          f"{20 * t_sessions / per_epoch:.0f}+ epochs of this size (the paper's CIFAR100 setting: 100 epochs of "
          f"all 500 images/class)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        common = ["--num-samples", "1", "--pruner", "none", "--cpus-per-trial", "1", *sets(ov)]
        # 3. platform overhead: the same single trial (one alpha, one seed, no pruning).
        t_one, one = study("alpha_sweep.py", tmp / "s3", *common, "--seeds", "0", "--max-concurrent", "1")
        s_one = span(one)
        # Tune's clock for a trial starts once its worker holds the trainable, whose unpickling already
        # imported torch and adbs: compare that span with the direct trial without its imports.
        print(f"[3] one trial through the platform / called directly: end to end {t_one:.1f}s / {t_direct:.1f}s = "
              f"{t_one / t_direct:.2f}x (+{t_one - t_direct:.0f}s: Ray start, MLflow store, tables, figures); "
              f"the trial inside Ray Tune {s_one:.0f}s / {t_direct - t_import:.1f}s = {s_one / (t_direct - t_import):.2f}x "
              f"(target < 1.10x for a one-minute trial)", flush=True)

        # 4. two trials at once (2 seeds of one config) vs the one trial above.
        t_two, two = study("alpha_sweep.py", tmp / "s4", *common, "--seeds", "0", "1", "--max-concurrent", "2",
                           "--no-cache")
        s_two = span(two)
        print(f"[4] two concurrent trials vs one: {2 / s_two:.4f} / {1 / s_one:.4f} trials/s inside Ray Tune = "
              f"{2 * s_one / s_two:.2f}x throughput (target >= 1.7x); end to end {2 * t_one / t_two:.2f}x",
              flush=True)

        # 1. kshot grid (12 cells) with base-session reuse vs --no-cache.
        grid = ["--max-concurrent", "2", *sets(ov)]
        t_cached, cached = study("kshot_grid.py", tmp / "s1a", *grid)
        trained = int((cached["base_reused"] == 0).sum())
        t_uncached, _ = study("kshot_grid.py", tmp / "s1b", *grid, "--no-cache")
        print(f"[1] kshot_grid (12 cells, {trained} base session trained): reuse {t_cached:.1f}s = "
              f"{t_cached / t_one:.2f}x one trial end to end (target <= 1.5x); --no-cache {t_uncached:.1f}s = "
              f"{t_uncached / t_one:.2f}x; reuse saves {t_uncached / t_cached:.1f}x", flush=True)
    print(f"bench: {time.perf_counter() - t_bench:.0f}s; load average {os.getloadavg()[0]:.2f} at the end", flush=True)


if __name__ == "__main__":
    main()
