"""ablation: baseline vs ADB vs ADB+IC (the paper's ablation table, with Delta_last), over seeds.

    python studies/ablation.py                                   # 3 rows, seeds added until it decides (3 to 8)
    python studies/ablation.py --seeds 0 1 2                     # a fixed design: exactly these seeds
    python studies/ablation.py --seeds 1 2 3 --toggles abs_boundary new_boundary_init boundary_weight_decay
    python studies/ablation.py --preset cifar100 --data-root DIR --seeds 1 2 3   # paper's Table, GPU

Rows: baseline (fixed boundary m = 1), adb (learnable boundaries, alpha = 0), adb+ic (full
ADBS), plus one row per --toggles entry (full ADBS with one change; see search_spaces/ablation.py).
Each (row, seed) is one trial running the full pipeline; the table shows mean ± 95% CI over seeds
and Delta_last = last-session gain over the baseline row.
Without --seeds it adds seeds until its comparisons are resolved, pausing at 8 (docs/studies.md, "Seeds until
resolved"; --more-seeds continues it). Time: its first batch (9 trials, 8 base epochs, 2 at a time) and --smoke as
measured in studies/times.json (the
README's study table quotes them); cifar100 preset ~1-2 h per trial on one GPU.
Writes <storage>/ablation/: sessions.parquet, trials.parquet, table.txt/.md (the ablation table),
best_config.json, ablation_sessions.png, and the paper's feature figures: tsne.png (t-SNE of 6 base and
4 novel classes' test features, one panel per row) and prototype_similarity.png (cosine similarity of the
class prototypes, base/novel split); MLflow experiment 'ablation'.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

from collections.abc import Sequence  # noqa: E402

from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import options  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from studies import times  # noqa: E402
from search_spaces import ablation as spaces  # noqa: E402


def plan(opts: options.StudyOptions, toggles: Sequence[str] = ()) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with (studies/paper.py composes it too)."""
    rows = {**spaces.ROWS, **{f"adb+ic -{t}": spaces.TOGGLES[t] for t in toggles}}
    return Plan(
        name="ablation",
        space=spaces.SPACE,
        space_source="search_spaces/ablation.py:ROWS" + (f"+TOGGLES{list(toggles)}" if toggles else ""),
        rows=rows,
        baseline=spaces.BASELINE,
        parents={**spaces.PARENTS, **{f"adb+ic -{t}": spaces.TOGGLE_PARENT for t in toggles}},
        order=list(rows),
        cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs; docs/boundary-dynamics.md)
        est_trial_s=times.trial_s("ablation"),
        est_load=times.load("ablation"),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts


DEFAULTS = options.Defaults(seeds=(0, 1, 2), smoke_seeds=(0,), decide=True)
"""Its shared flags' defaults: without --seeds it adds seeds until its comparisons are resolved."""

if __name__ == "__main__":
    p = options.parser(__doc__, DEFAULTS)
    p.add_argument("--toggles", nargs="*", default=[], choices=list(spaces.TOGGLES),
                   help="extra rows: full ADBS with one finer toggle changed")
    opts, extra = options.parse(p)
    study.main(*plan(opts, extra.toggles))
