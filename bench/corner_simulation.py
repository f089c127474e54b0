"""The statistics in their corners, by simulation against known truth (adbs_lab/stats/corners.py): the coverage of
the aggregates across tasks (the paired probability of improvement from P = 0.5 to exactly 1, with and without
ties; the IQM and the mean of the per-seed differences with tasks at different levels and t(3) noise), --pruner
auto's switch-on rate around the threshold, and the unpaired interval's error and power at 3 runs against 8; with
--across-corners only the corners across tasks, each candidate interval from the literature beside the printed one.
The corner tables of docs/statistics.md come from here.

    .venv/bin/python bench/corner_simulation.py                  # 20,000 studies per cell, 2-3 min of CPU
    .venv/bin/python bench/corner_simulation.py --studies 2000   # quicker, noisier
    .venv/bin/python bench/corner_simulation.py --across-corners --studies 4000   # the across-task corners, 1-2 min

Each section prints the measured rate beside its bound: a coverage should be at least nominal - 2 Monte Carlo SE, an
error rate at most nominal + 2 SE (SE over the studies of the cell). Exit 0, or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs_lab.stats import aggregate as agg  # noqa: E402
from adbs_lab.stats import corners as C  # noqa: E402
from adbs_lab.stats import premise as pm  # noqa: E402
from adbs_lab.stats.simulate import aggregate_coverage  # noqa: E402
from adbs_lab.stats.intervals import welch_t  # noqa: E402
from adbs_lab.stats.verdicts import CONSERVATIVE_BELOW, spread_floor  # noqa: E402

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


IQM_METHODS = ("Yuen (h - 1 df)", "expanded percentile (printed)", "percentile bootstrap", "bootstrap SE, h - 1 df",
               "symmetric bootstrap-t")
DF_RULES = ("Satterthwaite", "by the largest share", "Welch 1947 (n + 1, - 2)", "Banerjee 1960", "min(n_t) - 1 (Hsu)",
            "Behrens-Fisher fiducial")


def bootstrap_t(d: np.ndarray, level: float, b: int = 599, chunk: int = 100, se_only: bool = False) -> tuple:
    """Wilcox's symmetric bootstrap-t of the 25% trimmed mean (Wilcox 2017, Introduction to Robust Estimation and
    Hypothesis Testing, ch. 4, `trimcibt`: 599 resamples): est ± the level quantile of |T*| times Yuen's standard
    error, T* = (resample's trimmed mean - est) / its own Yuen standard error; `se_only`: est ± t_{h-1} times the
    SD of 2,000 resamples' trimmed means (the bootstrap standard error: Efron & Tibshirani 1993, ch. 6). Resampled
    positions of the sorted runs, drawn once (a resample of sorted runs, sorted, is them at the sorted positions)."""
    x = np.sort(d, axis=-1)
    n = x.shape[-1]
    g = int(agg.TRIM * n)
    h = n - 2 * g
    b = 2000 if se_only else b
    pos = np.sort(np.random.default_rng([agg.BOOTSTRAP_SEED, n, b]).integers(0, n, (b, n)), axis=-1)
    clip = pos[:, np.clip(np.arange(n), g, n - g - 1)]  # the winsorized resample's positions

    def trim_se(mid: np.ndarray, win: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return mid.mean(axis=-1), np.sqrt((n - 1) * win.var(axis=-1, ddof=1) / (h * (h - 1)))

    est, se = trim_se(x[..., g:n - g], np.clip(x, x[..., g:g + 1], x[..., n - g - 1:n - g]))
    flat, e1 = x.reshape(-1, n), est.reshape(-1)
    c = np.empty(e1.shape)
    for i in range(0, flat.shape[0], chunk):
        xs = flat[i:i + chunk]
        if se_only:
            c[i:i + chunk] = stats.t.ppf(1 - (1 - level) / 2, h - 1) * xs[:, pos[:, g:n - g]].mean(axis=-1).std(axis=-1)
            continue
        eb, sb = trim_se(xs[:, pos[:, g:n - g]], xs[:, clip])
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(sb > 0, np.abs(eb - e1[i:i + chunk, None]) / sb, np.inf)
        c[i:i + chunk] = np.quantile(t, level, axis=-1) * se.reshape(-1)[i:i + chunk]
    half = np.where(se > spread_floor(), c.reshape(est.shape), np.nan)
    return est, est - half, est + half


def iqm_interval(method: str, d: np.ndarray, level: float) -> tuple[np.ndarray, ...]:
    if method == IQM_METHODS[0]:
        return agg.yuen_bounds(d, level)
    if method in IQM_METHODS[1:3]:
        return agg.percentile_bounds(d, level, expand=method == IQM_METHODS[1])
    return bootstrap_t(d, level, se_only=method == IQM_METHODS[3])


def mean_interval(rule: str, tasks: list[np.ndarray], level: float) -> tuple[np.ndarray, ...]:
    """The mean of the task means on the degrees of freedom of `rule`: Satterthwaite's ν_S (aggregate.mean_bounds);
    "by the largest share" ν_S moved toward the largest task's n_k - 1 by its share w of the variance, (1 - w) ν_S
    + w min(n_k - 1, ν_S) (a candidate measured here, no reference: it leans on Hsu's bound as far as one task
    dominates); Welch 1947 (Biometrika 34:28), his df with n + 1 and - 2, at least min(n_t) - 1; Banerjee 1960
    (Sankhyā A 22:357), each task's variance of the mean times its own t quantile squared, a bound at any shares;
    Hsu's min(n_t) - 1 (as adbs_lab/stats/intervals.py: welch_t below 8 runs); the Behrens-Fisher fiducial interval
    for T tasks (Fisher 1935, "The fiducial argument in statistical inference", Ann. Eugenics 6:391; conservative
    for two: Robinson 1976, Ann. Statist. 4:963), the level quantile of |Σ_t √v_t t_t| over T, t_t independent
    Student t on n_t - 1 df drawn once from a fixed seed."""
    if rule == DF_RULES[0]:
        return agg.mean_bounds(tasks, level)
    n = np.array([t.shape[-1] for t in tasks], dtype=float)
    v = np.stack([t.var(axis=-1, ddof=1) for t in tasks], axis=-1) / n
    est, q = np.stack([t.mean(axis=-1) for t in tasks], axis=-1).mean(axis=-1), 1 - (1 - level) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        if rule == DF_RULES[3]:
            half = np.sqrt((stats.t.ppf(q, n - 1) ** 2 * v).sum(axis=-1)) / len(tasks)
            return est, est - half, est + half
        if rule == DF_RULES[5]:
            draws = np.random.default_rng([agg.BOOTSTRAP_SEED, len(n)]).standard_t(n - 1, (math.ceil(50 / (1 - level))
                                                                                         + 2000, len(n)))
            half = np.quantile(np.abs(np.sqrt(v).reshape(-1, len(n)) @ draws.T), level, axis=-1) / len(tasks)
            half = half.reshape(np.shape(est))
            return est, est - half, est + half
        satt = v.sum(axis=-1) ** 2 / (v ** 2 / (n - 1)).sum(axis=-1)
        w = v.max(axis=-1) / v.sum(axis=-1)
        share = (1 - w) * satt + w * np.minimum(n[v.argmax(axis=-1)] - 1, satt)
        welch47 = np.maximum(v.sum(axis=-1) ** 2 / (v ** 2 / (n + 1)).sum(axis=-1) - 2, n.min() - 1)
        df = {DF_RULES[1]: share, DF_RULES[2]: welch47}.get(rule, np.full(np.shape(est), n.min() - 1))
        half = stats.t.ppf(q, df) * np.sqrt(v.sum(axis=-1)) / len(tasks)
    return est, est - half, est + half


def iqm_cells(n: int, seed: int) -> list[tuple[str, np.ndarray, float, float, bool]]:
    """(name, pooled differences, truth, level, on a grid) of each IQM cell: the two corners, the smoke grid's
    corner the no-spread rule fixed, the cells of `differences` (t(3) at 3 to 10 runs), and alike tasks."""
    step, eff, sig = C.grid_step(700), (0.0, 0.5, 1.0, 1.5), (0.5, 1.0, 1.5, 2.0)

    def pooled(s: int, effects, runs, sigmas, kind="normal", n_items=None) -> np.ndarray:
        tasks = C.paired_tasks(np.random.default_rng(seed + s), n, effects, list(runs), sigmas, kind, n_items=n_items)
        return np.concatenate([x - y for x, y in tasks], axis=-1)

    cells = [(f"alike 4 x 3, normal, {lv:.2%}", pooled(1 + i, [0.5] * 4, (3,) * 4, [1.0] * 4), 0.5, lv, False)
             for i, lv in enumerate((0.95, 1 - 0.05 / 3))]
    cells.append(("grid N = 700, σ_d 1.5 steps, 4 x 10", pooled(3, [0.0] * 4, (10,) * 4, [1.5 * step] * 4,
                                                                n_items=700),
                  C.grid_iqm([0.0] * 4, [1.5 * step] * 4, "normal", 700, (10,) * 4), 0.95, True))
    cells.append(("grid N = 700, σ_d 0.5 step, 4 x 3", pooled(4, [0.25 * step] * 4, (3,) * 4, [0.5 * step] * 4,
                                                              n_items=700),
                  C.grid_iqm([0.25 * step] * 4, [0.5 * step] * 4, "normal", 700, (3,) * 4), 0.95, True))
    for runs in RUNS:
        for lv in (0.95, 1 - 0.05 / 3):
            cells.append((f"different effects, t3, {', '.join(map(str, runs))}, {lv:.2%}",
                          pooled(10 + sum(runs), eff, runs, sig, "t3"), C.mixture_iqm(eff, sig, "t3", list(runs)), lv,
                          False))
    for r in (5, 10):
        cells.append((f"alike 4 x {r}, normal, 95.00%", pooled(20 + r, [0.5] * 4, (r,) * 4, [1.0] * 4), 0.5, 0.95,
                      False))
    return cells


def mean_cells(n: int, seed: int) -> list[tuple[str, list[np.ndarray], float, float]]:
    """(name, per-task differences, truth, level) of each mean-of-task-means cell: one dominant task of 3 runs
    (against 3 or 10 runs), a half-dominant one, the cells of `differences`, and alike tasks."""
    def tasks(s: int, effects, runs, sigmas, kind="normal") -> list[np.ndarray]:
        return [x - y for x, y in C.paired_tasks(np.random.default_rng(seed + s), n, effects, list(runs), sigmas,
                                                 kind)]

    cells = []
    for i, lv in enumerate((1 - 0.05 / 3, 0.95)):
        for j, runs in enumerate(((3,) * 4, (3, 10, 10, 10))):
            cells.append((f"one dominant task, runs {', '.join(map(str, runs))}, {lv:.2%}",
                          tasks(30 + 2 * i + j, [0.0] * 4, runs, [4.0, 0.3, 0.3, 0.3]), 0.0, lv))
    cells.append(("one task SD 1 against 0.3, 4 x 3, 98.33%", tasks(35, [0.0] * 4, (3,) * 4, [1.0, 0.3, 0.3, 0.3]),
                  0.0, 1 - 0.05 / 3))
    for j, (runs, ratio) in enumerate((((3, 10, 10, 10), 3.0), ((3, 5, 5, 5), 5.0))):
        cells.append((f"one task of 3 runs SD {ratio:g} against 1, runs {', '.join(map(str, runs))}, 98.33%",
                      tasks(36 + j, [0.0] * 4, runs, [ratio, 1.0, 1.0, 1.0]), 0.0, 1 - 0.05 / 3))
    for runs in RUNS:
        for lv in (0.95, 1 - 0.05 / 3):
            cells.append((f"different effects, t3, {', '.join(map(str, runs))}, {lv:.2%}",
                          tasks(40 + sum(runs), (0.0, 0.5, 1.0, 1.5), runs, (0.5, 1.0, 1.5, 2.0), "t3"), 0.75, lv))
    for runs in ((3,) * 4, (5,) * 4, (10,) * 4, (3, 3), (3, 4, 5, 10)):
        cells.append((f"alike, normal, runs {', '.join(map(str, runs))}, 95.00%",
                      tasks(60 + sum(runs), [0.5] * len(runs), runs, [1.0] * len(runs)), 0.5, 0.95))
    return cells


def across_corners(n: int, seed: int) -> None:
    """The across-task corners: each candidate interval's coverage (on a grid: 1 - the share of printed intervals
    that miss) and its median width against the first column's, cell by cell."""
    print(f"\nacross-task corners, {n} studies per cell: coverage (floor nominal - 2 SE) and median width ratio to the "
          "first column\n")
    for methods, cells, run in ((IQM_METHODS, iqm_cells(n, seed), iqm_interval),
                                (DF_RULES, mean_cells(n, seed), mean_interval)):
        print("| cell | floor | " + " | ".join(methods) + " |\n|---|---|" + "---|" * len(methods))
        for name, d, truth, level, *grid in cells:
            row, base = [], None
            for m in methods:
                _, lo, hi = run(m, d, level)  # type: ignore[operator]
                ok = (lo <= truth + 1e-9) & (truth - 1e-9 <= hi)
                got = 1 - float(np.mean(np.isfinite(lo) & ~ok)) if grid and grid[0] else float(np.mean(ok))
                width = np.where(np.isfinite(hi - lo), hi - lo, np.nan)
                base = width if base is None else base
                row.append(f"{got:.1%} ({float(np.nanmedian(width / base)):.2f})")
            print(f"| {name} | {C.coverage_floor(level, n):.1%} | " + " | ".join(row) + " |", flush=True)
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=20000, help="simulated studies per cell (default 20000)")
    parser.add_argument("--seed", type=int, default=2026, help="the random generator's seed (default 2026)")
    parser.add_argument("--across-corners", action="store_true",
                        help="only the across-task corners: candidate intervals side by side (docs/statistics.md)")
    args = parser.parse_args(argv)
    if args.studies < 100:
        parser.error("--studies: at least 100")
    if args.across_corners:
        across_corners(args.studies, args.seed)
        return exits.OK
    improvement(args.studies, args.seed)
    differences(args.studies, args.seed)
    premise(min(args.studies, 4000), args.seed)  # the check after every trial: 71 rank correlations per study
    welch(args.studies, args.seed)
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
