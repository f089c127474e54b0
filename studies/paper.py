"""paper: every table and figure of the ADBS paper for one dataset, from one command, in one folder with one report.

    python studies/paper.py --smoke                                   # the whole thing tiny: CPU, embedded benchmark
    python studies/paper.py                                           # embedded benchmark, the CPU presets
    python studies/paper.py --dataset cifar100 --data-root DIR        # the paper's settings for CIFAR100, GPU
    python studies/paper.py --dataset cub200 --data-root DIR --seeds 1 2 3   # every table over 3 seeds
    python studies/report.py paper --out DIR                          # redraw the latest paper report from MLflow

--dataset is cifar100, mini_imagenet or cub200 (with --data-root, the folder holding it; docs/datasets.md);
without it the embedded synthetic benchmark runs on the CPU presets. The paper's tables and figures come from
four studies, run one after another with the same options, each exactly as its own script runs it:

  hosts        main table: baseline, SAVC, ALICE and OrCo, each without and with ADBS (studies/hosts.py)
  ablation     fixed boundary vs ADB vs ADB+IC, with the t-SNE of 6 base + 4 novel classes' features and the
               class-prototype similarity heatmaps (studies/ablation.py)
  alpha_sweep  the alpha curve at the paper's points 0.01 0.02 0.05 0.08 0.1 (studies/alpha_sweep.py --grid)
  kshot_grid   5- and 10-way figures over shots 1 5 10 15 20 50 (studies/kshot_grid.py)

and the D_cs table (class separation without vs with ADBS, for every host and the ablation) is drawn from
their trials. Each table is printed beside the paper's numbers where this repository quotes them (main table
and ablation on CIFAR100, ablation on miniImageNet and CUB200, D_cs; the alpha and k-shot figures are not
quoted, so they stand alone).

Before any training the command checks every part (bad input ends here, exit 2, nothing written) and prints
how many trials it will run and how long that takes: measured on this project's 2-core CPU for the CPU
presets and --smoke, a labelled estimate for the paper presets on a GPU.
Rerunning the same command reuses every part that finished, continues an interrupted one (as --resume would)
and runs the rest; base sessions are shared through <storage>/paper_<dataset>/base_cache.
--seeds applies to every part (default 0: one trial per configuration); --hosts picks the main table's hosts.
Time: --smoke 17 trials, 13.7 min wall on this project's 2-core CPU with other jobs on it (load average 12-17;
the hosts study 10 of them; 5.9 min at load average 3); a rerun of a finished --smoke ~1.5 min (checks, report);
the paper presets: the estimate it prints (cifar100, one seed: 28 trials, 2,520 base epochs, "25-50 GPU hours",
not measured).
Writes <storage>/paper_<dataset>/ (paper_embedded/ without --dataset): one folder per part (the study's own
files), report.md with every table beside the paper's and every figure, figures/ redrawn from the MLflow
store, dcs.md and dcs.csv; MLflow: one experiment per part (hosts, ablation, alpha_sweep, kshot_grid) and the
paper run in experiment 'paper' naming them, with the report as its artifacts. --storage may be an object-store
URL (s3://bucket/prefix?endpoint_override=HOST:PORT, as for every study): the parts write there, the report is
drawn in a temporary folder and uploaded beside them, and a rerun reuses what finished there.
"""

import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

import pyarrow.fs as pafs  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from adbs import objstore  # noqa: E402
from adbs.config import ConfigError  # noqa: E402
from adbs.renames import canonical  # noqa: E402
from adbs.hosts import host_names  # noqa: E402
from adbs_lab import options, outcome, study, tracking  # noqa: E402
from adbs_lab import paper as paper_report  # noqa: E402
from adbs_lab.study_folder import StudyFolder  # noqa: E402
from studies import ablation, alpha_sweep, hosts, kshot_grid  # noqa: E402

DATASETS = ("cifar100", "mini_imagenet", "cub200")
SMOKE_S = {"hosts": (594, 8), "ablation": (62, 3), "alpha_sweep": (54, 2), "kshot_grid": (57, 4)}
"""(wall seconds, trials) of each part with --smoke, measured on this project's 2-core CPU with other jobs on it (load
average 12-17; 2026-11-27; `time python studies/paper.py --smoke`: 13.7 min in all); an idle machine is faster."""
GPU_H_PER_100_EPOCHS = (1.0, 2.0)
"""The studies' own figure for one trial of a paper preset on one GPU (100 base epochs: 1-2 h); not measured on
the paper's datasets here, so the paper presets' time is printed as an estimate, scaled by base epochs."""

p = options.parser(__doc__, options.Defaults(pruning=False, seeds=(0,)))
p.add_argument("--hosts", nargs="+", default=hosts.spaces.HOSTS, choices=list(host_names()),
               help=f"host methods of the main table, each without and with ADBS (default: "
                    f"{' '.join(hosts.spaces.HOSTS)}, the paper's four)")
opts, extra = options.parse(p)
given = {**dict(opts.config_values), **{canonical(k): v for k, v in opts.config_overrides().items()}}
dataset = given.get("dataset")  # --dataset, --set dataset=... or a --config file's
if dataset == "synthetic":  # the embedded benchmark by name (a best_config.json of a CPU study says so)
    dataset = None
if dataset is not None and dataset not in DATASETS:
    typed = {canonical(k): v for k, v in opts.config_overrides().items()}.get("dataset") is not None
    source = "--dataset" if typed else f"--config {opts.config_file}: its dataset:"
    p.error(f"{source} {dataset!r}: the paper's datasets are {', '.join(DATASETS)}, or synthetic, the embedded "
            "benchmark (the default)")
if dataset and not given.get("data_root"):
    p.error(f"--dataset {dataset} needs --data-root DIR, the folder holding it (docs/datasets.md); this command "
            "downloads nothing")
if opts.host:
    p.error("--host: the paper study runs every host in its main table and the other parts on the baseline host, "
            "as the paper does; for one host use studies/ablation.py --host NAME")
if opts.preset != "cpu":
    p.error("--preset: the paper study uses the CPU presets, or the paper's presets with --dataset; use --set "
            "KEY=VALUE to change a setting in every part")

t0 = time.time()
label = dataset or "embedded"
folder = f"paper_{label}{opts.folder}"
remote = objstore.is_url(opts.storage)
if remote:  # object store: the parts live under <storage>/<folder>/, the report is drawn here and uploaded there
    storage = objstore.join(opts.storage, folder)
    out = None  # a staging folder, made when the report is drawn
else:
    out = Path(opts.storage).expanduser().resolve() / folder
    storage = str(out)
shown = objstore.redact(storage)  # printed and logged: no credentials
# the paper's stated settings (alpha 0.05, base batch 128) on the released code's preset of the dataset
part_opts = opts.replace(storage=storage, name=None,
                         preset=f"{dataset}_paper" if dataset and not opts.smoke else opts.preset)
# --set <host>.<option> reaches that host's rows of the main table (the hosts study routes it); the other parts
# run the baseline host, which has no such options.
baseline_opts = part_opts.replace(overrides=tuple((k, v) for k, v in opts.overrides if "." not in k),
                                  config_values=tuple((k, v) for k, v in opts.config_values if "." not in k))
# The k-shot grid draws each cell's shots from --seeds: index lists fix 5-way 5-shot, so they stay with the others.
kshot_opts = baseline_opts.replace(
    overrides=tuple((k, v) for k, v in baseline_opts.overrides if canonical(k) != "index_list"),
    config_values=tuple((k, v) for k, v in baseline_opts.config_values if k != "index_list"))
if kshot_opts != baseline_opts:
    print("note: index_list applies to hosts, ablation and alpha_sweep; the k-shot grid draws its own shots from "
          "--seeds", flush=True)
try:
    parts = {"hosts": hosts.plan(part_opts, list(dict.fromkeys(extra.hosts))), "ablation": ablation.plan(baseline_opts),
             "alpha_sweep": alpha_sweep.plan(baseline_opts, grid=True), "kshot_grid": kshot_grid.plan(kshot_opts)}
except options.StudyInputError as e:
    p.error(str(e))
if dataset == "cub200":  # ~30 training images a class: the grid's 10-50 shots do not exist (the paper's k-shot
    del parts["kshot_grid"]  # figures are on miniImageNet), so its cells would be refused
    print("note: cub200 has about 30 training images per class, too few for the k-shot grid's 10-50 shots; the "
          "paper draws its k-shot figures on miniImageNet (--dataset mini_imagenet), so this run leaves them out",
          flush=True)

# -- every part checked, and what it will cost, before any of them trains (nothing written) ---------
study._env_defaults()
cost, state, total_run, where = {}, {}, 0, "tracking store"
try:
    tracking.tracking_problem(tracking.tracking_uri(opts.tracking_uri))
    for name, (plan, popts) in parts.items():
        where = name  # named in the error
        base_cfg, configs, _ = study.validate(plan, popts)
        n = study.size(plan, popts)[3]
        state[name] = study.held(plan, popts, base_cfg)
        # k-shot cells differ in their incremental sessions only: one base session per seed (base_cache)
        bases = {repr(sorted((k, v) for k, v in c.to_dict().items() if k not in ("ways", "shots"))): c
                 for c in configs}.values() if name == "kshot_grid" else configs
        epochs = sum(c.base_epochs for c in bases)
        cost[name] = (n, epochs)
        total_run += 0 if state[name] == "finished" else n
        busy = StudyFolder(storage, plan.name).running()
        if busy and state[name] != "finished":
            raise options.StudyInputError(busy)
except (ConfigError, options.StudyInputError, tracking.TrackingError) as e:
    study.fail(f"paper, {where}: {e}")

at_once = opts.max_concurrent or max(1, int((os.cpu_count() or 1) // (opts.cpus_per_trial or 1)))
print(f"paper ({label}): {len(parts)} studies, {sum(n for n, _ in cost.values())} trials, {total_run} to run "
      f"(seeds {' '.join(map(str, opts.seeds))}), into {shown}")
for name, (n, epochs) in cost.items():
    plan = parts[name][0]
    doing = {"finished": "finished earlier: reused", "unfinished": "interrupted earlier: continued"}.get(
        state[name], "to run")
    if opts.smoke:
        seconds, trials = SMOKE_S[name]  # scaled to the trials asked for (fewer --hosts, more --seeds)
        when = f"~{seconds * n / trials / 60:.1f} min (measured on a busy 2-core CPU)"
    elif not dataset:
        when = (f"~{math.ceil(n / at_once) * plan.est_trial_s / 60:.0f} min ({plan.est_trial_s:.0f} s a trial as the "
                f"study measured it, {at_once} at a time)")
    else:
        lo, hi = (h * epochs / 100 for h in GPU_H_PER_100_EPOCHS)
        when = f"~{lo:.0f}-{hi:.0f} GPU h (estimate, {epochs} base epochs)"
    print(f"  {name:<12} {n:>3} trials  {when}  [{doing}]", flush=True)
if dataset and not opts.smoke:
    epochs = sum(e for name, (_, e) in cost.items() if state[name] != "finished")
    print(f"estimate (not measured on {dataset} here): {GPU_H_PER_100_EPOCHS[0] * epochs / 100:.0f}-"
          f"{GPU_H_PER_100_EPOCHS[1] * epochs / 100:.0f} GPU hours for {epochs} base epochs to train, from the studies' "
          "figure of 1-2 h for a 100-epoch trial on one GPU, counting base sessions the parts share (base_cache) "
          "once per part; docs/gpu.md's H200 throughput for the baseline (~3,300 images/s) would make it several "
          "times less, and SAVC, ALICE and OrCo, which train several views per image, more", flush=True)

if opts.dry_run:
    print(f"dry run: study paper ({label}), {sum(n for n, _ in cost.values())} trials in {len(parts)} studies checked; nothing "
          "was started and no result written", flush=True)
    raise SystemExit(0)

# -- the parts, one after another, each its own study; a part that fails does not stop the others ----
codes = {}
for name, (plan, popts) in parts.items():
    if state[name] == "finished":
        print(f"\npaper: {name} finished earlier in {shown}; reused", flush=True)
        continue
    print(f"\npaper: {name} ({paper_report.PARTS[name]})", flush=True)
    try:
        codes[name] = study.run(plan, popts.replace(resume=state[name] == "unfinished")).code
    except SystemExit as e:  # refused (2), failed after it started (1), or interrupted (130)
        codes[name] = e.code if isinstance(e.code, int) else outcome.FAILED
        if codes[name] == outcome.INTERRUPTED:
            print(f"\npaper: interrupted in {name}; rerun the same command to continue (finished parts are "
                  "reused)", file=sys.stderr, flush=True)
            raise SystemExit(outcome.INTERRUPTED) from None
code = outcome.worst(codes.values())

# -- one report from the store -----------------------------------------------------------------------
uri = tracking.tracking_uri(opts.tracking_uri)


def parent_run(plan) -> str | None:
    """The part's parent run, None when it has none (refused at its own checks)."""
    where = StudyFolder(storage, plan.name)
    try:
        text = where.read_text(tracking.RUNS_FILE)
        return json.loads(text).get("parent") if text else None  # the part ran just now: its own file
    finally:
        where.cleanup()  # for a URL, StudyFolder makes a staging folder even to read


runs = {name: run for name, (plan, _) in parts.items() if (run := parent_run(plan))}
wall = time.time() - t0
command = " ".join(study._logged_argv(opts.argv))  # no credentials of an object-store URL
meta = {"command": f"`{command}`", "dataset": dataset or "embedded synthetic benchmark",
        "preset": parts["ablation"][1].preset_name, "seeds": " ".join(map(str, opts.seeds)),
        "trials": f"{sum(n for n, _ in cost.values())} ({total_run} run by this command)",
        "wall time of this command": f"{wall / 60:.1f} min", "study folders": shown, "tracking URI": uri}
client = MlflowClient(uri)
out = out or Path(tempfile.mkdtemp(prefix=f"adbs-{folder}-report-"))
files = paper_report.write_report(client, runs, out, dataset=dataset, meta=meta)
run_id = paper_report.log_run(client, uri, dataset=dataset, parts=runs, files=files, root=out,
                              tags={"adbs.command": command[:7500], "adbs.storage": shown})
report_at = out / "report.md"
if remote:  # beside the parts, as each study uploads its own report; the staging folder goes
    fs, path = objstore.open_fs(storage)
    pafs.copy_files(str(out), path.rstrip("/"), destination_filesystem=fs)
    shutil.rmtree(out, ignore_errors=True)
    report_at = objstore.redact(objstore.join(storage, "report.md"))
print(f"\npaper ({label}): done in {(time.time() - t0) / 60:.1f} min; report: {report_at}")
print(f"tables beside the paper: {', '.join(str(f.relative_to(out)) for f in files if f.suffix in ('.md',))}")
print(f"figures: {', '.join(str(f.relative_to(out)) for f in files if f.suffix == '.png')}")
print(f"MLflow: experiment '{paper_report.EXPERIMENT}', run {run_id}; redraw with: python studies/report.py {run_id}")
if code != outcome.OK:
    bad = ", ".join(f"{name} (exit {c})" for name, c in codes.items() if c != outcome.OK)
    print(f"\nerror: paper ({label}): {bad} did not end well (see each part's lines above); the report holds what "
          "ended; rerun the same command to run again what did not finish", file=sys.stderr, flush=True)
raise SystemExit(code)
