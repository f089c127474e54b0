"""alpha_sweep: how sensitive is ADBS to the IC loss weight alpha?

    python studies/alpha_sweep.py                      # 4 alphas in [0.01, 0.1] (log), median pruning
    python studies/alpha_sweep.py --grid --seeds 1 2 3 # the paper's points 0.01 0.02 0.05 0.08 0.1 over 3 seeds
    python studies/alpha_sweep.py --dataset cifar100 --data-root DIR --num-samples 20  # paper settings, GPU

Runs ADB+IC (full ADBS) trials, one Tune trial per (alpha, seed), each the full FSCIL pipeline.
Sampled (the default): Optuna's TPE picks alpha to maximise validation average accuracy, and the
median pruner stops trials whose base-session validation accuracy lags. TPE draws its first 10
configurations at random (Optuna's default n_startup_trials), so the default 4 samples are a random
log-uniform search; pass --num-samples 20 or more for TPE to model the results.
--grid: every one of the paper's 5 alphas over every seed, each trial to the end (no pruning unless
--pruner is given), so every point has all its seeds.
Time: default run (4 trials, 8 base epochs, 2 at a time; the median pruner usually stops 2) 92 s wall
on an idle 2-core CPU; --grid runs 5 trials per seed, none of them pruned; --smoke ~1 min; the
cifar100 preset ~1-2 h per trial on one GPU.
Writes <storage>/alpha_sweep/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json,
alpha_sensitivity.png, optuna.db; MLflow experiment 'alpha_sweep' (parent run + one run per trial).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs_lab import options, study  # noqa: E402
from search_spaces import alpha_sweep as spaces  # noqa: E402


def plan(opts: options.StudyOptions, grid: bool = False) -> tuple[study.Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with (studies/paper.py composes it too, with grid=True)."""
    space, name = ((spaces.SMOKE_GRID, "SMOKE_GRID") if opts.smoke else (spaces.GRID, "GRID")) if grid \
        else (spaces.SPACE, "SPACE")
    return study.Plan(
        name="alpha_sweep",
        space=space,
        space_source=f"search_spaces/alpha_sweep.py:{name}",
        cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs; docs/boundary-dynamics.md)
        est_trial_s=35,
    ), opts


if __name__ == "__main__":
    # A grid's points each count: pruning one would drop it (or some of its seeds) from the table.
    p = options.parser(__doc__, options.Defaults(pruner="median", pruner_when=(("grid", "none"),), num_samples=4,
                                                 smoke_num_samples=2))
    p.add_argument("--grid", action="store_true",
                   help=f"run the paper's alphas {' '.join(map(str, spaces.GRID['alpha']))} (Optuna's GridSampler; "
                        f"--smoke: {' '.join(map(str, spaces.SMOKE_GRID['alpha']))}), each over every --seeds, every "
                        "trial to the end (pruner none unless --pruner is given), instead of sampling with TPE")
    opts, extra = options.parse(p)
    study.run(*plan(opts, extra.grid))
