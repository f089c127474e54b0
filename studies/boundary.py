"""boundary: what the released boundary recipe does, what each remedy changes, against the fixed-boundary baseline.

    python studies/boundary.py                                    # 8 rows, seeds added until resolved (3 to 11), CPU
    python studies/boundary.py --seeds 0 1 2 3 4                  # a fixed design: exactly these seeds
    python studies/boundary.py --preset cifar100 --data-root DIR  # the paper's CIFAR100 settings, GPU

Rows (search_spaces/boundary.py): `released` (the authors' code: signed m everywhere it is
signed there), one row per remedy (`abs_mean_init`, `finetune_abs`, `abs_base`, `lr_scale=0.1`,
`warmup=2`), `all_remedies`, and `baseline` (m = 1 fixed). Each (row, seed) is one trial of the
full pipeline; the table shows test accuracy per session (mean ± 95% CI over seeds) with Δlast
against the baseline, and warnings name the trials whose novel classes are never right or whose
seen classes are never predicted. boundary_histograms.png shows the base boundaries m after the
base session per row (how many crossed zero); boundary_sessions.png the session curves.
Rows that differ only after the base session share one base session per seed (adbs/cache.py).
Time: its first batch (24 trials, 15 base sessions trained, 2 at a time) as measured in studies/times.json (the
README's study table quotes it); --smoke ~1-2 min; --preset cifar100 ~1-2 h per base session on one GPU.
Writes <storage>/boundary/: sessions.parquet, trials.parquet (with base_boundaries, warning),
table.txt/.md, boundary_histograms.png, boundary_sessions.png; MLflow experiment 'boundary'.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import options  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from studies import times  # noqa: E402
from search_spaces import boundary as spaces  # noqa: E402


def plan(opts: options.StudyOptions) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with."""
    return Plan(
        name="boundary",
        space=spaces.SPACE,
        space_source="search_spaces/boundary.py:ROWS",
        rows=spaces.ROWS,
        baseline=spaces.BASELINE,
        parents=spaces.PARENTS,
        order=list(spaces.ROWS),
        cpu_defaults={},  # the calibrated CPU preset as it is
        est_trial_s=times.trial_s("boundary"),
        est_load=times.load("boundary"),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts


DEFAULTS = options.Defaults(seeds=(0, 1, 2), smoke_seeds=(0,), decide=True)
"""Its shared flags' defaults: without --seeds it adds seeds until its comparisons are resolved."""

if __name__ == "__main__":
    opts, _ = options.parse(__doc__, DEFAULTS)
    study.main(*plan(opts))
