"""GPU throughput: the limit, one trial, packed trials and the authors' code, each measured in this run.

    python bench/gpu.py                                                   # on a GPU machine
    python bench/gpu.py --official adbs-official      # and the authors' epoch time
    python bench/gpu.py --device cpu --quick                              # the plumbing on a CPU, ~1-2 min
    python bench/gpu.py --profile --out results/gpu-profile    # the tests, the figures, a trace (bench/gpu_profile.py)
    python bench/gpu.py --compare --out results/gpu-compare    # Config.fast_step off and on (bench/gpu_compare.py)
    python bench/gpu.py --profile --dry --out DIR              # either at tiny sizes on the CPU (--compare too)

Prints one line per figure (docs/gpu.md says what each means and what bounds it):
  1. train step alone: images/s of forward + backward + SGD step of the trial's backbone at its batch size on
     data already on the device, fp32 (TF32 on CUDA) with and without channels_last, and bf16 autocast (CUDA);
  2. one trial: images/s of its base epochs (training images / epoch time, validation pass included; the
     median over epochs 2..E) through the real trial code (adbs.trial.run_trial in a fresh process, the
     cifar100 preset on the embedded benchmark written as CIFAR-100 pickles by bench/vs_official.py), and
     its ratio to (1); the first epoch's warm-up (epoch 1 minus the median); its peak GPU memory;
  3. trials/hour: k trials at once on one GPU (k from adbs_lab/cluster/packing.py's decision on the measured peak)
     vs one trial at a time, each trial a fresh process;
  4. with --official: the authors' base epoch on the same data, as published (2 x 224 px + 4 x 96 px
     multi-crops, computed and dropped) and without the dropped crops, through bench/vs_official.py's copy,
     patches and command; ours' epoch as a multiple of it.
Then the targets as ratios. --out writes everything as gpu.json. --profile and --compare are the two commands
of docs/gpu.md's measurement ("The two measuring commands"): each prints its expected device time first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from adbs import exits  # noqa: E402

GiB = 1024**3
# (one trial >= this x the step alone, packed >= this x one trial per GPU, ours >= this x the authors' published epoch)
TARGETS = {"trial_vs_step": 0.8, "packed_vs_single": 3.0, "vs_authors_published": 8.0}
FULL = {"train_per_class": 150, "test_per_class": 100, "epochs": 4, "official_epochs": 2, "steps": 60, "warm": 10}
QUICK = {"train_per_class": 12, "test_per_class": 4, "epochs": 2, "official_epochs": 1, "steps": 4, "warm": 2,
         "backbone": "convnet", "sessions": 2, "finetune_epochs": 1}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "nan"


def step_alone(backbone: str, batch: int, device: str, *, amp: bool, channels_last: bool, steps: int,
               warm: int, classes: int = 60) -> float:
    """Images/s of the training step on one batch already on the device (no data path at all)."""
    import torch

    from adbs.backbones import create_backbone

    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    net = create_backbone(backbone).to(device).to(memory_format=fmt)
    head = torch.nn.Linear(net.out_dim, classes, bias=False).to(device)
    opt = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.1, momentum=0.9, nesterov=True)
    x = torch.randn(batch, 3, 32, 32, device=device).contiguous(memory_format=fmt)
    y = torch.randint(0, classes, (batch,), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    t0 = 0.0
    for i in range(warm + steps):
        if i == warm:
            sync()
            t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(head(net(x)), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sync()
    return batch * steps / (time.perf_counter() - t0)


def trial_main(cfg_file: str, out_file: str) -> None:
    """One trial in this process (the hidden --_trial mode): result curve, wall time, GPU memory."""
    import torch

    from adbs.config import from_dict
    from adbs.trial import run_trial

    cfg = from_dict(json.loads(Path(cfg_file).read_text()))
    mem: dict[str, Any] = {}
    if cfg.device == "cuda":
        torch.zeros(1, device="cuda")
        free0, total = torch.cuda.mem_get_info()
        mem = {"total": int(total), "context": int(total - free0)}
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    res = run_trial(cfg).to_dict()
    wall = time.perf_counter() - t0
    if cfg.device == "cuda":
        mem.update(peak_reserved=int(torch.cuda.max_memory_reserved()), peak_allocated=int(torch.cuda.max_memory_allocated()))
    Path(out_file).write_text(json.dumps({"base_curve": res["base_curve"], "wall_s": wall, "memory": mem}))


def run_trials(k: int, cfg: dict[str, Any], work: Path, tag: str) -> tuple[float, list[dict[str, Any]]]:
    """k trials at once, each a fresh process (seeds 0..k-1): (wall of all, their outputs)."""
    procs = []
    t0 = time.perf_counter()
    for i in range(k):
        c = work / f"{tag}-{i}.cfg.json"
        c.write_text(json.dumps({**cfg, "seed": i}))
        o = work / f"{tag}-{i}.out.json"
        log = open(work / f"{tag}-{i}.log", "w")
        procs.append((subprocess.Popen([sys.executable, __file__, "--_trial", str(c), str(o)], stdout=log,
                                       stderr=subprocess.STDOUT, cwd=ROOT), o, log, work / f"{tag}-{i}.log"))
    outs = []
    for p, o, log, path in procs:
        rc = p.wait()
        log.close()
        if rc != 0:
            raise SystemExit(f"bench trial {tag} failed (exit {rc}); its log {path}:\n{path.read_text()[-3000:]}")
        outs.append(json.loads(o.read_text()))
    return time.perf_counter() - t0, outs


def epoch_figures(out: dict[str, Any], n_train: int) -> dict[str, float]:
    times = [r["epoch_time_s"] for r in out["base_curve"]]
    later = statistics.median(times[1:]) if len(times) > 1 else times[0]
    return {"epoch_s": later, "first_epoch_s": times[0], "warmup_s": times[0] - later, "images_per_s": n_train / later}


def authors_epochs(official: Path, data: dict[str, Any], work: Path, device: str, epochs: int,
                   variants: tuple[str, ...] = ("published", "no_dropped_crops")) -> dict[str, Any]:
    """The authors' base epoch (median train seconds) as published and without the dropped multi-crops."""
    from side_by_side.commands import released_command
    from side_by_side.data import copy_lists
    from side_by_side.logs import parse_released_log
    from side_by_side.patches import apply_patches, copy_released, released_patches

    copy = work / "official"
    copy_released(official, copy)
    # base session plus one incremental session: the epoch time is what is measured
    apply_patches(copy, released_patches(device, sessions=1))
    copy_lists(data, copy)  # where the released loader reads the session lists
    out = {}
    for name in variants:
        published = name == "published"
        cmd = released_command(sys.executable, Path(data["data_root"]), seed=1, epochs=epochs, device=device)
        if published:  # the README's command: its default 2 x 224 + 4 x 96 multi-crops, computed and dropped
            i = cmd.index("-num_crops")
            del cmd[i:i + 6]
        r = subprocess.run(cmd, cwd=copy, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        (work / f"official-{name}.log").write_text(r.stdout + r.stderr)
        if r.returncode != 0:
            raise SystemExit(f"the authors' code failed ({name}): {(r.stdout + r.stderr)[-2000:]}")
        rows = parse_released_log(r.stdout + r.stderr)["epochs"]
        secs = [row.get("train_s", row.get("train_time", float("nan"))) for row in rows]
        out[name] = statistics.median(secs[1:] if len(secs) > 1 else secs)
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a ConvNet, 12 images per class): the plumbing")
    ap.add_argument("--epochs", type=int, default=None, help="base epochs of each trial (default 4; quick 2)")
    ap.add_argument("--official", type=Path, default=None, help="a checkout of the authors' code (bench/vs_official.py)")
    ap.add_argument("--max-per-gpu", type=int, default=None, help="cap of the packing decision (adbs_lab/cluster/packing.py)")
    ap.add_argument("--out", type=Path, default=None, help="folder for gpu.json (with --profile/--compare: required)")
    ap.add_argument("--profile", action="store_true",
                    help="the gpu-marked tests, the figures at 2 base epochs (8 packed) and a torch.profiler trace of "
                         "one ADBS base step (bench/gpu_profile.py)")
    ap.add_argument("--compare", action="store_true",
                    help="Config.fast_step off against on in one run: one trial, 8 packed, each host's base epoch on "
                         "its paper preset, the loss over 100 steps (bench/gpu_compare.py)")
    ap.add_argument("--dry", action="store_true",
                    help="with --profile/--compare: the same steps at tiny sizes on the CPU (a ConvNet, a few images "
                         "and steps): the plumbing, not a measurement")
    ap.add_argument("--fast-step", choices=["compile", "cuda_graphs", "off"], default=None,
                    help="--profile: the setting the step is profiled with (default off, the current code); "
                         "--compare: the setting 'after' (default cuda_graphs)")
    ap.add_argument("--hosts", nargs="+", default=None, metavar="HOST",
                    help="--compare: the hosts whose base epoch is timed (default: baseline savc alice orco)")
    ap.add_argument("--parts", nargs="+", default=None, choices=["trials", "loss", "hosts"],
                    help="--compare: the parts to run (default all: trials, loss, hosts); an earlier run's figures in "
                         "--out, on the same card, are kept")
    ap.add_argument("--_trial", nargs=2, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a._trial:
        trial_main(*a._trial)
        return exits.OK
    if a.profile or a.compare:
        return measuring_command(ap, a)
    if a.dry or a.fast_step or a.hosts or a.parts:
        ap.error("--dry, --fast-step, --hosts and --parts go with --profile or --compare")

    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    check_arguments(ap, a, device)
    s = {**FULL, **(QUICK if a.quick else {})}
    res = benchmark(device, s, a.epochs or s["epochs"], official=a.official, max_per_gpu=a.max_per_gpu, quick=a.quick)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "gpu.json").write_text(json.dumps(res, indent=1, default=str))
    return exits.OK


def measuring_command(ap: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    """--profile or --compare: the arguments checked here (nothing runs before), then its module's run."""
    if a.profile and a.compare:
        ap.error("--profile and --compare are two commands: give one (docs/gpu.md runs them one after the other)")
    if a.out is None:
        ap.error(f"{'--profile' if a.profile else '--compare'} writes its figures to a folder: give --out DIR")
    if a.quick or a.epochs is not None or a.max_per_gpu is not None:
        ap.error("--quick, --epochs and --max-per-gpu are the plain benchmark's; --profile/--compare fix their sizes "
                 "(--dry: tiny ones on the CPU)")
    if a.official is not None:
        ap.error("--official is the plain benchmark's (the authors' epoch); --profile/--compare do not run it")
    if a.dry and a.device == "cuda":
        ap.error("--dry runs on the CPU; leave out --device cuda")
    import torch

    device = "cpu" if a.dry else (a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device == "cpu" and not a.dry:
        ap.error("--profile/--compare measure a GPU and torch sees none here" if a.device is None else
                 "--profile/--compare measure a GPU; on a CPU run them with --dry (the plumbing at tiny sizes)")
    check_arguments(ap, a, device)
    if a.profile:
        if a.hosts or a.parts:
            ap.error("--hosts and --parts are --compare's")
        import gpu_profile

        return gpu_profile.run(a.out, dry=a.dry, fast_step=a.fast_step or "off")
    import gpu_compare

    if a.fast_step == "off":
        ap.error("--compare --fast-step names the setting 'after'; 'off' is 'before' already")
    from adbs.hosts import host_names

    hosts = a.hosts or list(gpu_compare.HOSTS)
    unknown = [h for h in hosts if h not in host_names()]
    if unknown:
        ap.error(f"--hosts {' '.join(unknown)}: unknown; the hosts are {', '.join(host_names())}")
    if gpu_compare.check_out(a.out, a.dry):
        ap.error(gpu_compare.check_out(a.out, a.dry))
    parts = tuple(p for p in gpu_compare.PARTS if p in (a.parts or gpu_compare.PARTS))
    return gpu_compare.run(a.out, dry=a.dry, after=a.fast_step or "cuda_graphs", hosts=hosts, parts=parts)


def check_arguments(ap: argparse.ArgumentParser, a: argparse.Namespace, device: str) -> None:
    """Every check that needs no compute, before any (bad input ends here, exit 2)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA GPU; use --device cpu (with --quick)")
    if a.official is not None and not a.official.is_dir():
        ap.error(f"--official {a.official}: not a folder; pass a checkout of the authors' code")
    if a.epochs is not None and a.epochs < 2:
        ap.error("--epochs must be >= 2 (the first epoch is warm-up)")
    if a.max_per_gpu is not None and a.max_per_gpu < 1:
        ap.error(f"--max-per-gpu must be >= 1 (trials one GPU may hold at once), got {a.max_per_gpu}")
    from adbs.writable import out_dir_problem

    if a.out is not None and out_dir_problem(a.out):  # now, not after the benchmark: its figures would be lost
        ap.error(out_dir_problem(a.out))
    if a.official is not None:
        from side_by_side import ToolError
        from side_by_side.patches import check_released_checkout

        try:
            check_released_checkout(a.official)
        except ToolError as e:
            ap.error(f"--official {a.official}: {e}")


def benchmark(device: str, s: dict[str, Any], epochs: int, *, official: Path | None, max_per_gpu: int | None,
              quick: bool) -> dict[str, Any]:
    """The plain benchmark's figures (1-4 of the docstring), printed one a line; returns them."""
    import torch

    from adbs.config import preset
    from adbs_lab.cluster import packing

    res: dict[str, Any] = {"device": device, "quick": quick}
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        res["device_name"] = torch.cuda.get_device_name()
    print(f"device: {res.get('device_name', 'cpu')} ({device}), torch {torch.__version__}, {os.cpu_count()} CPUs",
          flush=True)
    base = preset("cifar100").to_dict()
    backbone = s.get("backbone", base["backbone"])
    batch = base["batch_size"]

    # 1. the limit
    variants = [("fp32+TF32 channels_last" if device == "cuda" else "fp32 channels_last", False, True),
                ("fp32 NCHW", False, False)] + ([("bf16 autocast channels_last", True, True)] if device == "cuda" else [])
    steps = {}
    for name, amp, cl in variants:
        steps[name] = step_alone(backbone, batch, device, amp=amp, channels_last=cl, steps=s["steps"], warm=s["warm"])
        print(f"train step alone, {backbone} batch {batch}, {name}: {steps[name]:.0f} images/s", flush=True)
    limit = steps[variants[0][0]]
    if device == "cuda":
        bf16 = steps["bf16 autocast channels_last"]
        print(f"AMP choice: bf16 is {ratio(bf16, limit)}x fp32+TF32 -> "
              f"{'amp=true would be faster' if bf16 > limit else 'amp=false (the default) is right'}")
    res["step_alone"] = steps

    with tempfile.TemporaryDirectory(prefix="adbs-gpu-bench-") as tmp:
        work = Path(tmp)
        from side_by_side import BASE_CLASSES
        from side_by_side.data import write_benchmark

        data = write_benchmark(work / "data", train_per_class=s["train_per_class"], test_per_class=s["test_per_class"])
        cfg = {**base, "dataset": "cifar100", "data_root": data["data_root"], "index_list": data["index_list"],
               "base_epochs": epochs, "device": device, "backbone": backbone}
        for k in ("sessions", "finetune_epochs"):
            if k in s:
                cfg[k] = s[k]
        cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}
        n_train = round(BASE_CLASSES * s["train_per_class"] * (1 - base["val_fraction"]))

        # 2. one trial alone (all the machine's CPUs, as one trial per GPU gets them)
        cpus = os.cpu_count() or 1
        one_cfg = {**cfg, "threads": cpus}
        wall1, (one,) = run_trials(1, one_cfg, work, "alone")
        ef = epoch_figures(one, n_train)
        res["one_trial"] = {**ef, "wall_s": wall1, "memory": one["memory"]}
        print(f"one trial: {ef['images_per_s']:.0f} images/s per base epoch ({n_train} training images in "
              f"{ef['epoch_s']:.2f} s, validation included), {ratio(ef['images_per_s'], limit)}x the train step alone",
              flush=True)
        print(f"first-epoch warm-up: {ef['warmup_s']:.1f} s (epoch 1 {ef['first_epoch_s']:.1f} s, later {ef['epoch_s']:.2f} s)")
        mem = one["memory"]
        if mem:
            trial_bytes = mem["peak_reserved"] + mem["context"]
            print(f"peak GPU memory per trial: {mem['peak_reserved'] / GiB:.2f} GiB reserved "
                  f"({mem['peak_allocated'] / GiB:.2f} allocated) + {mem['context'] / GiB:.2f} GiB context and other "
                  f"use, of {mem['total'] / GiB:.0f} GiB")
            dec = packing.decide(gpu_total_bytes=mem["total"], trial_bytes=trial_bytes, cluster_cpus=cpus,
                                 cluster_gpus=1, trials=10**6, max_per_gpu=max_per_gpu or packing.MAX_PER_GPU)
            print(dec.line())
            k, k_cpus = dec.trials_per_gpu, dec.cpus_per_trial
        else:
            print("peak GPU memory per trial: not measured (no GPU)")
            k, k_cpus = 2, max(1, cpus // 2)
            print(f"packing: no GPU to decide on; {k} concurrent trials to exercise the path")
        res["packing"] = {"trials_per_gpu": k, "cpus_per_trial": k_cpus}

        # 3. trials/hour: k at once vs one at a time
        wall_k, outs = run_trials(k, {**cfg, "threads": int(k_cpus)}, work, "packed")
        per_hour_single, per_hour_packed = 3600.0 / wall1, 3600.0 * k / wall_k
        each = statistics.median(epoch_figures(o, n_train)["epoch_s"] for o in outs)
        res["trials_per_hour"] = {"single": per_hour_single, "packed": per_hour_packed, "k": k, "wall_k_s": wall_k,
                                  "packed_epoch_s": each}
        print(f"trials/hour: {per_hour_packed:.0f} packed ({k} at once, {each:.2f} s per base epoch each) vs "
              f"{per_hour_single:.0f} one trial per GPU: {ratio(per_hour_packed, per_hour_single)}x", flush=True)

        # 4. the authors' code
        if official is None:
            print("authors' code: not run (pass --official PATH)")
        else:
            au = authors_epochs(official, data, work, device, s["official_epochs"])
            res["authors"] = au
            print(f"authors' code: {au['published']:.2f} s per base epoch as published, {au['no_dropped_crops']:.2f} s "
                  f"without its dropped crops; ours {ef['epoch_s']:.2f} s: {ratio(au['published'], ef['epoch_s'])}x and "
                  f"{ratio(au['no_dropped_crops'], ef['epoch_s'])}x faster")

    got = {"trial_vs_step": ef["images_per_s"] / limit, "packed_vs_single": per_hour_packed / per_hour_single}
    if "authors" in res:
        got["vs_authors_published"] = res["authors"]["published"] / ef["epoch_s"]
    res["ratios"] = got
    print("targets: " + "; ".join(
        f"{name} {got[name]:.2f}x (target {t:.2f}x) {'met' if got[name] >= t else 'NOT met'}" if name in got
        else f"{name}: not run" for name, t in TARGETS.items()))
    return res


if __name__ == "__main__":
    sys.exit(main())
