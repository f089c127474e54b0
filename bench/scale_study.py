"""The study of the scale benchmark (bench/scale.py): a grid of alpha x finetune_lr, one seed, with tracking-only
trials (bench/load_study.py: `tracking_trial` reports a real trial's keys and volume, about 350 metric points, in
about a second, and trains nothing). The study code is the project's own (adbs_lab/study.py through `study.main`).

    python bench/scale_study.py --preset smoke --trials 100 --name scale [study flags]

Two searched settings, so the study's end draws what a real search's end draws: importance over both, the
trade-off and, with --objectives, the Pareto front. The grid is rows x cols = --trials exactly, rows the largest
divisor of --trials not above its square root (10 = 2 x 5, 100 = 10 x 10, 1000 = 25 x 40, 5000 = 50 x 100), both
axes log-spaced.
"""

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

import load_study  # noqa: E402

from adbs_lab import study  # noqa: E402
from adbs_lab.driver import options  # noqa: E402


def _logspace(lo: float, hi: float, n: int) -> list[float]:
    return [round(lo * (hi / lo) ** (i / max(1, n - 1)), 10) for i in range(n)]


def axes(trials: int) -> tuple[list[float], list[float]]:
    """alpha in [0.01, 0.1] and finetune_lr in [0.001, 0.1]: len(alpha) x len(finetune_lr) == trials."""
    rows = max(d for d in range(1, math.isqrt(trials) + 1) if trials % d == 0)
    return _logspace(0.01, 0.1, rows), _logspace(0.001, 0.1, trials // rows)


def plan(trials: int) -> study.Plan:
    alphas, lrs = axes(trials)
    return study.Plan(
        name="scale",
        space={"variant": "adb+ic", "alpha": alphas, "finetune_lr": lrs},
        space_source="bench/scale_study.py:axes",
        est_trial_s=load_study.REPORT_S * (load_study.BASE_EPOCHS + load_study.SESSIONS + 1),
        trial_fn=load_study.tracking_trial,
    )


if __name__ == "__main__":
    p = options.parser(__doc__, options.Defaults(pruner="none", seeds=(0,)))
    p.add_argument("--trials", type=int, required=True, help="trials in the study (grid points, one seed each)")
    opts, extra = options.parse(p)
    if extra.trials < 1:
        p.error(f"--trials must be >= 1, got {extra.trials}")
    study.main(plan(extra.trials), opts)
