"""The verdicts of adbs_lab/stats/ by simulation: false-verdict rates, coverage, power at δ and seeds used, for a
study of a fixed 8 seeds and for each sequential plan (spending function × batch size), and what the planner's n
delivers. The numbers of docs/statistics.md come from here.

    .venv/bin/python bench/verdict_simulation.py                    # 20,000 studies per cell, about a minute
    .venv/bin/python bench/verdict_simulation.py --studies 2000     # quicker, noisier

A study: one reference and 3 rows compared with it (adbs_lab/stats/simulate.py), δ = 1 point, α = 0.05, cap N = 8,
first batch 3 seeds. Errors: no true difference, σ = 1 (the paired differences' SD), normal noise and t(3) with 10%
of the draws scaled up 5×. Power: a true difference of δ in each comparison, normal noise, σ = 0.3, 0.5, 0.75, 1; the
verdict "better" counts, and "equivalent" under no difference. Exit 0, or 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs_lab.stats.looks import Looks  # noqa: E402
from adbs_lab.stats.planner import levels, smallest_n  # noqa: E402
from adbs_lab.stats.simulate import run  # noqa: E402
from adbs_lab.stats.verdicts import CODE, Label  # noqa: E402

PLANS: dict[str, Looks] = {
    "fixed 8": Looks.fixed(8),
    "OBF, b=1": Looks(batch=1, spending="obrien_fleming"),
    "OBF, b=2 (default)": Looks(batch=2, spending="obrien_fleming"),
    "Pocock, b=1": Looks(batch=1, spending="pocock"),
    "Pocock, b=2": Looks(batch=2, spending="pocock"),
    "equal, b=1": Looks(batch=1, spending="equal"),
    "equal, b=2": Looks(batch=2, spending="equal"),
    "OBF, looks 3 and 8": Looks(batch=5, spending="obrien_fleming"),
}
DELTA = 1.0
SIGMAS = (0.3, 0.5, 0.75, 1.0)


def errors(n: int, seed: int) -> None:
    """Under no difference: the share of studies with any false verdict, the largest share per comparison, and the
    share whose every interval at every look covers (the guarantee: ≥ 95%)."""
    print(f"no true difference, σ = 1, {n} studies: any false verdict / worst comparison / all intervals covering")
    for name, looks in PLANS.items():
        cells = []
        for kind in ("normal", "t3_outliers"):
            r = run(np.random.default_rng(seed), n, [0.0] * 3, 1.0, looks, DELTA, kind)  # type: ignore[arg-type]
            cells.append(f"{r['false'].any(axis=1).mean():6.2%} {r['false'].mean(axis=0).max():6.2%} "
                         f"{r['covered'].all(axis=1).mean():7.2%}")
        print(f"  {name:20s} normal {cells[0]}   t3+outliers {cells[1]}")


def power(n: int, seed: int) -> None:
    """A true difference of δ: P("better") and the seeds the study ran (its most demanding comparison); no
    difference: P("equivalent") and the seeds."""
    print(f"\npower, {n} studies: P(better | Δ = δ), mean seeds | P(equivalent | Δ = 0), mean seeds")
    for sigma in SIGMAS:
        for name, looks in PLANS.items():
            hit = run(np.random.default_rng(seed), n, [DELTA] * 3, sigma, looks, DELTA)
            nil = run(np.random.default_rng(seed + 1), n, [0.0] * 3, sigma, looks, DELTA)
            print(f"  σ = {sigma:<4} {name:20s} {np.mean(hit['code'] == CODE[Label.BETTER]):6.1%} "
                  f"{hit['n_seeds'].max(axis=1).mean():5.2f} | {np.mean(nil['code'] == CODE[Label.EQUIVALENT]):6.1%} "
                  f"{nil['n_seeds'].max(axis=1).mean():5.2f}")


def planned(n: int, seed: int) -> None:
    """The planner's n for σ known (a fixed-size study at α/3) and the share of "better" there at Δ = δ."""
    print(f"\nthe planner, σ known, {n} studies: planned n (fixed size, α/3), P(better | Δ = δ) at that n")
    for sigma in (0.3, 0.4, 0.5):
        size = smallest_n(sigma, DELTA, levels(0.05, 3))
        assert size is not None
        r = run(np.random.default_rng(seed), n, [DELTA] * 3, sigma, Looks.fixed(size), DELTA)
        print(f"  σ = {sigma}: n = {size:2d}, better in {np.mean(r['code'] == CODE[Label.BETTER]):6.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=20000, help="simulated studies per cell (default 20000)")
    parser.add_argument("--seed", type=int, default=2026, help="the random generator's seed (default 2026)")
    args = parser.parse_args(argv)
    if args.studies < 100:
        parser.error("--studies: at least 100")
    errors(args.studies, args.seed)
    power(args.studies, args.seed)
    planned(args.studies, args.seed)
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
