"""Calibration figures of the embedded benchmark: does the fixed-boundary baseline look like CIFAR-100?

    python bench/calibrate_benchmark.py                          # benchmark v3, CPU preset, baseline, seeds 0 1 2
    python bench/calibrate_benchmark.py --version 2 --set backbone=convnet   # v2 as it was calibrated
    python bench/calibrate_benchmark.py --set variant=adb+ic     # the same figures for another config

Runs the full pipeline (`adbs.trial.run_trial`, no Ray) once per seed (Config.seed and split_seed
together, as the studies' seeds) and prints, per seed and as a mean, the figures the benchmark is
calibrated on, next to their targets: base-session test accuracy, last-session test accuracy,
PD (performance drop), last-session novel-class accuracy, the base validation accuracy after
the first base epoch as a share of the best epoch's, and the class separation D_cs of the last
session's prototypes. The targets are the shape of real CIFAR-100 runs of the fixed-boundary baseline
and the paper's D_cs of that baseline on CIFAR-100, 0.8846 (docs/boundary-dynamics.md); the benchmark
is calibrated on the baseline only, never on ADBS. Time: ~25 s per seed on an idle 2-core CPU (~1.5 min
by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs.config import PRESETS, ConfigError, coerce, from_dict  # noqa: E402

# (low, high) of each figure for the baseline under the CPU preset.
TARGETS = {
    "base_acc": (72.0, 82.0),
    "last_acc": (45.0, 56.0),
    "pd": (24.0, 32.0),
    "last_novel_acc": (10.0, 35.0),
    "epoch1_share": (0.0, 0.5),
    "d_cs": (0.85, 0.92),  # the paper's baseline on CIFAR-100: 0.8846 (Table 4)
}
NAMES = {
    "base_acc": "session 0 test acc",
    "last_acc": "last session test acc",
    "pd": "PD (s0 - last)",
    "last_novel_acc": "last session novel acc",
    "epoch1_share": "epoch-1 / best base val acc",
    "d_cs": "class separation D_cs",
}


DIGITS = {"d_cs": 3}


def figures(result) -> dict[str, float]:
    s, curve = result.sessions, result.base_curve
    best_val = max(r["val_acc"] for r in curve)
    return {
        "base_acc": s[0]["test_acc"],
        "last_acc": s[-1]["test_acc"],
        "pd": s[0]["test_acc"] - s[-1]["test_acc"],
        "last_novel_acc": s[-1]["test_novel_acc"],
        "epoch1_share": curve[0]["val_acc"] / best_val if best_val > 0 else float("nan"),
        "d_cs": result.summary["d_cs"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", type=int, default=3, help="synthetic_version (1, 2 or 3)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a Config field (default: the CPU preset's fixed-boundary baseline)")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    try:
        over = {"variant": "baseline", "synthetic_version": a.version, "threads": a.threads}
        for item in a.overrides:
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
            over[key.strip()] = coerce(key.strip(), value.strip())
        cfgs = [from_dict({**PRESETS["cpu"], **over, "seed": s, "split_seed": s}).validate() for s in a.seeds]
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.REFUSED

    from adbs.trial import run_trial

    print(f"benchmark v{a.version}, CPU preset ({cfgs[0].backbone}), {cfgs[0].variant}"
          + (f", {', '.join(a.overrides)}" if a.overrides else "") + f", seeds {' '.join(map(str, a.seeds))}", flush=True)
    rows = []
    for cfg in cfgs:
        t0 = time.perf_counter()
        result = run_trial(cfg)
        f = figures(result)
        rows.append(f)
        curve = " ".join(f"{r['test_acc']:.1f}" for r in result.sessions)
        print(f"seed {cfg.seed}: " + "  ".join(f"{k} {v:.{DIGITS.get(k, 2)}f}" for k, v in f.items())
              + f"  | sessions {curve} | {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"\n{'figure':<30}{'mean':>8}{'min':>8}{'max':>8}   target      ok")
    ok_all = True
    for k, (lo, hi) in TARGETS.items():
        vals = [r[k] for r in rows]
        mean = statistics.fmean(vals)
        ok = lo <= mean <= hi
        ok_all &= ok
        d = DIGITS.get(k, 2)
        print(f"{NAMES[k]:<30}{mean:>8.{d}f}{min(vals):>8.{d}f}{max(vals):>8.{d}f}   {lo:g}-{hi:g}".ljust(68)
              + ("yes" if ok else "NO"))
    print("all targets met (means)" if ok_all else "some targets missed (means)")
    return exits.OK


if __name__ == "__main__":
    raise SystemExit(main())
