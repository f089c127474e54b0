"""knobs: which of ADBS's own knobs decide the last session, and how sure one can be.

    python studies/knobs.py                               # TPE over the knobs on the embedded benchmark, CPU
    python studies/knobs.py --num-samples 80 --seeds 0 1  # more configurations, each over two seeds
    python studies/knobs.py --smoke                       # a few samples on the smoke preset, end to end
    python studies/knobs.py --full-space                  # every knob over its range on the CPU too (SPACE)
    python studies/knobs.py --dataset cifar100 --data-root DIR --num-samples 100   # every knob over its range, GPU

Optuna's TPE samples full-ADBS configurations (search_spaces/knobs.py) to maximise validation average accuracy.
On the CPU presets the knobs that shape the base session (alpha, boundary_lr_scale, boundary_weight_decay) take two
values each, so at most 8 base sessions are trained and every other sample reuses one from the cache and only reruns
the incremental sessions (new_boundary_init, abs_base_boundary, finetune_epochs, finetune_lr range freely); on the
paper's datasets every knob ranges over its interval (SPACE), and --full-space takes SPACE on the CPU presets too,
where every sample then trains a base session of its own (about a base session per sample). TPE's first 10
samples are random (Optuna's n_startup_trials).
Pruning: with --dataset or --full-space the auto pruner stops trials whose base-session validation accuracy lags
(each sample trains a base session of its own there), at a base epoch only once that accuracy predicts the
objective. On the CPU space it is off unless --pruner is given: a sample whose base setting is cached replays that
base session's curve, so the pruner would stop every later sample of a lagging base setting at once and the session
knobs would never be tried on it (measured: 38 of 40 default trials pruned, 2 complete configurations, nothing to
rank), while pruning it would save only seconds.
The report opens with the importance ranking (fANOVA and PED-ANOVA over the seed-averaged configurations, with
intervals from resampling them; knobs whose intervals overlap are "not resolved at this budget") and the
base/novel trade-off figure.
Time: --smoke about a minute; the default (40 samples, 8 base epochs, 2 at a time) as measured in
studies/times.json (the README's study table quotes it), most of it the 8 base sessions, a cached sample 5-10 s;
cifar100 ~1-2 h per base session on one GPU, minutes per cached sample.
Writes <storage>/knobs/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json, importance.md,
importance.png, parallel_coordinate.png, contour.png, slice.png, tradeoff.png, report.md, optuna.db; MLflow
experiment 'knobs'.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import options  # noqa: E402
from adbs import exits  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from studies import times  # noqa: E402
from search_spaces import knobs as spaces  # noqa: E402

CPU_PRESETS = ("cpu", "smoke")


def plan(opts: options.StudyOptions, full_space: bool = False) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan: CPU_SPACE on the CPU presets with the embedded benchmark (unless full_space), else SPACE."""
    on_cpu = (opts.preset in CPU_PRESETS or opts.smoke) and opts.dataset is None
    cpu = on_cpu and not full_space
    space, name = (spaces.CPU_SPACE, "CPU_SPACE") if cpu else (spaces.SPACE, "SPACE")
    timed = "alpha_sweep" if on_cpu and full_space else "knobs"
    return Plan(
        name="knobs",
        space=space,
        space_source=f"search_spaces/knobs.py:{name}",
        cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs; docs/boundary-dynamics.md)
        # CPU_SPACE: most samples reuse a cached base session; SPACE on the CPU (--full-space): every sample trains
        # its own, as an alpha_sweep trial does (the per-epoch estimate corrects it once an epoch is measured)
        est_trial_s=times.trial_s(timed),
        est_load=times.load(timed),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts


def main(opts: options.StudyOptions, full_space: bool = False) -> int:
    """The study, then its importance section; the exit code (adbs/exits.py)."""
    out = study.run(*plan(opts, full_space))
    if out is not None:
        print_importance(out.dir)
    return exits.OK if out is None else out.code


def print_importance(folder: Path) -> None:
    """The importance section the report leads with, on the terminal too (adbs_lab/results/importance.py)."""
    path = Path(folder) / "importance.md"
    if path.is_file():
        print("\nwhich knobs matter (validation average accuracy; report.md has the figures):\n")
        print(path.read_text().strip())


def parse(argv: list[str] | None = None) -> tuple[options.StudyOptions, bool]:
    """The command line: the study's options and --full-space."""
    p = options.parser(__doc__, options.Defaults(pruner="none", pruner_when=(("dataset", "auto"), ("full_space", "auto")),
                                                 num_samples=40, smoke_num_samples=4,
                                                 seeds=(0,), smoke_seeds=(0,)))
    p.add_argument("--full-space", action="store_true",
                   help="search every knob over its range (SPACE) on the CPU presets too: each sample trains its own "
                        "base session (the auto pruner then stops lagging ones), so it costs about a base session per "
                        "sample; without it the CPU presets search CPU_SPACE (at most 8 base sessions)")
    opts, extra = options.parse(p, argv=argv)
    return opts, extra.full_space


if __name__ == "__main__":
    raise SystemExit(exits.status(main, *parse()))
