"""paper: every table and figure of the ADBS paper for one dataset, from one command, in one folder with one report.

    python studies/paper.py --smoke                                   # the whole thing tiny: CPU, embedded benchmark
    python studies/paper.py                                           # embedded benchmark, the CPU presets
    python studies/paper.py --dataset cifar100 --data-root DIR        # the paper's settings for CIFAR100, GPU
    python studies/paper.py --dataset cub200 --data-root DIR --seeds 1 2 3   # every table over 3 seeds
    python studies/report.py paper --out DIR                          # redraw the latest paper report from MLflow

--dataset is cifar100, mini_imagenet or cub200 (with --data-root, the folder holding it; docs/data.md);
without it the embedded synthetic benchmark runs on the CPU presets. The paper's tables and figures come from
four studies, run one after another with the same options, each exactly as its own script runs it:

  hosts        hosts table: baseline, SAVC, ALICE and OrCo, each without and with ADBS (studies/hosts.py)
  ablation     fixed boundary vs ADB vs ADB+IC, with the t-SNE of 6 base + 4 novel classes' features and the
               class-prototype similarity heatmaps (studies/ablation.py)
  alpha_sweep  the alpha curve at the paper's points 0.01 0.02 0.05 0.08 0.1 (studies/alpha_sweep.py --grid)
  kshot_grid   5- and 10-way figures over shots 1 5 10 15 20 50 (studies/kshot_grid.py)

and the D_cs table (class separation without vs with ADBS, for every host and the ablation) is drawn from
their trials. Each table is printed beside the paper's numbers where this repository quotes them (hosts table
and ablation on CIFAR100, ablation on miniImageNet and CUB200, D_cs; the alpha and k-shot figures are not
quoted, so they stand alone).

Before any training the command checks every part (bad input ends here, exit 2, nothing written) and prints
how many trials it will run and how long that takes: measured on this project's 2-core CPU for the CPU
presets and --smoke, a labelled estimate for the paper presets on a GPU.
Rerunning the same command reuses every part that finished, continues an interrupted one (as --resume would)
and runs the rest; base sessions are shared through <storage>/paper_<dataset>/base_cache.
--seeds applies to every part (default 0: one trial per configuration); --hosts picks the hosts table's hosts.
Time: --smoke as measured in studies/times.json (the README quotes it); a rerun of a finished --smoke ~1.5 min
(checks, report); the paper presets: the estimate it prints (cifar100, one seed: 28 trials, 2,520 base epochs,
"25-50 GPU hours", not measured), or for cifar100 the GPU-hours from a measurement once studies/gpu_measured.json
holds one (studies/gpu_hours.py: which parts measured, which extrapolated, on which card).
Writes <storage>/paper_<dataset>/ (paper_embedded/ without --dataset; with --name NAME, paper_<dataset>-NAME/, each
part's folder and Optuna study named <part>-NAME): one folder per part (the study's own files), report.md with every
table beside the paper's and every figure, figures/ redrawn from the MLflow store, dcs.md and dcs.csv; MLflow: one
experiment per part (hosts, ablation, alpha_sweep, kshot_grid) and the paper run in experiment 'paper' naming them,
with the report as its artifacts. --smoke keeps apart from all of that: paper_<dataset>-smoke/, each part as its own
--smoke run (folder and experiment <part>-smoke), the paper run in experiment 'paper-smoke'. --storage may be an
object-store URL (s3://bucket/prefix?endpoint_override=HOST:PORT, as for every study): the parts write there, the
report is drawn in a temporary folder and uploaded beside them, and a rerun reuses what finished there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

import argparse  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from adbs import exits  # noqa: E402
from adbs import objstore  # noqa: E402
from adbs.config import canonical  # noqa: E402
from adbs.hosts import host_names  # noqa: E402
from adbs.redaction import redact, reveal  # noqa: E402
from adbs_lab import study  # noqa: E402
from adbs_lab.driver import options  # noqa: E402
from adbs_lab.driver import outcome  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from adbs_lab.results.names import EMBEDDED  # noqa: E402
from adbs_lab.stores import tracking_store  # noqa: E402
from search_spaces import hosts as host_spaces  # noqa: E402
from search_spaces import kshot_grid as kshot_spaces  # noqa: E402
from studies import ablation, alpha_sweep, gpu_hours, hosts, kshot_grid, times  # noqa: E402

if TYPE_CHECKING:
    import mlflow.tracking as mlflow_tracking
    import pyarrow.fs as pafs

    from adbs_lab.driver import compose, preflight
    from adbs_lab.results import paper as paper_report
else:  # Ray, MLflow, pandas, torch: loaded at their first use, once every part's flags are checked (adbs/light.py)
    mlflow_tracking = light.lazy("mlflow.tracking")
    pafs = light.lazy("pyarrow.fs")
    compose = light.lazy("adbs_lab.driver.compose")
    preflight = light.lazy("adbs_lab.driver.preflight")
    paper_report = light.lazy("adbs_lab.results.paper")

DATASETS = ("cifar100", "mini_imagenet", "cub200")


def main() -> int:
    """Every part's flags checked (exit 2 before the driver loads), then every part checked and its cost printed
    before any trains (nothing written), then the parts one after another (adbs_lab/driver/compose.py), then one
    report from the MLflow store; the worst part's exit code."""
    p = options.parser(__doc__, options.Defaults(pruning=False, seeds=(0,)))
    p.add_argument("--hosts", nargs="+", default=host_spaces.HOSTS, choices=list(host_names()),
                   help=f"host methods of the hosts table, each without and with ADBS (default: "
                        f"{' '.join(host_spaces.HOSTS)}, the paper's four)")
    opts, extra = options.parse(p)
    try:  # the paper's folder and its parts' are named by --name: one folder name, confined to --storage
        options.check_name(opts.name, smoke=opts.smoke)
    except options.StudyInputError as e:
        p.error(str(e))
    dataset = _dataset(p, opts)
    t0 = time.time()
    label = dataset or EMBEDDED
    folder = f"paper_{label}{opts.folder}"
    # object store: the parts live under <storage>/<folder>/, the report is drawn here and uploaded there
    remote = objstore.is_url(opts.storage)
    out = None if remote else Path(opts.storage).expanduser().resolve() / folder  # else made for the report
    storage = objstore.join(opts.storage, folder) if remote else str(out)
    plans = _plans(p, opts, extra.hosts, dataset, storage)
    study.check_parts("paper", plans)  # what needs no store, before the driver loads
    return compose.interruptible("paper", lambda: _whole(opts, dataset, label, plans, storage, out, folder, t0))


def _whole(opts: options.StudyOptions, dataset: str | None, label: str,
           plans: dict[str, tuple[Plan, options.StudyOptions]], storage: str, out: Path | None, folder: str,
           t0: float) -> int:
    """The parts checked (stores and folders too), run and reported: the worst part's exit code."""
    # k-shot cells differ in their incremental sessions only: one base session per seed (base_cache)
    parts = [compose.Part(name, plan, popts, title=paper_report.PARTS[name],
                          base_free=("ways", "shots") if name == "kshot_grid" else ())
             for name, (plan, popts) in plans.items()]
    whole = compose.Composite("paper", label, parts, shown=redact(storage),  # printed and logged: no credentials
                              tracking_uri=tracking_store.tracking_uri(opts.tracking_uri), storage=storage)
    checked = whole.check()
    measurement = _measurement(dataset, opts)
    whole.print_cost(checked, _estimate(opts, dataset, measurement), opts.seeds)
    if dataset and not opts.smoke:
        _print_gpu_hours(checked, dataset, measurement)
    if opts.dry_run:
        whole.print_dry_run(checked)
        return exits.OK
    codes = whole.run(checked)
    code = outcome.worst(codes.values())
    shown = compose.reportable(checked, codes)
    if not shown:  # every part refused: no report and no paper run, which would stand for a paper study that ran
        print(f"\nerror: {whole.title}: every part was refused (see each part's error above); no report was written",
              file=sys.stderr, flush=True)
        return code
    _report(whole, checked, shown, opts, dataset, out or Path(tempfile.mkdtemp(prefix=f"adbs-{folder}-report-")), t0)
    if code != exits.OK:
        bad = ", ".join(f"{name} (exit {c})" for name, c in codes.items() if c != exits.OK)
        print(f"\nerror: {whole.title}: {bad} did not end well (see each part's lines above); the report holds what "
              "ended; rerun the same command to run again what did not finish", file=sys.stderr, flush=True)
    return code


def _dataset(p, opts: options.StudyOptions) -> str | None:
    """The paper's dataset (--dataset, --set dataset=... or a --config file's), None for the embedded benchmark;
    what the paper study does not take ends here (exit 2)."""
    given = {**dict(opts.config_values), **{canonical(k): v for k, v in opts.config_overrides().items()}}
    dataset = given.get("dataset")
    if dataset == "synthetic":  # the embedded benchmark by name (a best_config.json of a CPU study says so)
        dataset = None
    if dataset is not None and dataset not in DATASETS:
        typed = {canonical(k): v for k, v in opts.config_overrides().items()}.get("dataset") is not None
        source = "--dataset" if typed else f"--config {opts.config_file}: its dataset:"
        p.error(f"{source} {dataset!r}: the paper's datasets are {', '.join(DATASETS)}, or synthetic, the embedded "
                "benchmark (the default)")
    if dataset and not given.get("data_root"):
        p.error(f"--dataset {dataset} needs --data-root DIR, the folder holding it (docs/data.md); this command "
                "downloads nothing")
    if opts.host:
        p.error("--host: the paper study runs every host in its hosts table and the other parts on the baseline "
                "host, as the paper does; for one host use studies/ablation.py --host NAME")
    if opts.preset != "cpu":
        p.error("--preset: the paper study uses the CPU presets, or the paper's presets with --dataset; use --set "
                "KEY=VALUE to change a setting in every part")
    return dataset


def _plans(p: argparse.ArgumentParser, opts: options.StudyOptions, host_list: list[str], dataset: str | None,
           storage: str) -> dict[str, tuple[Plan, options.StudyOptions]]:
    """The four part studies, each as its own script plans it, with the paper's options: {part: (plan, options)}."""
    # the paper's stated settings (alpha 0.05, base batch 128) on the released code's preset of the dataset
    # Each part is named by the paper's --name (its folder and its Optuna study: two paper studies of other names
    # on one --optuna-storage never share a part), and its advice to continue is the paper's own command.
    part_opts = opts.replace(storage=storage, continue_argv=opts.argv,
                             preset=f"{dataset}_paper" if dataset and not opts.smoke else opts.preset)
    # --set <host>.<option> reaches that host's rows of the hosts table (the hosts study routes it); the other parts
    # run the baseline host, which has no such options.
    baseline_opts = part_opts.replace(overrides=tuple((k, v) for k, v in opts.overrides if "." not in k),
                                      config_values=tuple((k, v) for k, v in opts.config_values if "." not in k))
    # The k-shot grid draws each cell's shots from --seeds: index lists fix 5-way 5-shot, so they stay with the others.
    kshot_opts = baseline_opts.replace(
        overrides=tuple((k, v) for k, v in baseline_opts.overrides if canonical(k) != "index_list"),
        config_values=tuple((k, v) for k, v in baseline_opts.config_values if k != "index_list"))
    if kshot_opts != baseline_opts:
        print("note: index_list applies to hosts, ablation and alpha_sweep; the k-shot grid draws its own shots "
              "from --seeds", flush=True)
    try:
        plans = {"hosts": hosts.plan(part_opts, list(dict.fromkeys(host_list))),
                 "ablation": ablation.plan(baseline_opts), "alpha_sweep": alpha_sweep.plan(baseline_opts, grid=True),
                 # --seeds auto needs a comparison in every part: the k-shot cells then run the baseline beside ADBS
                 "kshot_grid": kshot_grid.plan(kshot_opts, variants=kshot_spaces.VARIANTS if opts.seeds_auto else None)}
    except options.StudyInputError as e:
        p.error(str(e))
    if dataset == "cub200":  # ~30 training images a class: the grid's 10-50 shots do not exist (the paper's k-shot
        del plans["kshot_grid"]  # figures are on miniImageNet), so its cells would be refused
        print("note: cub200 has about 30 training images per class, too few for the k-shot grid's 10-50 shots; the "
              "paper draws its k-shot figures on miniImageNet (--dataset mini_imagenet), so this run leaves them out",
              flush=True)
    return plans


def _measurement(dataset: str | None, opts: options.StudyOptions) -> dict | None:
    """The GPU measurement the paper presets' time is read from (studies/gpu_hours.py), None without one; a file that
    is not one is named and left out (the estimate is printed), never a reason to refuse the study."""
    if not dataset or opts.smoke or dataset not in gpu_hours.MEASURED_DATASETS:
        return None
    try:
        return gpu_hours.load()
    except gpu_hours.MeasurementError as e:
        print(f"note: {e}; the time below is the estimate", flush=True)
        return None


def _estimate(opts: options.StudyOptions, dataset: str | None, measurement: dict | None = None):
    """A part's time: --smoke as measured (studies/times.json, on a busy machine), the CPU presets from each study's
    own figure, the paper presets in GPU hours: measured epoch times x base epochs where a GPU measurement stands for
    the dataset (studies/gpu_hours.py), else an estimate from their base epochs."""
    at_once = opts.max_concurrent or max(1, int((os.cpu_count() or 1) // (opts.cpus_per_trial or 1)))

    def when(c: compose.Checked) -> str:
        counts = [c.trials] if c.fewest is None else [c.fewest, c.trials]  # --seeds auto: first batch .. the cap
        if opts.smoke:
            seconds, trials = times.smoke(c.name)  # scaled to the trials asked for (fewer --hosts, more --seeds)
            return f"~{'-'.join(f'{seconds * n / trials / 60:.1f}' for n in counts)} min (measured on a busy 2-core CPU)"
        if not dataset:
            est = c.part.plan.est_trial_s
            return (f"~{'-'.join(f'{math.ceil(n / at_once) * est / 60:.0f}' for n in counts)} min ({est:.0f} s a trial "
                    f"as the study measured it, {at_once} at a time)")
        scale = c.trials / (c.fewest or c.trials)  # base epochs are counted at the cap
        if measurement is not None:
            alone = gpu_hours.measured(c.bases, measurement)["alone_h"]
            return (f"~{alone / scale:.1f}{'' if scale == 1 else f'-{alone:.1f}'} GPU h alone (measured epoch times on "
                    f"{measurement['versions']['card']}, extrapolated)")
        lo, hi = (h * c.base_epochs / 100 for h in gpu_hours.GPU_H_PER_100_EPOCHS)
        return f"~{lo / scale:.0f}-{hi:.0f} GPU h (estimate, up to {c.base_epochs} base epochs)"

    return when


def _print_gpu_hours(checked: list[compose.Checked], dataset: str, measurement: dict | None) -> None:
    """The GPU-hours of the base sessions still to train: measured where studies/gpu_hours.py has a measurement for
    the dataset, else the estimate (each says which)."""
    bases = [b for c in checked if c.state != compose.FINISHED for b in c.bases]
    print(gpu_hours.line(bases, dataset, measurement), flush=True)


def _report(whole: compose.Composite, checked: list[compose.Checked], shown: list[str], opts: options.StudyOptions,
            dataset: str | None, out: Path, t0: float) -> None:
    """One report from the MLflow store (every table beside the paper's, every figure, D_cs) and the paper run
    naming the parent runs of the parts `shown` (reused or run, never refused); for an object store, uploaded beside
    the parts."""
    runs = whole.parent_runs(shown)
    command = " ".join(preflight.logged_argv(opts.argv))  # no credentials of an object-store URL
    meta = {"command": f"`{command}`", "dataset": dataset or "embedded synthetic benchmark",
            "preset": next(c.part.opts for c in checked if c.name == "ablation").preset_name,
            "seeds": " ".join(map(str, opts.seeds)),
            "trials": f"{compose.total(checked)} ({compose.to_run(checked)} run by this command)",
            "wall time of this command": f"{(time.time() - t0) / 60:.1f} min", "study folders": whole.shown,
            "tracking URI": whole.tracking_uri}
    client = mlflow_tracking.MlflowClient(reveal(whole.tracking_uri))  # the SecretUrl's real URL (adbs/redaction.py)
    files = paper_report.write_report(client, runs, out, dataset=dataset, meta=meta)
    run_id = paper_report.log_run(client, whole.tracking_uri, dataset=dataset, parts=runs, files=files, root=out,
                                  storage=whole.storage, tags={"adbs.command": command[:7500], "adbs.storage": whole.shown},
                                  experiment=opts.experiment(paper_report.EXPERIMENT))
    report_at: Path | str = out / "report.md"
    if objstore.is_url(whole.storage):  # beside the parts, as each study uploads its own report; the staging goes
        fs, path = objstore.open_fs(whole.storage)
        pafs.copy_files(str(out), path.rstrip("/"), destination_filesystem=fs)
        shutil.rmtree(out, ignore_errors=True)
        report_at = redact(objstore.join(whole.storage, "report.md"))
    print(f"\n{whole.title}: done in {(time.time() - t0) / 60:.1f} min; report: {report_at}")
    print(f"tables beside the paper: {', '.join(str(f.relative_to(out)) for f in files if f.suffix in ('.md',))}")
    print(f"figures: {', '.join(str(f.relative_to(out)) for f in files if f.suffix == '.png')}")
    print(f"MLflow: experiment '{opts.experiment(paper_report.EXPERIMENT)}', run {run_id}; redraw with: python "
          f"studies/report.py {run_id}")


if __name__ == "__main__":
    raise SystemExit(exits.status(main))  # an Exit of any step: its line, its code
