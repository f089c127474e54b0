"""What a trial costs, and what the platform saves: four ratios, each measured in this run.

    python bench/bench.py            # ~6-9 min on a 2-core CPU
    python bench/bench.py --quick    # smaller settings, ~3 min (noisier ratios)

Prints one line per figure:
  1. kshot_grid with base-session reuse vs the same grid with --no-cache: wall-time ratios
     (the grid vs one full trial, with and without reuse);
  2. incremental sessions (all of them) vs the base session, per trial (direct call);
  3. platform overhead: one trial through studies/alpha_sweep.py vs the same pipeline called
     directly (with and without Ray's start-up);
  4. two concurrent trials vs one after the other through the platform: throughput ratio.
Every study runs on the embedded benchmark in a temporary storage and MLflow store.
The settings are the `bench` overrides below (a shorter CPU trial than the default preset,
so the uncached 12-cell grid fits the time budget); ratios, not absolute times, are the point.
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

from adbs.config import preset  # noqa: E402
from adbs.data import build_data  # noqa: E402
from adbs.train import Hooks, run_sessions, train_base  # noqa: E402

BENCH = {"base_epochs": 4, "base_images_per_class": 40}
QUICK = {"base_epochs": 2, "base_images_per_class": 20}


def study(script: str, storage: Path, *args: str) -> float:
    """Wall time of one study command (a fresh driver, as a user runs it)."""
    cmd = [sys.executable, str(ROOT / "studies" / script), "--storage", str(storage),
           "--tracking-uri", f"sqlite:///{storage}/mlflow.db", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def sets(overrides: dict) -> list[str]:
    return [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller settings (noisier ratios)")
    args = ap.parse_args()
    ov = QUICK if args.quick else BENCH
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    print(f"bench settings: cpu preset + {ov}; machine: {os.cpu_count()} CPUs", flush=True)

    # 2. incremental sessions vs base session, one trial called directly (1 thread, as a trial gets).
    import torch

    torch.set_num_threads(1)
    cfg = preset("cpu", **ov)
    data = build_data(cfg)
    t0 = time.perf_counter()
    base = train_base(cfg, data, Hooks())
    t_base = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_sessions(cfg, data, base, Hooks())
    t_sessions = time.perf_counter() - t0
    t_direct = t_base + t_sessions
    print(f"[2] incremental sessions / base session: {t_sessions:.1f}s / {t_base:.1f}s = "
          f"{100 * t_sessions / t_base:.1f}% (target < 5%)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # 3. platform overhead: the same single trial (one alpha, one seed, no pruning).
        one = ["--num-samples", "1", "--pruner", "none", "--seeds", "0", "--max-concurrent", "1",
               "--cpus-per-trial", "1", *sets(ov)]
        t_platform = study("alpha_sweep.py", tmp / "s3", *one)
        print(f"[3] one trial through the platform / called directly: {t_platform:.1f}s / {t_direct:.1f}s = "
              f"{t_platform / t_direct:.2f}x (overhead {100 * (t_platform / t_direct - 1):.0f}%, includes Ray "
              f"start-up and MLflow logging; target < 10% for a one-minute trial)", flush=True)

        # 4. two trials concurrently vs one after the other (2 seeds of one config).
        two = ["--num-samples", "1", "--pruner", "none", "--seeds", "0", "1", "--no-cache", "--cpus-per-trial", "1",
               *sets(ov)]
        t_seq = study("alpha_sweep.py", tmp / "s4a", *two, "--max-concurrent", "1")
        t_par = study("alpha_sweep.py", tmp / "s4b", *two, "--max-concurrent", "2")
        print(f"[4] two trials, concurrent vs sequential: {t_seq:.1f}s / {t_par:.1f}s = {t_seq / t_par:.2f}x "
              f"throughput (target >= 1.7x)", flush=True)

        # 1. kshot grid (12 cells) with base-session reuse vs --no-cache.
        grid = ["--max-concurrent", "2", *sets(ov)]
        t_cached = study("kshot_grid.py", tmp / "s1a", *grid)
        t_uncached = study("kshot_grid.py", tmp / "s1b", *grid, "--no-cache")
        print(f"[1] kshot_grid (12 cells): reuse {t_cached:.1f}s = {t_cached / t_platform:.2f}x one trial "
              f"(target <= 1.5x); --no-cache {t_uncached:.1f}s = {t_uncached / t_platform:.2f}x one trial; "
              f"reuse saves {t_uncached / t_cached:.1f}x", flush=True)


if __name__ == "__main__":
    main()
