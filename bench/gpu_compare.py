"""bench/gpu.py --compare: the second of docs/gpu.md's two measuring commands, Config.fast_step off against on, in
one run on one GPU.

    python bench/gpu.py --compare --out results/gpu-compare                 # on a GPU machine, ~5 min
    python bench/gpu.py --compare --fast-step compile --out DIR             # 'after' = torch.compile alone
    python bench/gpu.py --compare --hosts baseline savc --out DIR           # fewer hosts timed
    python bench/gpu.py --compare --dry --out DIR                           # the same steps, tiny, on the CPU

On the embedded benchmark written as CIFAR-100 pickles at 500 training images per class (CIFAR-100's size: 28,500
base training images an epoch after the validation carve-out), in order, each written to DIR/gpu_compare.json as
soon as it is measured (a run stopped by its time limit keeps what it had):
  1. before (fast_step off) and after (--fast-step, default cuda_graphs): one trial alone and 8 trials packed on
     the GPU (bench/gpu.py's trial processes: the cifar100 preset, ResNet-12, batch 64, 2 base epochs on 150 images
     a base class, as docs/gpu.md's earlier figures, and one incremental session); per setting the base epoch (the
     second), the first epoch's warm-up reported apart (with the setting on, torch.compile's compile time is in
     it), trials/hour;
  2. the loss over LOSS_STEPS steps of the same seed: eager twice (the run-to-run noise of cuDNN's autotuning)
     and with the setting, the largest relative difference against LOSS_TOLERANCE;
  3. each host's base epoch on its paper preset (studies/paper.py's `<dataset>_paper` settings for CIFAR-100:
     adbs/config/presets.py: host_preset), all 500 images a class, fast_step off (a study's default), time only:
     2 epochs of every phase (OrCo: 2 of its pretraining, 2 of its alignment), the second of each timed; a host
     is not started past BUDGET_S seconds (the run says which it left and the command that adds them).
--parts runs some of 1-3 (trials, loss, hosts); the figures an earlier run left in DIR, on the same card, are kept.
studies/paper.py prints measured GPU-hours from this file once it is copied to studies/gpu_measured.json
(studies/gpu_hours.py reads it; docs/gpu.md, "The two measuring commands").
--dry: 12 images a class, a ConvNet, 2 trials packed (one session each), LOSS_STEPS_DRY steps, the hosts on 2
images a class (OrCo with 10 target steps, SAVC with 256 queue slots);
fast_step is not applied on the CPU, so before and after are the same step there: the plumbing, not a measurement.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import gpu
import gpu_profile

HOSTS = ("baseline", "savc", "alice", "orco")
PACKED, PACKED_DRY = 8, 2
TRAIN_PER_CLASS, TEST_PER_CLASS, TRIAL_PER_CLASS = 500, 100, 150
LOSS_STEPS, LOSS_STEPS_DRY = 100, 8
LOSS_TOLERANCE = 0.01
"""The largest relative difference of the loss at any of the LOSS_STEPS steps, setting on against eager, that
counts as the same training (TF32 and cuDNN's autotuning make eager differ from itself run to run)."""
EPOCHS = 2
PARTS = ("trials", "loss", "hosts")
EXPECTED_S = {"the data (500 images a class)": 10, "before: one trial, 8 packed (one session each)": 55,
              "after: one trial, 8 packed (compile included)": 110, "the loss over 100 steps, 3 runs": 20,
              "4 hosts' paper-preset epochs": 100}
"""Device seconds each part is expected to take on one H100/H200: an estimate from docs/gpu.md's figures and an
assumed 60 s of compilation in the first trial process (later ones read inductor's cache), not measured."""
BUDGET_S = 265
"""A host is not started when this many seconds of the run (after its imports) would pass before it ends (HOST_S: its
expected seconds): the command ends inside a 300 s limit, says which hosts it left, and a later run with --parts
hosts --hosts ... adds them."""
HOST_S = {"baseline": 20, "savc": 25, "alice": 25, "orco": 35}


def run(out: Path, *, dry: bool, after: str, hosts: list[str], parts: tuple[str, ...] = PARTS) -> int:
    from adbs import exits

    device = "cpu" if dry else "cuda"
    expected = {k: v for k, v in EXPECTED_S.items() if ("hosts" in parts or "host" not in k)
                and ("trials" in parts or "packed" not in k) and ("loss" in parts or "loss" not in k)}
    print(f"bench/gpu.py --compare{' --dry' if dry else ''}: before fast_step=off, after fast_step={after}; expected "
          f"device time ~{sum(expected.values())} s ({'; '.join(f'{k} ~{v} s' for k, v in expected.items())}; an "
          f"estimate, not measured){' - on the CPU here: the plumbing only, fast_step not applied' if dry else ''}",
          flush=True)
    command = (f"bench/gpu.py --compare --fast-step {after}" + (f" --parts {' '.join(parts)}" if parts != PARTS else "")
               + (f" --hosts {' '.join(hosts)}" if tuple(hosts) != HOSTS else "") + (" --dry" if dry else ""))
    res = earlier(out) or {"dry": dry, "before": "off", "after": after, "trials": {}, "hosts": {}, "commands": []}
    res.update(command=command, commands=[*res.get("commands", []), command], date=datetime.date.today().isoformat(),
               versions=gpu_profile.versions(device))
    if "trials" in parts:
        res["after"] = after
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adbs-gpu-compare-") as tmp:
        work = Path(tmp)
        from side_by_side.data import write_benchmark

        per_class = (12, 4) if dry else (TRAIN_PER_CLASS, TEST_PER_CLASS)
        data = write_benchmark(work / "data", train_per_class=per_class[0], test_per_class=per_class[1])
        res["data"] = {k: data[k] for k in ("train_per_class", "test_per_class", "train_images", "synthetic_version")}
        for setting in ("off", after) if "trials" in parts else ():
            res["trials"][setting] = trials(setting, data, work, device, dry)
            _write(out, res, t0)
        if "loss" in parts:
            res["loss"] = loss_check(after, data, device, dry)
            _write(out, res, t0)
        left = list(hosts) if "hosts" in parts else []
        while left and (dry or time.perf_counter() - t0 + HOST_S.get(left[0], 30) <= BUDGET_S):
            host = left.pop(0)
            res["hosts"][host] = host_epochs(host, data, device, dry)
            _write(out, res, t0)
    if left:
        print(f"hosts left for time ({BUDGET_S} s): {' '.join(left)}; time them with: python bench/gpu.py --compare "
              f"--parts hosts --hosts {' '.join(left)} --out {out} (the figures already in it are kept)", flush=True)
    res["hosts_left"] = left
    res["ratios"] = ratios(res["trials"], res["after"])
    _write(out, res, t0)
    print(summary(res), flush=True)
    print(f"compare: {time.perf_counter() - t0:.0f} s; wrote {out / 'gpu_compare.json'}")
    return exits.OK


def earlier(out: Path) -> dict[str, Any] | None:
    """The figures an earlier run wrote to `out` on this card (kept where this run measures no new ones); None
    when there are none. bench/gpu.py refuses, before any work, an `out` holding another card's (`check_out`)."""
    path = out / "gpu_compare.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    print(f"kept from the earlier run in {out}: trials {', '.join(old.get('trials', {})) or 'none'}, loss check "
          f"{'yes' if 'loss' in old else 'no'}, hosts {', '.join(old.get('hosts', {})) or 'none'}", flush=True)
    return old


def check_out(out: Path, dry: bool) -> str | None:
    """What is wrong with `out` for this run: a gpu_compare.json there of another card, of the other mode (--dry or
    not), or not readable; None when it is fine."""
    path = out / "gpu_compare.json"
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text())
    except ValueError:
        return f"{path} is there but not JSON; give another --out or remove it"
    if bool(old.get("dry")) != dry:
        return f"{path} holds a {'--dry' if old.get('dry') else 'GPU'} run's figures; give another --out"
    if not dry:
        import torch

        card = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        if old.get("versions", {}).get("card") != card:
            return f"{path} was measured on {old.get('versions', {}).get('card')}, not {card}; give another --out"
    return None


def trial_config(setting: str, data: dict[str, Any], device: str, dry: bool) -> dict[str, Any]:
    """bench/gpu.py's trial: the cifar100 preset on the written data, 150 images a base class, 2 base epochs."""
    from adbs.config import preset

    s = {**gpu.FULL, **(gpu.QUICK if dry else {})}
    base = preset("cifar100").to_dict()
    cfg = {**base, "dataset": "cifar100", "data_root": data["data_root"], "index_list": data["index_list"],
           "base_epochs": EPOCHS, "device": device, "backbone": s.get("backbone", base["backbone"]),
           "base_images_per_class": None if dry else TRIAL_PER_CLASS, "fast_step": setting}
    cfg.update({k: s[k] for k in ("sessions", "finetune_epochs") if k in s})
    cfg["sessions"] = 1  # the base epochs are what is compared; one session keeps the trial whole in less time
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()}


def trials(setting: str, data: dict[str, Any], work: Path, device: str, dry: bool) -> dict[str, Any]:
    """One trial alone (every CPU), then PACKED at once (the CPUs split): their base epochs and trials/hour."""
    cfg = trial_config(setting, data, device, dry)
    cpus = os.cpu_count() or 1
    k = PACKED_DRY if dry else PACKED
    # the cap counts after the validation carve-out (Config.base_images_per_class); --dry: all, as bench/gpu.py counts
    n_train = round(60 * data["train_per_class"] * (1 - cfg["val_fraction"])) if dry else 60 * TRIAL_PER_CLASS
    wall1, (one,) = gpu.run_trials(1, {**cfg, "threads": cpus}, work, f"{setting}-alone")
    wall_k, outs = gpu.run_trials(k, {**cfg, "threads": max(1, cpus // k)}, work, f"{setting}-packed")
    alone = gpu.epoch_figures(one, n_train)
    packed = [gpu.epoch_figures(o, n_train) for o in outs]
    got = {"fast_step": setting, "images": n_train, "alone": {**alone, "wall_s": wall1, "memory": one["memory"]},
           "packed": {"k": k, "wall_s": wall_k, "epoch_s": statistics.median(p["epoch_s"] for p in packed),
                      "warmup_s": statistics.median(p["warmup_s"] for p in packed)},
           "trials_per_hour": {"alone": 3600.0 / wall1, "packed": 3600.0 * k / wall_k}}
    print(f"fast_step={setting}: one trial {alone['epoch_s']:.2f} s a base epoch ({alone['images_per_s']:.0f} images/s), "
          f"warm-up {alone['warmup_s']:.1f} s apart (epoch 1 {alone['first_epoch_s']:.1f} s); {k} packed "
          f"{got['packed']['epoch_s']:.2f} s a base epoch each (warm-up {got['packed']['warmup_s']:.1f} s); trials/hour "
          f"{got['trials_per_hour']['packed']:.0f} packed, {got['trials_per_hour']['alone']:.0f} alone", flush=True)
    return got


def loss_check(after: str, data: dict[str, Any], device: str, dry: bool) -> dict[str, Any]:
    """The loss of the first LOSS_STEPS steps, the same seed: eager, eager again, then fast_step=after."""
    from adbs import loops
    from adbs.config import from_dict
    from adbs.data import build_data

    steps = LOSS_STEPS_DRY if dry else LOSS_STEPS
    cfgs = [from_dict({**trial_config(s, data, device, dry), "threads": os.cpu_count() or 1}) for s in ("off", "off", after)]
    built = build_data(cfgs[0])
    step = loops.base_step
    curves: list[list[float]] = []

    class Enough(Exception):
        pass

    def recorded(run, *args):
        got = step(run, *args)
        curves[-1].append(float(got[0].item()) / len(args[3]))  # the step's mean loss; a read a step: not timed
        if len(curves[-1]) == steps:
            raise Enough
        return got

    loops.base_step = recorded  # restored below
    try:
        for cfg in cfgs:
            curves.append([])
            try:
                loops.train_base(cfg, built)
            except Enough:
                pass
    finally:
        loops.base_step = step
    noise, diff = relative_difference(curves[0], curves[1]), relative_difference(curves[0], curves[2])
    met = diff <= LOSS_TOLERANCE
    print(f"loss over {steps} steps: fast_step={after} against eager, largest relative difference {diff:.2e} "
          f"(eager against itself {noise:.2e}); tolerance {LOSS_TOLERANCE:g}: {'met' if met else 'NOT met'}", flush=True)
    return {"steps": steps, "eager": curves[0], "eager_again": curves[1], "after": curves[2], "noise": noise,
            "difference": diff, "tolerance": LOSS_TOLERANCE, "met": met}


def relative_difference(a: list[float], b: list[float]) -> float:
    """max_i |a_i - b_i| / |a_i| over the steps both have (inf when they differ in length or one is not finite)."""
    if len(a) != len(b) or not a:
        return float("inf")
    return max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))


def host_config(host: str, data: dict[str, Any], device: str, dry: bool):
    """The host's CIFAR-100 paper preset on the written data, EPOCHS epochs of every phase, every CPU."""
    from adbs.config import from_dict
    from adbs.config.presets import host_preset

    values = {**host_preset(host, "cifar100_paper"), "data_root": data["data_root"], "index_list": data["index_list"],
              "device": device, "base_epochs": EPOCHS, "threads": os.cpu_count() or 1, "fast_step": "off"}
    if host == "orco":
        values["orco.pretrain_epochs"] = EPOCHS
    if dry:  # the same code, smaller: a ConvNet, 2 images a class, fewer target steps and queue slots, small batches
        values.update({"backbone": "convnet", "base_images_per_class": 2,
                       **({"orco.pretrain_batch_size": 64, "orco.target_steps": 10} if host == "orco" else {}),
                       **({"savc.queue_size": 256} if host == "savc" else {})})
    return from_dict(values)


def host_epochs(host: str, data: dict[str, Any], device: str, dry: bool) -> dict[str, Any]:
    """The host's base session (train_base, in this process) on its paper preset; each phase's second epoch."""
    from adbs.data import build_data
    from adbs.hosts import create_host
    from adbs.loops import train_base
    from adbs.runtime import Runtime

    cfg = host_config(host, data, device, dry)
    built = build_data(cfg)
    phases = [(p.name, p.epochs) for p in create_host(cfg, built, Runtime(cfg)).phases()]
    t0 = time.perf_counter()
    curve = train_base(cfg, built).curve
    wall = time.perf_counter() - t0
    times, at, got = [r["epoch_time_s"] for r in curve], 0, {}
    for name, epochs in phases:
        got[name] = {"epoch_s": times[at + epochs - 1], "first_epoch_s": times[at]}
        at += epochs
    n_train = len(built.sessions[0].train)
    print(f"{host} ({'cifar100_paper' if not dry else 'tiny'}, {cfg.backbone}, batch {cfg.batch_size}, {n_train} "
          "base training images): " + "; ".join(f"{name} {v['epoch_s']:.2f} s an epoch (first {v['first_epoch_s']:.1f} s)"
                                                  for name, v in got.items()), flush=True)
    return {"phases": got, "images": n_train, "batch_size": cfg.batch_size, "backbone": cfg.backbone,
            "fast_step": cfg.fast_step, "wall_s": wall}


def ratios(trials_: dict[str, dict[str, Any]], after: str) -> dict[str, float]:
    """After against before: the base epoch's speed-up alone and packed, and trials/hour packed."""
    b, a = trials_.get("off"), trials_.get(after)
    if not (a and b):
        return {}
    return {"alone_epoch_speedup": b["alone"]["epoch_s"] / a["alone"]["epoch_s"],
            "packed_epoch_speedup": b["packed"]["epoch_s"] / a["packed"]["epoch_s"],
            "packed_trials_per_hour": a["trials_per_hour"]["packed"] / b["trials_per_hour"]["packed"],
            "packed_vs_alone_before": b["trials_per_hour"]["packed"] / b["trials_per_hour"]["alone"]}


def summary(res: dict[str, Any]) -> str:
    r = res["ratios"]
    if not r:
        return "before/after: not both measured"
    return (f"before/after (fast_step off -> {res['after']}): base epoch {r['alone_epoch_speedup']:.2f}x faster alone, "
            f"{r['packed_epoch_speedup']:.2f}x packed; trials/hour packed {r['packed_trials_per_hour']:.2f}x; "
            f"compile warm-up apart: {res['trials'][res['after']]['alone']['warmup_s']:.1f} s alone against "
            f"{res['trials']['off']['alone']['warmup_s']:.1f} s eager")


def _write(out: Path, res: dict[str, Any], t0: float) -> None:
    res["wall_s"] = time.perf_counter() - t0
    (out / "gpu_compare.json").write_text(json.dumps(res, indent=1, default=str))
