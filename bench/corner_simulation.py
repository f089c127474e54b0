"""The statistics in their corners, by simulation against known truth (adbs_lab/stats/corners.py): the coverage of
the aggregates across tasks (the paired probability of improvement from P = 0.5 to exactly 1, with and without
ties; the IQM and the mean of the per-seed differences with tasks at different levels and t(3) noise), --pruner
auto's switch-on rate around the threshold, and the unpaired interval's error and power at 3 runs against 8. The
corner tables of docs/statistics.md come from here.

    .venv/bin/python bench/corner_simulation.py                  # 20,000 studies per cell, 2-3 min of CPU
    .venv/bin/python bench/corner_simulation.py --studies 2000   # quicker, noisier

Each section prints the measured rate beside its bound: a coverage should be at least nominal - 2 Monte Carlo SE, an
error rate at most nominal + 2 SE (SE over the studies of the cell). Exit 0, or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs_lab.stats import corners as C  # noqa: E402
from adbs_lab.stats import premise as pm  # noqa: E402
from adbs_lab.stats.simulate import aggregate_coverage  # noqa: E402
from adbs_lab.stats.intervals import welch_t  # noqa: E402
from adbs_lab.stats.verdicts import CONSERVATIVE_BELOW  # noqa: E402

PS = (0.5, 0.7, 0.9, 0.95, 0.977, 0.99, 1.0)
IMPROVEMENT_CELLS = {"4 x 3 runs": ((3,) * 4, "normal", None), "4 x 10 runs": ((10,) * 4, "normal", None),
                     "4 x 3, ties (N = 700)": ((3,) * 4, "normal", 700), "4 x 5, t3, ties (N = 200)": ((5,) * 4, "t3", 200),
                     "runs 3, 4, 5, 10": ((3, 4, 5, 10), "normal", None)}
RUNS = ((3,) * 4, (5,) * 4, (10,) * 4, (3, 4, 5, 10))
RHOS = (0.5, 0.58, 0.63, 0.69, 0.7, 0.8, 0.85, 0.9)
WELCH = ((3, 8, 3.0, 1.0), (3, 8, 1.0, 3.0), (3, 8, 1.0, 1.0), (2, 8, 3.0, 1.0), (4, 8, 3.0, 1.0), (3, 3, 3.0, 1.0),
         (5, 8, 3.0, 1.0), (6, 8, 3.0, 1.0), (7, 8, 3.0, 1.0), (8, 8, 3.0, 1.0), (8, 20, 3.0, 1.0))
ERRORS = (0.05, 0.05 / 3, 0.05 / 6)


def improvement(n: int, seed: int) -> None:
    """Coverage of the paired probability of improvement's 95% interval: 4 tasks whose effects spread 0.8-1.2
    times that of P (P = 1: bounded noise, every seed a win)."""
    print(f"paired P(X > Y), 95% interval, {n} studies per cell (coverage >= {C.coverage_floor(0.95, n):.2%}):\n")
    print("| tasks x runs | " + " | ".join(f"P = {p:g}" for p in PS) + " |\n|---|" + "---|" * len(PS))
    for name, (runs, noise, n_items) in IMPROVEMENT_CELLS.items():
        cells = []
        for p in PS:
            if p == 1.0:
                effects, kind = [2.0, 2.5, 3.0, 3.5], "uniform"
            else:
                e = float(C.distribution(noise).ppf(p))  # type: ignore[arg-type]
                effects, kind = [e * 0.8, e * 0.9, e * 1.1, e * 1.2], noise
            cells.append(aggregate_coverage("improvement", n, runs, effects, 1.0, kind, n_items,  # type: ignore[arg-type]
                                            seed=seed + int(1000 * p)))
        print(f"| {name} | " + " | ".join(f"{c:.1%}" for c in cells) + " |")


def differences(n: int, seed: int) -> None:
    """Coverage of the IQM and the mean of the per-seed differences: 4 tasks at levels 40-85 points, effects 0,
    0.5, 1, 1.5, spreads 0.5, 1, 1.5, 2 points; normal and t(3) noise; at 95% and at a Bonferroni 1 - 0.05/3."""
    print(f"\nIQM / mean of task means of X - Y, {n} studies per cell (coverage >= "
          f"{C.coverage_floor(0.95, n):.2%} at 95%, >= {C.coverage_floor(1 - 0.05 / 3, n):.2%} at 98.33%):\n")
    print("| runs per task | normal, 95% | normal, 98.33% | t(3), 95% | t(3), 98.33% |\n|---|---|---|---|---|")
    for runs in RUNS:
        cells = []
        for noise in ("normal", "t3"):
            for level in (0.95, 1 - 0.05 / 3):
                got = [aggregate_coverage(k, n, runs, sigmas=(0.5, 1.0, 1.5, 2.0), noise=noise, level=level,
                                          seed=seed + sum(runs)) for k in ("iqm", "mean")]
                cells.append(f"{got[0]:.1%} / {got[1]:.1%}")
        print(f"| {', '.join(map(str, runs)) if len(set(runs)) > 1 else runs[0]} | " + " | ".join(cells) + " |")


def premise(n: int, seed: int, trials: int = 80) -> None:
    """--pruner auto: the share of studies of `trials` trials in which pruning was switched on, by the population
    Spearman rho; the checks at 10, 20, 40 trials (the error split), and a check after every trial at 95%."""
    print(f"\n--pruner auto, {n} studies of {trials} trials: switched on (at most {C.rate_bound(0.025, n):.2%} "
          "below rho = 0.7):\n")
    print("| rho | switched on | at the check of 10 / 20 / 40 trials | a 95% bound after every trial |\n"
          "|---|---|---|---|")
    for rho in RHOS:
        x, y = C.rank_pairs(np.random.default_rng(seed + int(rho * 100)), n, trials, rho)
        at = pm.switched_on_rows(x, y)
        every = pm.switched_on_rows(x, y, checks=range(pm.CHECKS[0], trials + 1), each=0.95)
        firsts = " / ".join(f"{np.mean(at == c):.2%}" for c in pm.CHECKS)
        print(f"| {rho:g} | {np.mean(at > 0):.2%} | {firsts} | {np.mean(every > 0):.2%} |")


def welch(n: int, seed: int) -> None:
    """The unpaired interval under no difference (its miss rate) and at a true difference of 3 points (power):
    Welch-Satterthwaite df, and the conservative min(n) - 1 below CONSERVATIVE_BELOW runs a side (the rule)."""
    print(f"\nunpaired (Welch), {n} studies per cell: miss rate under no difference (bound: nominal + 2 SE) and power "
          "at a difference of 3 points, Welch-Satterthwaite df -> the rule:\n")
    print("| runs, SDs | " + " | ".join(f"miss at {e:.2%} (bound {C.rate_bound(e, n):.2%})" for e in ERRORS)
          + " | " + " | ".join(f"power at {e:.2%}" for e in ERRORS) + " |\n|---|" + "---|" * 2 * len(ERRORS))
    for n_a, n_b, sd_a, sd_b in WELCH:
        miss, power = [], []
        for err in ERRORS:
            got = []
            for below in (0, CONSERVATIVE_BELOW):  # 0: Welch-Satterthwaite at any n; the rule
                rng = np.random.default_rng(seed + n_a * 100 + n_b)
                a, b = C.two_samples(rng, n, n_a, n_b, sd_a, sd_b)
                _, lo, hi, _ = welch_t(a, b, err, below)
                a, b = C.two_samples(rng, n, n_a, n_b, sd_a, sd_b, 3.0)
                got.append((np.mean((lo > 0) | (hi < 0)), np.mean(welch_t(a, b, err, below)[1] > 0)))
            miss.append(f"{got[0][0]:.2%} -> {got[1][0]:.2%}")
            power.append(f"{got[0][1]:.1%} -> {got[1][1]:.1%}")
        print(f"| {n_a} vs {n_b}, {sd_a:g}:{sd_b:g} | " + " | ".join(miss + power) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=20000, help="simulated studies per cell (default 20000)")
    parser.add_argument("--seed", type=int, default=2026, help="the random generator's seed (default 2026)")
    args = parser.parse_args(argv)
    if args.studies < 100:
        parser.error("--studies: at least 100")
    improvement(args.studies, args.seed)
    differences(args.studies, args.seed)
    premise(min(args.studies, 4000), args.seed)  # the check after every trial: 71 rank correlations per study
    welch(args.studies, args.seed)
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
