"""Continuing a study without losing its guarantee, by simulation: the two routes (an anytime-valid confidence
sequence; a spending plan with α reserved for continuations up to a horizon), the advised workflow's error rate,
the workflow before continuations existed, the power of the design as built, the cap a family of 12 needs, and the
forecast of the stop checked against the truth. The numbers of docs/statistics.md, "Continuing a study", come from
here.

    .venv/bin/python bench/continuation_simulation.py                  # 20,000 studies per power cell; minutes
    .venv/bin/python bench/continuation_simulation.py --studies 4000   # quicker, noisier

A comparison: the paired per-seed differences of a row and its reference, SD σ_d, δ = 1 point; power is P(a
"better" verdict) for a true difference Δ = δ at Δ/σ_d = 1, 2, 3, 4 (adbs_lab/stats/workflow.py). Exit 0, or 2
for bad arguments.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs_lab.stats import confseq, workflow  # noqa: E402
from adbs_lab.stats.continuation import AlphaSplit, design, pauses  # noqa: E402
from adbs_lab.stats.looks import Looks, Spending, continuable, spent  # noqa: E402
from adbs_lab.stats.planner import N_MAX  # noqa: E402
from adbs_lab.stats.simulate import false_verdicts  # noqa: E402
from adbs_lab.stats.verdicts import CODE, Label, replay  # noqa: E402

RATIOS = (1.0, 2.0, 3.0, 4.0)
PRIMARY = AlphaSplit().primary_alpha
SPLIT = AlphaSplit()


@dataclass(frozen=True)
class OverHorizon:
    """Looks at n0, n0 + 2, ..., cap, cap + 2, ..., horizon spending one function over t = n / horizon: what a
    spending plan over the horizon leaves for the default run (a look at the cap, where it pauses)."""

    spending: Spending
    alpha: float
    cap: int = 8
    horizon: int = 16

    @property
    def sizes(self) -> tuple[int, ...]:
        return continuable(cap=self.cap, horizon=self.horizon).sizes

    @property
    def alphas(self) -> tuple[float, ...]:
        total = [spent(self.alpha, n / self.horizon, self.spending, k + 1, len(self.sizes))
                 for k, n in enumerate(self.sizes)]
        total[-1] = self.alpha
        return tuple(b - a for a, b in zip([0.0] + total[:-1], total))


def widths(cap: int = 8) -> None:
    """Half-widths in units of the sample SD: today's sequential intervals, a fixed-size t at α/m, the confidence
    sequence (c² tuned at the cap), the chosen plan."""
    print("half-width / s at n seeds (inf: the whole line): today's looks (O'Brien-Fleming over the cap, α = 0.05) | "
          "fixed-size t at α/m | confidence sequence at α/m | CS / fixed | chosen plan (primary α = 0.04)")
    for m in (3, 12):
        a = 0.05 / m
        c2 = confseq.tuned_precision(cap, a)
        today = {n: stats.t.ppf(1 - ak / m / 2, n - 1) / math.sqrt(n) for n, ak in zip(Looks().sizes, Looks().alphas)}
        chosen = design(m)
        plan = {n: stats.t.ppf(1 - ak / m / 2, n - 1) / math.sqrt(n) for n, ak in zip(chosen.sizes, chosen.alphas)}
        print(f"  m = {m} (c² = {c2:.3f}):")
        for n in range(3, 17):
            fixed = stats.t.ppf(1 - a / 2, n - 1) / math.sqrt(n)
            cs = float(confseq.factor(n, a, c2))
            cells = [f"{today[n]:7.3f}" if n in today else "      -", f"{fixed:7.3f}", f"{cs:7.3f}",
                     f"{cs / fixed:5.2f}", f"{plan[n]:7.3f}" if n in plan else "      -"]
            print(f"    n = {n:2d}: " + " | ".join(cells))


def cs_coverage(n: int, seed: int, horizon: int = 100) -> None:
    """Time-uniform coverage: P(some CS_k, k ≤ horizon, misses the true mean), against naive t-intervals looked at
    after every seed (peeking)."""
    print(f"\nconfidence sequence, {n} simulated sequences of {horizon} seeds: P(a miss at some n ≤ {horizon})")
    for a in (0.05, 0.05 / 3):
        c2 = confseq.tuned_precision(8, a)
        for kind in workflow.NOISES:
            x = workflow.unit_noise(np.random.default_rng(seed), (n, horizon), kind)
            miss_cs = np.zeros(n, dtype=bool)
            miss_t = np.zeros(n, dtype=bool)
            for k in range(2, horizon + 1):
                _, lo, hi, _ = confseq.bounds(x[:, :k], a, c2)
                miss_cs |= (lo > 0) | (hi < 0)
                half = stats.t.ppf(1 - a / 2, k - 1) * x[:, :k].std(axis=1, ddof=1) / math.sqrt(k)
                miss_t |= np.abs(x[:, :k].mean(axis=1)) > half
            print(f"  a = {a:.4f}, {kind:6s}: confidence sequence {miss_cs.mean():.4f} (bound {a:.4f}); "
                  f"naive t after every seed {miss_t.mean():.4f}")


def _cs_codes(d: np.ndarray, until: int, a: float, c2: float, sizes: tuple[int, ...]) -> np.ndarray:
    return confseq.replay(d[..., :until], tuple(s for s in sizes if s <= until), a, c2, 1.0)["code"]


def routes(n: int, seed: int) -> None:
    """Power by the cap (8) and by seeds 12 and 16, per route, at Δ/σ_d = 1, 2, 3, 4."""
    plans: dict[str, object] = {
        "today: O'Brien-Fleming over the cap, α 0.05 (no continuation)": Looks(),
        "(b) O'Brien-Fleming over 16, α 0.05": OverHorizon("obrien_fleming", 0.05),
        "(b) Pocock over 16, α 0.05": OverHorizon("pocock", 0.05),
    }
    for alpha in (0.05, PRIMARY):
        for r in (0.2, 0.25, 0.3):
            for shape in ("equal", "pocock", "obrien_fleming"):
                plans[f"(b) piecewise r = {r}, reserve {shape}, α {alpha}"] = continuable(
                    alpha=alpha, reserve=r, reserve_spending=shape)  # type: ignore[arg-type]
    sizes = continuable().sizes
    print(f"\nroutes, {n} studies per cell: P(better) by seed 8 / 12 / 16 at Δ/σ_d = 1 | 2 | 3 | 4")
    for m in (3, 12):
        print(f"  m = {m}")
        data = {ratio: 1.0 + np.random.default_rng(seed).standard_normal((n, 16)) / ratio for ratio in RATIOS}
        for alpha in (0.05, PRIMARY):
            a = alpha / m
            c2 = confseq.tuned_precision(8, a)
            cells = []
            for d in data.values():
                p = [np.isin(_cs_codes(d, u, a, c2, sizes), workflow.BETTER_CODES).mean() for u in (8, 12, 16)]
                cells.append("/".join(f"{v:.2f}" for v in p))
            print(f"    (a) confidence sequence, α {alpha}, c² {c2:.3f}: " + " | ".join(cells))
        for name, looks in plans.items():
            cells = []
            for d in data.values():
                until = (8,) if isinstance(looks, Looks) and looks.horizon is None else (8, 12, 16)
                p = [np.isin(replay(d[:, :u], looks, m, 1.0)["code"], workflow.BETTER_CODES).mean()  # type: ignore
                     for u in until]
                cells.append("/".join(f"{v:.2f}" for v in p))
            print(f"    {name}: " + " | ".join(cells))


TRUTHS = {3: {"no difference": [0.0] * 3, "mixed": [0.0, -1.0, 2.0]},
          12: {"no difference": [0.0] * 12, "mixed": [0.0] * 4 + [1.0, 1.0, -1.0, -1.0] + [2.0] * 4}}
NOISE_CELLS = (("normal", None), ("t3", None), ("normal", 700), ("normal", 2000), ("normal", 10000))


def workflows(n: int, seed: int, sigma: float = 1.0) -> None:
    """The advised workflow's family error rate (the primary at its share, and with 4 secondaries at theirs), the
    confidence sequence's, and the workflows before continuations."""
    print(f"\nthe advised workflow (default run, continuation, once more), σ_d = {sigma}, {n} studies per cell: "
          f"P(any printed verdict false); bound α + 2 SE = {0.05 + 2 * math.sqrt(0.05 * 0.95 / n):.4f}")
    for m, truths in TRUTHS.items():
        looks = design(m)
        print(f"  m = {m}: plan {looks.sizes}, pauses {pauses(looks)}, α_k {[round(x, 5) for x in looks.alphas]}")
        for truth, effects in truths.items():
            for kind, items in NOISE_CELLS:
                rng = np.random.default_rng(seed)
                d = workflow.differences(rng, n, effects, looks.last, sigma, kind, items)  # type: ignore[arg-type]
                sec = workflow.Secondaries(
                    np.stack([workflow.differences(rng, n, effects, looks.last, sigma, kind, items)  # type: ignore
                              for _ in range(SPLIT.n_secondaries)], axis=2),
                    SPLIT.secondary(looks), np.repeat(np.asarray(effects)[:, None], SPLIT.n_secondaries, axis=1))
                both = workflow.advised(d, looks, effects, 1.0, sec)
                a = 0.05 / m
                c2 = confseq.tuned_precision(looks.max_seeds, a)
                cs = false_verdicts(_cs_codes(d, looks.last, a, c2, looks.sizes), effects, 1.0).any(axis=1)
                runs = np.bincount(both["invocations"], minlength=4)[1:] / n
                print(f"    {truth:13s} {kind:6s} N={items or '-':<5}: primary {both['false_primary'].mean():.4f}, "
                      f"with secondaries {both['false'].mean():.4f}, confidence sequence {cs.mean():.4f}; "
                      f"invocations 1/2/3 {runs[0]:.2f}/{runs[1]:.2f}/{runs[2]:.2f}, "
                      f"mean seeds {both['seeds'].mean():.1f}")
    print("\n  before continuations, no difference: a --seeds 0 1 2 table then a fresh run at the planner's n; "
          "a --seeds auto run (cap 8) then a fresh one with cap 16")
    for m in (3, 12):
        for s in (0.5, 1.0, 2.0):
            d = workflow.differences(np.random.default_rng(seed), n, [0.0] * m, N_MAX, s)
            r = workflow.rerun_at_planned_n(d, [0.0] * m, 1.0)
            r2 = workflow.rerun_with_larger_cap(d, [0.0] * m, 1.0, Looks(), Looks(max_seeds=16))
            planned = r["n"][r["n"] > 0]
            print(f"    m = {m:2d}, σ_d = {s}: first table {r['first'].mean():.4f}, with the rerun "
                  f"{r['false'].mean():.4f} (rerun in {np.mean(r['n'] > 0):.0%}, median n "
                  f"{np.median(planned) if planned.size else 0:.0f}); auto then cap 16 {r2['false'].mean():.4f}")


def power_as_built(n: int, seed: int) -> None:
    """The power curve of the design as built (the primary at its share, the reserve), and the smallest cap per m."""
    print(f"\npower of the design as built (primary α = {PRIMARY}, reserve, batches of 2), {n} studies per cell:")
    for m, cap, n0 in ((3, 8, 3), (3, 9, 3), (3, 8, 4), (12, 8, 3), (12, 9, 3), (12, 8, 4)):
        looks = continuable(cap=cap, alpha=PRIMARY, reserve=design(m).reserve, n0=n0)
        p = workflow.power(np.random.default_rng(seed), looks, m, RATIOS, sims=n)
        print(f"  m = {m:2d}, cap {cap}, looks {looks.sizes}: " + ", ".join(f"{k:g}: {v:.3f}" for k, v in p.items()))
    print("  the smallest cap with P(better) ≥ 0.80 at Δ/σ_d = 2 (from 8 up):")
    for m in (1, 2, 3, 4, 6, 8, 10, 12, 15, 20):
        row = []
        for cap in range(8, 17):
            looks = continuable(cap=cap, alpha=PRIMARY, reserve=design(3).reserve)
            p = workflow.power(np.random.default_rng(seed), looks, m, (2.0,), sims=n)[2.0]
            row.append(f"{cap}: {p:.3f}")
            if p >= 0.8:
                break
        print(f"    m = {m:2d}: " + ", ".join(row))


def forecasts(n: int, seed: int, draws: int) -> None:
    """The forecast made from the first 3 seeds against the realised stop (m = 3, the default plan)."""
    looks = design(3)
    print(f"\nforecast from 3 seeds, m = 3, {n} studies × {draws} draws per truth: 90% interval covers the realised "
          f"stop | median within one batch")
    cells = []
    for sigma in (0.5, 1.0):
        for ratio in (0.0, 1.0, 2.0, 3.0, 4.0):
            r = workflow.forecast_check(np.random.default_rng(seed), ratio * sigma, sigma, looks, 3, sims=n,
                                        draws=draws)
            r["oracle"] = _oracle_within(np.random.default_rng(seed), ratio * sigma, sigma, looks, 3, n * 20)
            cells.append(r)
            print(f"  σ_d = {sigma}, Δ/σ_d = {ratio:g}: {r['covered']:.3f} | {r['within']:.3f} (open at 3 seeds: "
                  f"{r['open']:.2f}; knowing Δ and σ_d, the true median stop is within one batch in "
                  f"{r['oracle']:.3f})")
    print(f"  pooled: {np.mean([c['covered'] for c in cells]):.3f} | {np.mean([c['within'] for c in cells]):.3f} "
          f"(knowing Δ and σ_d: {np.mean([c['oracle'] for c in cells]):.3f})")


def _oracle_within(rng: np.random.Generator, effect: float, sigma: float, looks: Looks, m: int, n: int) -> float:
    """The best a forecast could do: the median stop of the true distribution (Δ and σ_d known), within one batch
    of each study's realised stop (no stop by the horizon counts as one batch past it)."""
    r = replay(effect + sigma * rng.standard_normal((n, looks.last)), looks, m, 1.0)
    stop = np.where(r["code"] == CODE[Label.NOT_RESOLVED], looks.last + looks.batch, r["n_seeds"])
    return float((np.abs(stop - np.quantile(stop, 0.5, method="inverted_cdf")) <= looks.batch).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=20000, help="simulated studies per power cell (default 20000; "
                        "a fifth of them per workflow cell, a fortieth per forecast cell)")
    parser.add_argument("--seed", type=int, default=2026, help="the random generator's seed (default 2026)")
    args = parser.parse_args(argv)
    if args.studies < 400:
        parser.error("--studies: at least 400")
    widths()
    cs_coverage(args.studies // 4, args.seed)
    routes(args.studies, args.seed)
    workflows(args.studies // 5, args.seed)
    power_as_built(args.studies, args.seed)
    forecasts(args.studies // 40, args.seed, 500)
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
