"""bench/gpu.py --profile: the first of docs/gpu.md's two measuring commands, in one run on one GPU.

    python bench/gpu.py --profile --out results/gpu-profile                     # on a GPU machine, ~3 min
    python bench/gpu.py --profile --fast-step cuda_graphs --out DIR             # the step with Config.fast_step on
    python bench/gpu.py --profile --dry --out DIR                               # the same steps, tiny, on the CPU

In order, each written to DIR/profile.json as soon as it is measured (a run stopped by its time limit keeps what
it had):
  1. the gpu-marked tests (tests/adbs/data/test_loader_device.py, tests/adbs_lab/cluster/test_packing.py,
     tests/bench/test_vs_official.py; tests/bench/test_gpu.py::test_gpu_run is what 2 runs), their log in
     DIR/tests.log;
  2. the current code's figures at 2 base epochs, as the plain benchmark prints them (bench/gpu.py: benchmark):
     the train step alone, one trial, 8 trials packed on the GPU, in the same run;
  3. a torch.profiler trace of the ADBS base step (adbs/loops.py: base_step, reached through the real
     train_base) at batch 64, the cifar100 preset on the embedded benchmark: schedule wait 1, warm-up 3, active
     10 steps; DIR/trace.json (chrome://tracing, Perfetto), DIR/ops.txt (the profiler's table) and the split
     (`split`): per step the host's wall time, the GPU's kernel time and its share of the wall, kernel and
     graph launches, host-device synchronisations (the profiler's runtime calls, and on CUDA the warnings of
     torch.cuda.set_sync_debug_mode), the tensor reads on the host inside the step (`HostReads`: each one a
     synchronisation on CUDA), and the top operators and kernels.
--dry: 1 collects the tests (they skip without a GPU), 2 at bench/gpu.py's --quick sizes (2 trials packed),
3 with a ConvNet at batch 16, CPU activities only: the plumbing in about two minutes, not a measurement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from torch.overrides import TorchFunctionMode

import gpu

ROOT = Path(__file__).resolve().parents[1]
SCHEDULE = {"wait": 1, "warmup": 3, "active": 10}
"""torch.profiler.schedule of the trace: the first step skipped, three warm (cuDNN autotuning, graph capture), ten
recorded."""
GPU_TESTS = ("tests/adbs/data/test_loader_device.py", "tests/adbs_lab/cluster/test_packing.py",
             "tests/bench/test_vs_official.py")
EXPECTED_S = {"the gpu-marked tests": 60, "the figures at 2 base epochs (step alone, one trial, 8 packed)": 110,
              "the trace (data, 17 steps, the trace written)": 30}
"""Device seconds each part is expected to take on one H100/H200: an estimate from docs/gpu.md's figures (tests
36-46 s, a 150-image-per-class trial's epochs 9.7 s then 1.0 s, 8 packed 3.8 s an epoch each), not measured."""
READ_STEPS = 3
"""Steps after the profiled ones whose tensor reads on the host are counted (HostReads)."""
HOST_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy")
"""Tensor methods that bring a value to the host: on a CUDA tensor each one waits for the GPU's queue."""
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaLaunchCooperativeKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")
BUSY = 0.6
"""A step whose GPU is busy less than this share of its wall is bound by the host."""
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cuStreamSynchronize",
         "cuCtxSynchronize")


class HostReads(TorchFunctionMode):
    """Counts the tensor reads on the host (HOST_READS) made while it is entered: device-independent,
    so a CPU run counts what would synchronise on a GPU (a read of a tensor that lives on the CPU anyway, such as a
    draw from a CPU generator, counts too: an upper bound)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            self.seen[name] += 1
        return func(*args, **(kwargs or {}))


def run(out: Path, *, dry: bool, fast_step: str) -> int:
    from adbs import exits

    device = "cpu" if dry else "cuda"
    print(f"bench/gpu.py --profile{' --dry' if dry else ''}: expected device time "
          f"~{sum(EXPECTED_S.values())} s ({'; '.join(f'{k} ~{v} s' for k, v in EXPECTED_S.items())}; an estimate "
          f"from docs/gpu.md's H100 figures, not measured){' - on the CPU here: the plumbing only' if dry else ''}",
          flush=True)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"command": "bench/gpu.py --profile" + (" --dry" if dry else ""), "dry": dry,
                           "fast_step": fast_step, "versions": versions(device)}
    t0 = time.perf_counter()
    res["tests"] = gpu_tests(out, dry)
    _write(out, res, t0)
    s = {**gpu.FULL, **(gpu.QUICK if dry else {})}
    res["figures"] = gpu.benchmark(device, s, 2, official=None, max_per_gpu=8, quick=dry)
    _write(out, res, t0)
    res["trace"] = trace(out, device, fast_step, dry)
    _write(out, res, t0)
    print(f"profile: {time.perf_counter() - t0:.0f} s; wrote {out / 'profile.json'}, {out / 'trace.json'}, "
          f"{out / 'ops.txt'}, {out / 'tests.log'}")
    return exits.OK if res["tests"]["returncode"] in (0, 5) else exits.FAILED  # 5: pytest collected nothing to run


def versions(device: str) -> dict[str, Any]:
    """The card, driver, CUDA and torch versions docs/gpu.md records beside every figure."""
    import torch

    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "cpus": os.cpu_count()}
    if device == "cuda":
        out["card"] = torch.cuda.get_device_name()
        out["cudnn"] = torch.backends.cudnn.version()
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, check=False, timeout=60)
            out["driver"] = smi.stdout.strip() or smi.stderr.strip()
        except (OSError, subprocess.SubprocessError) as e:  # no nvidia-smi: the card's name is still there
            out["driver"] = f"not read: {e}"
    return out


def gpu_tests(out: Path, dry: bool) -> dict[str, Any]:
    """The gpu-marked tests in a pytest of their own; --dry only collects them (each needs a GPU)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", *GPU_TESTS] + (["--collect-only"] if dry else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    (out / "tests.log").write_text(r.stdout + r.stderr)
    tail = [line for line in r.stdout.splitlines() if line.strip()]
    summary = tail[-1] if tail else r.stderr.strip()[-300:]
    print(f"gpu-marked tests ({' '.join(cmd[3:])}): {summary} (exit {r.returncode})", flush=True)
    return {"command": " ".join(["python", *cmd[1:]]), "returncode": r.returncode, "summary": summary,
            "wall_s": time.perf_counter() - t0}


def trace_config(device: str, fast_step: str, dry: bool):
    """The profiled step's Config: the cifar100 preset (ResNet-12, batch 64) on the embedded benchmark, 20 images a
    base class (18 full batches: the 17 steps traced and counted all full, in the first epoch); --dry a ConvNet at
    batch 16 on 5 a class."""
    from adbs.config import preset

    tiny = {"backbone": "convnet", "batch_size": 16, "base_images_per_class": 5} if dry else {}
    return preset("cifar100", **{"dataset": "synthetic", "base_images_per_class": 20, "device": device,
                                 "fast_step": fast_step, "base_epochs": 2, **tiny})


def trace(out: Path, device: str, fast_step: str, dry: bool) -> dict[str, Any]:
    """SCHEDULE's steps of the real train_base under torch.profiler (the base run's step wrapped, then stopped)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from adbs import loops
    from adbs.data import build_data

    cfg = trace_config(device, fast_step, dry)
    data = build_data(cfg)
    profiled_steps, first_active = sum(SCHEDULE.values()), SCHEDULE["wait"] + SCHEDULE["warmup"]
    reads, syncs, done, failed = HostReads(), [], [0], []
    step = loops.base_step

    class Enough(Exception):
        pass

    def profiled(run, *args):
        """The schedule's steps under the profiler (the active ones in sync-debug mode on CUDA), then READ_STEPS
        more with HostReads, outside the profile: a TorchFunctionMode adds Python to every operator."""
        active, counted = first_active <= done[0] < profiled_steps, done[0] >= profiled_steps
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if active and device == "cuda":
                torch.cuda.set_sync_debug_mode("warn")
            try:
                if counted:
                    try:
                        with reads:
                            got = step(run, *args)
                    except Exception as e:  # noqa: BLE001 - a compiled step under a TorchFunctionMode: said, not fatal
                        failed.append(f"{type(e).__name__}: {e}"[:300])
                        raise Enough from e
                else:
                    got = step(run, *args)
            finally:
                if device == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
        syncs.extend(str(w.message) for w in caught if active and "synchroniz" in str(w.message))
        done[0] += 1
        if done[0] <= profiled_steps:
            prof.step()
        if done[0] == profiled_steps + READ_STEPS:
            raise Enough
        return got

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    loops.base_step = profiled  # restored below
    try:
        with profile(activities=activities, schedule=schedule(**SCHEDULE, repeat=1), record_shapes=False,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(out / "trace.json"))) as prof:
            try:
                loops.train_base(cfg, data)
            except Enough:
                pass
    finally:
        loops.base_step = step
    (out / "ops.txt").write_text(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    got = split(events(prof), SCHEDULE["active"], device)
    got["host_reads_per_step"] = None if failed else sum(reads.seen.values()) / READ_STEPS
    got["host_reads_error"] = failed[0] if failed else None
    got["host_reads"] = dict(reads.seen)
    got["sync_warnings_per_step"] = len(syncs) / SCHEDULE["active"] if device == "cuda" else None
    got["sync_warnings"] = sorted(set(syncs))[:10]
    got["config"] = {k: cfg.to_dict()[k] for k in ("backbone", "batch_size", "host", "variant", "fast_step", "device")}
    print(describe(got), flush=True)
    return got


def events(prof) -> list[tuple[str, str, float, float]]:
    """(name, device type, duration, self host time; microseconds) of every event the profiler kept (the active
    steps)."""
    out = []
    for e in prof.events():
        kind = str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1]
        out.append((e.name, kind, float(e.time_range.elapsed_us()), float(getattr(e, "self_cpu_time_total", 0.0))))
    return out


def split(evts: list[tuple[str, str, float, float]], steps: int, device: str) -> dict[str, Any]:
    """Per step: the host's wall (the ProfilerStep spans), the GPU's kernel time and its share of that wall, kernel
    and graph launches, synchronising runtime calls, operator calls; the top operators by self host time and the
    top kernels by GPU time. A GPU busy for less than BUSY of the step's wall waits on the host (kernel launches,
    Python), else on its kernels."""
    cuda = device == "cuda"
    step_wall = [d for n, k, d, _ in evts if n.startswith("ProfilerStep")]
    wall_us = sum(step_wall) / max(len(step_wall), 1)
    kernels = [(n, d) for n, k, d, _ in evts if k == "CUDA"]
    kernel_us = sum(d for _, d in kernels) / steps
    host = Counter(n for n, k, _, _ in evts if k == "CPU")
    ops: Counter[str] = Counter()
    for n, k, _, own in evts:
        if k == "CPU" and n.startswith("aten::"):
            ops[n] += own
    top_kernels: Counter[str] = Counter()
    for n, d in kernels:
        top_kernels[n[:80]] += d
    busy = kernel_us / wall_us if wall_us > 0 and cuda else None
    return {
        "steps": steps, "wall_ms_per_step": wall_us / 1000, "kernel_ms_per_step": kernel_us / 1000 if cuda else None,
        "gpu_busy_share": busy,
        "bound_by": None if busy is None else ("the host (launches, Python)" if busy < BUSY else "the GPU's kernels"),
        "kernels_per_step": len(kernels) / steps if cuda else None,
        "launches_per_step": sum(host[n] for n in LAUNCHES) / steps,
        "graph_launches_per_step": sum(host[n] for n in GRAPH_LAUNCHES) / steps,
        "sync_calls_per_step": sum(host[n] for n in SYNCS) / steps,
        "aten_calls_per_step": sum(v for n, v in host.items() if n.startswith("aten::")) / steps,
        "top_ops_ms_per_step": {n: round(d / steps / 1000, 3) for n, d in ops.most_common(10)},
        "top_kernels_ms_per_step": {n: round(d / steps / 1000, 3) for n, d in top_kernels.most_common(10)},
    }


def describe(got: dict[str, Any]) -> str:
    """The split in a few lines, as printed."""
    c = got["config"]
    head = (f"trace of the ADBS base step ({c['host']} {c['variant']}, {c['backbone']} batch {c['batch_size']}, "
            f"fast_step {c['fast_step']}, {c['device']}; {got['steps']} steps): {got['wall_ms_per_step']:.2f} ms a step")
    if got["gpu_busy_share"] is not None:
        head += (f", GPU kernels {got['kernel_ms_per_step']:.2f} ms ({got['gpu_busy_share']:.0%} busy: bound by "
                 f"{got['bound_by']}); {got['kernels_per_step']:.0f} kernels, {got['launches_per_step']:.0f} kernel "
                 f"launches, {got['graph_launches_per_step']:.0f} graph launches a step")
    lines = [head,
             f"host-device synchronisations a step: {got['sync_calls_per_step']:.1f} runtime calls"
             + (f", {got['sync_warnings_per_step']:.1f} sync-debug warnings" if got["sync_warnings_per_step"] is not None
                else " (CPU: none can happen)")
             + ("; tensor reads on the host inside the step: " + (
                 f"{got['host_reads_per_step']:.1f} ({', '.join(f'{k} x{v}' for k, v in got['host_reads'].items()) or 'none'})"
                 if got["host_reads_error"] is None else f"not counted ({got['host_reads_error']})")),
             f"aten operator calls a step (nested ones included): {got['aten_calls_per_step']:.0f}; top by self host "
             "time (ms a step): "
             + ", ".join(f"{n} {v}" for n, v in list(got["top_ops_ms_per_step"].items())[:5])]
    if got["top_kernels_ms_per_step"]:
        lines.append("top kernels (ms a step): " + ", ".join(f"{n} {v}" for n, v in
                                                              list(got["top_kernels_ms_per_step"].items())[:5]))
    return "\n".join(lines)


def _write(out: Path, res: dict[str, Any], t0: float) -> None:
    res["wall_s"] = time.perf_counter() - t0
    (out / "profile.json").write_text(json.dumps(res, indent=1, default=str))

