"""One study of the load check (bench/load.py): a grid of 5 alphas x the --seeds, or, with --num-samples N, Optuna's TPE
picking N alphas. The study code is the project's own (adbs_lab/study.py through `study.main`); only the trial may be
replaced.

    python bench/load_study.py --preset smoke --seeds 0 1 2 3 4 --name load_0 [--tracking-only] [study flags]

--tracking-only: each trial is `tracking_trial` (the Plan's trial_fn hook, adbs_lab/driver/plan.py), which trains nothing and
reports the volume a real trial of the CPU preset reports (about 350 metric points): BASE_EPOCHS base-epoch reports
of 7 metrics and SESSIONS + 1 session reports of 14, and 6 summary metrics (349 metric points), in about a second.
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from optuna.distributions import FloatDistribution  # noqa: E402

from adbs_lab import study  # noqa: E402
from adbs_lab.driver import options

ALPHAS = [0.01, 0.02, 0.05, 0.08, 0.1]
BASE_EPOCHS, SESSIONS = 25, 11
REPORT_S = 0.03
"""Pause after each report: the trial takes about (BASE_EPOCHS + SESSIONS + 1) x REPORT_S, about a second."""


@dataclass
class Reported:
    summary: dict


def tracking_trial(cfg, *, hooks):
    """No training: reports with a real trial's keys and volume; values depend on alpha and the seed only."""
    q = 0.5 + 4 * cfg.alpha
    for e in range(1, BASE_EPOCHS + 1):
        hooks.on_base_epoch({"epoch": e, "train_loss": 1.0 / e, "train_acc": 50.0 + e, "val_acc": 60 * q * e / BASE_EPOCHS,
                             "lr": 0.1, "boundary_mean": 1.0, "boundary_min": 0.5, "boundary_max": 1.5})
        time.sleep(REPORT_S)
    accs = []
    for s in range(SESSIONS + 1):
        acc = 70 * q - 2 * s + 0.1 * cfg.seed
        accs.append(acc)
        hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc + 1, "val_base_acc": acc,
                          "val_novel_acc": acc - 10, "val_hmean": acc, "test_acc": acc, "test_base_acc": acc,
                          "test_novel_acc": acc - 10, "test_hmean": acc, "boundary_mean": 1.0, "boundary_min": 0.5,
                          "boundary_max": 1.5, "boundary_base_mean": 1.0, "boundary_novel_mean": 1.0})
        time.sleep(REPORT_S)
    mean = sum(accs) / len(accs)
    return Reported({"val_avg_acc": mean + 1, "test_avg_acc": mean, "val_last_acc": accs[-1] + 1,
                     "test_last_acc": accs[-1], "d_cs": 0.9, "wall_time_s": 1.0})


def plan(opts: options.StudyOptions, tracking_only: bool) -> study.Plan:
    sampled = opts.num_samples is not None
    return study.Plan(
        name="load",
        space={"variant": "adb+ic", "alpha": FloatDistribution(0.01, 0.1, log=True) if sampled else ALPHAS},
        space_source="bench/load_study.py:" + ("sampled" if sampled else "ALPHAS"),
        est_trial_s=1.0 if tracking_only else 20.0,
        trial_fn=tracking_trial if tracking_only else None,
    )


if __name__ == "__main__":
    p = options.parser(__doc__, options.Defaults(pruner="none", sample_on_request=True, seeds=(0,)))
    p.add_argument("--tracking-only", action="store_true", help="trials report a real trial's volume, train nothing")
    opts, extra = options.parse(p)
    study.main(plan(opts, extra.tracking_only), opts)
