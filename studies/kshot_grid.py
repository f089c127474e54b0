"""kshot_grid: ADBS under the paper's practical settings, ways {5, 10} x shots {1, 5, 10, 15, 20, 50}.

    python studies/kshot_grid.py                       # 12 cells x (baseline, adb+ic), seeds until each cell decides
    python studies/kshot_grid.py --variants adb+ic     # ADBS alone in each cell (the paper's figures)
    python studies/kshot_grid.py --ways 5 --shots 1 5  # a sub-grid: 2 cells
    python studies/kshot_grid.py --seeds 0             # a fixed design: one seed per cell (no verdicts)
    python studies/kshot_grid.py --preset mini_imagenet --data-root DIR   # the paper's setting, GPU

Each cell runs the baseline (fixed boundary m = 1) and full ADBS (--variants), and each ADBS row is compared
with the baseline of its own cell: a verdict per cell ("does ADBS help at k shots?"). Ways and shots are data
conditions, not knobs: no configuration is named best across them (its progress lines name no best so far either),
no importance ranks them, and tradeoff.png draws no Pareto front across cells (each cell's rows joined and named).
Each cell is the full pipeline (base session, then every incremental session); on the embedded
benchmark (40 novel classes) 10-way gives 4 incremental sessions and 5-way gives 8, so the table's
avg column covers a different number of sessions per way (its `sessions` column says how many).
No pruning: every cell is a result (the study takes no --pruner).
--ways and --shots pick part of the grid (values from the grid above); `--set ways=...` is refused
because the grid sets ways and shots itself.
Ways and shots only change the incremental sessions, so all cells of a variant share ONE base session: the
first cell trains it, the others load it from <storage>/base_cache (--no-cache trains it per cell).
Without --seeds each cell runs seeds 0 1 2, then 2 more at a time for the cells still open, up to 9 (a verdict
per cell; its cells share one base session per variant and seed). Time: seed 0 alone (--seeds 0: 12 cells, one
8-epoch base session, 2 at a time) and --smoke (4 cells) as measured in
studies/times.json (the README's study table quotes them);
mini_imagenet preset: one base session (~1-2 h on one GPU) plus minutes per cell.
Writes <storage>/kshot_grid/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json,
kshot_5way.png, kshot_10way.png, tradeoff.png; MLflow experiment 'kshot_grid'.
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
from search_spaces import kshot_grid as spaces  # noqa: E402


def plan(opts: options.StudyOptions, ways: list[int] | None = None, shots: list[int] | None = None,
         variants: list[str] | None = None) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with (studies/paper.py composes it too)."""
    grid, source = (spaces.SMOKE_GRID, "SMOKE_GRID") if opts.smoke else (spaces.GRID, "GRID")
    picked = {axis: list(dict.fromkeys(v)) for axis, v in (("ways", ways), ("shots", shots)) if v}
    variants = list(dict.fromkeys(variants or (spaces.SMOKE_VARIANTS if opts.smoke else spaces.VARIANTS)))
    space = {k: v for k, v in {**grid, **picked}.items() if k != "variant"}
    space["variant"] = variants if len(variants) > 1 else variants[0]  # last: rows read "ways=5 shots=1 variant=..."
    tail = [f" variant={v}" for v in variants] if len(variants) > 1 else [""]
    return Plan(
        name="kshot_grid",
        space=space,
        space_source=f"search_spaces/kshot_grid.py:{source}"
                     + "".join(f" {axis}={' '.join(map(str, v))}" for axis, v in picked.items())
                     + f" variant={' '.join(variants)}",
        # paper table order, each cell's variants together
        order=[f"ways={w} shots={k}{t}" for w in spaces.GRID["ways"] for k in spaces.GRID["shots"] for t in tail],
        axis_flags={"ways": "--ways", "shots": "--shots", "variant": "--variants"},
        conditions=spaces.CONDITIONS,
        reference_axis="variant" if spaces.REFERENCE_VARIANT in variants and len(variants) > 1 else None,
        reference_value=spaces.REFERENCE_VARIANT,
        cpu_defaults={},  # the full CPU preset: each variant's cells share one base session (adbs.cache)
        est_trial_s=times.trial_s("kshot_grid"),
        est_load=times.load("kshot_grid"),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts


DEFAULTS = options.Defaults(pruning=False, seeds=(0, 1, 2), smoke_seeds=(0,), decide=True)
"""Its shared flags' defaults: without --seeds it adds seeds until its comparisons are resolved."""

if __name__ == "__main__":
    p = options.parser(__doc__, DEFAULTS)
    for axis in ("ways", "shots"):
        p.add_argument(f"--{axis}", type=int, nargs="+", choices=spaces.GRID[axis], metavar=axis[:-1].upper(),
                       help=f"run only these {axis} of the grid (any of {' '.join(map(str, spaces.GRID[axis]))}; "
                            f"default: all{', --smoke: ' + ' '.join(map(str, spaces.SMOKE_GRID[axis]))})")
    p.add_argument("--variants", nargs="+", choices=["baseline", "adb", "adb+ic"], metavar="VARIANT",
                   help=f"the variants every cell runs (baseline, adb, adb+ic; default: "
                        f"{' '.join(spaces.VARIANTS)}, --smoke: {' '.join(spaces.SMOKE_VARIANTS)}); with the baseline "
                        "among them, each other variant is compared with the baseline of its own cell")
    opts, extra = options.parse(p)
    study.main(*plan(opts, extra.ways, extra.shots, extra.variants))
