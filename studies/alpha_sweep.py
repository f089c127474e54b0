"""alpha_sweep: how sensitive is ADBS to the IC loss weight alpha?

    python studies/alpha_sweep.py                      # alphas 0.01 0.02 0.05 0.1 x 3 to 8 seeds: the curve, error bars
    python studies/alpha_sweep.py --grid               # the paper's 5 points 0.01 0.02 0.05 0.08 0.1 x 3 to 8 seeds
    python studies/alpha_sweep.py --num-samples 20     # Optuna's TPE picks 20 alphas in [0.01, 0.1], median pruning
    python studies/alpha_sweep.py --num-samples 8 --objectives val_last_base_acc:max val_last_novel_acc:max
                                                       # the base/novel trade-off: a Pareto front, no pruning
    python studies/alpha_sweep.py --dataset cifar100 --data-root DIR --grid --seeds 1 2 3   # paper settings, GPU

Runs ADB+IC (full ADBS) trials, one Tune trial per (alpha, seed), each the full FSCIL pipeline.
The default and --grid run every point over every seed to the end (no pruning unless --pruner is
given), and alpha_sensitivity.png draws the mean over seeds with its 95% confidence interval.
--num-samples N: a search instead of a curve: Optuna's TPE picks N alphas log-uniformly in the paper's
range [0.01, 0.1] to maximise validation average accuracy, one seed each (unless --seeds), and the
auto pruner stops trials whose base-session validation accuracy lags, at a base epoch only once that
accuracy is shown to predict the objective there (docs/statistics.md, "Pruning premise"). TPE draws its first 10
configurations at random (Optuna's n_startup_trials), so up to 10 samples are a random search.
Time: the default run (12 trials, 8 base epochs, 2 at a time) and --smoke (2 alphas x 1 seed) as measured in
studies/times.json (the README's study table quotes them); --grid 15 trials; the cifar100 preset ~1-2 h per trial
on one GPU.
Writes <storage>/alpha_sweep/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json,
alpha_sensitivity.png, optuna.db; MLflow experiment 'alpha_sweep' (parent run + one run per trial).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

from typing import Any  # noqa: E402

from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import options  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from studies import times  # noqa: E402
from search_spaces import alpha_sweep as spaces  # noqa: E402

def plan(opts: options.StudyOptions, grid: bool = False) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with (studies/paper.py composes it too, with grid=True):
    --num-samples: TPE's SPACE; --smoke: SMOKE_GRID; --grid: the paper's GRID; else DEFAULT_GRID."""
    space: dict[str, Any]
    if opts.num_samples is not None:
        space, name = spaces.SPACE, "SPACE"
    elif opts.smoke:
        space, name = spaces.SMOKE_GRID, "SMOKE_GRID"
    else:
        space, name = (spaces.GRID, "GRID") if grid else (spaces.DEFAULT_GRID, "DEFAULT_GRID")
    return Plan(
        name="alpha_sweep",
        space=space,
        space_source=f"search_spaces/alpha_sweep.py:{name}",
        reference_axis="alpha",  # each alpha against the preset's (--reference LABEL: another row)
        cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs; docs/boundary-dynamics.md)
        est_trial_s=times.trial_s("alpha_sweep"),
        est_load=times.load("alpha_sweep"),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts


DEFAULTS = options.Defaults(pruner="none", pruner_when=(("num_samples", "auto"),), sample_on_request=True,
                            seeds=(0, 1, 2), smoke_seeds=(0,), decide=True, seeds_when=(("num_samples", (0,)),))
"""Its shared flags' defaults: its grid adds seeds until its comparisons are resolved; --num-samples, one seed each."""

if __name__ == "__main__":
    # A grid's points each count: pruning one would drop it (or some of its seeds) from the curve. A TPE search
    # explores alphas: one seed each, and the auto pruner saves the lagging ones' epochs once base accuracy is shown
    # to predict the objective (adbs_lab/search/shadows.py).
    p = options.parser(__doc__, DEFAULTS)
    p.add_argument("--grid", action="store_true",
                   help=f"the paper's 5 alphas {' '.join(map(str, spaces.GRID['alpha']))} instead of the default 4 "
                        f"({' '.join(map(str, spaces.DEFAULT_GRID['alpha']))}), each over every --seeds (--smoke: "
                        f"{' '.join(map(str, spaces.SMOKE_GRID['alpha']))})")
    opts, extra = options.parse(p)
    if extra.grid and opts.num_samples is not None:
        p.error("--grid runs the paper's points and --num-samples asks TPE to pick alphas: choose one")
    study.main(*plan(opts, extra.grid))
