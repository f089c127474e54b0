"""How many trials share one GPU, and how many CPUs each gets (docs/gpu.md, "Packing").

One ResNet-12 trial at batch 64 leaves most of a large GPU idle: four trials on one GPU together trained
~3.4x the images per second of one (docs/gpu.md, "Measured"). So a study on a GPU cluster measures one
trial's peak GPU memory with a probe (`probe_memory`: the trial's own base-session code for a few steps,
on one GPU, through Ray) and `decide` packs as many trials per GPU as fit in a share of its memory, capped,
with the machine's CPUs split between them. `--gpus-per-trial` / `--cpus-per-trial` override it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["GiB", "MEMORY_SHARE", "MAX_PER_GPU", "GPU_FRACTION_DIGITS", "Packing", "decide", "probe_config",
           "probe_memory", "probe_key", "plan"]

GiB = 1024**3

MEMORY_SHARE = 0.8
"""Share of a GPU's memory the packed trials may plan to use together: the rest absorbs what one probe
does not see (cuDNN workspaces chosen under other free memory, allocator fragmentation across processes)."""
MAX_PER_GPU = 8
"""At most this many trials per GPU: beyond a few, trials mostly take turns on the GPU's compute (four
trials gave 3.4x one, docs/gpu.md) while each still holds its CUDA context and resident data."""
GPU_FRACTION_DIGITS = 4
"""Ray accounts fractional GPUs to 1e-4; 1/k is rounded down there so that k trials fit on one GPU."""


@dataclass(frozen=True)
class Packing:
    trials_per_gpu: int
    gpus_per_trial: float
    cpus_per_trial: float
    reason: str
    """One line: what was measured and what bounds the choice."""

    def line(self) -> str:
        return (f"packing: {self.trials_per_gpu} trial{'s' if self.trials_per_gpu != 1 else ''} per GPU "
                f"({self.reason}); override with --gpus-per-trial/--cpus-per-trial")


def decide(*, gpu_total_bytes: float, trial_bytes: float | None, cluster_cpus: float, cluster_gpus: float,
           trials: int, cpus_per_trial: float | None = None, memory_share: float = MEMORY_SHARE,
           max_per_gpu: int = MAX_PER_GPU, probe_error: str | None = None) -> Packing:
    """Trials per GPU and CPUs per trial.

    trial_bytes: one trial's GPU memory (its peak reserved by PyTorch plus its CUDA context, from
    `probe_memory`), None when the probe failed (then one trial per GPU: nothing is known to fit).
    cpus_per_trial: given by the user (kept) or None (the CPUs split evenly, at least 1 per trial).
    """
    if gpu_total_bytes <= 0 or cluster_gpus < 1:
        raise ValueError(f"packing needs a GPU: got {cluster_gpus:g} GPUs of {gpu_total_bytes / GiB:.1f} GiB")
    if cluster_cpus < 1:
        raise ValueError(f"packing needs at least one CPU, the cluster has {cluster_cpus:g}")
    if trials < 1:
        raise ValueError(f"packing needs at least one trial, got {trials}")
    gpus = int(cluster_gpus)
    if trial_bytes is None:
        k, why = 1, f"the memory probe failed: {probe_error or 'no answer'}"
    else:
        if trial_bytes <= 0:
            raise ValueError(f"trial_bytes must be > 0, got {trial_bytes}")
        by_memory = int(memory_share * gpu_total_bytes // trial_bytes)
        by_trials = math.ceil(trials / gpus)
        by_cpus = int(cluster_cpus // (cpus_per_trial or 1.0) // gpus)
        k = max(1, min(by_memory, max_per_gpu, by_trials, by_cpus))
        bound = min((by_memory, "memory"), (max_per_gpu, "the cap"), (by_trials, "the study's trials"),
                    (by_cpus, "CPUs"), key=lambda t: t[0])[1]
        why = (f"peak {trial_bytes / GiB:.1f} GiB each of {gpu_total_bytes / GiB:.0f} GiB, "
               f"{memory_share:.0%} usable -> {by_memory}; bounded by {bound}")
    cpus = cpus_per_trial if cpus_per_trial is not None else max(1.0, float(int(cluster_cpus // (k * gpus))))
    gpu_share = 1.0 if k == 1 else math.floor(10**GPU_FRACTION_DIGITS / k) / 10**GPU_FRACTION_DIGITS
    return Packing(k, gpu_share, cpus, f"{why}; {cluster_cpus:g} CPUs -> {cpus:g} per trial")


def probe_config(config: dict[str, Any]):
    """The probe's Config: `config` on CUDA for one base epoch on enough images per base class to fill several
    training batches and the prototype pass's full evaluation batches. The pool, and so the copy of it a
    CUDA trial keeps on the GPU (adbs/data/loader.py), stays whole."""
    import dataclasses

    from adbs.config import from_dict

    cfg = from_dict(config)
    per_class = max(4 * cfg.batch_size, cfg.eval_batch_size) // 10 + 1
    if cfg.base_images_per_class is not None:
        per_class = min(per_class, cfg.base_images_per_class)
    return dataclasses.replace(cfg, device="cuda", base_epochs=1, base_images_per_class=per_class).validate()


def _probe(config: dict[str, Any]) -> dict[str, Any]:
    """In a process holding one GPU: one short base session of `config` through adbs.loops.train_base (the
    trial's own model, host, batch sizes, resident data, validation and prototype passes); its memory."""
    import torch

    from adbs.data import build_data
    from adbs.loops import train_base

    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the CUDA context exists from here on
    free0, total = torch.cuda.mem_get_info()
    cfg = probe_config(config)
    torch.cuda.reset_peak_memory_stats()
    train_base(cfg, build_data(cfg))
    torch.cuda.synchronize()
    return {"total": int(total), "context": int(total - free0), "peak_reserved": int(torch.cuda.max_memory_reserved()),
            "peak_allocated": int(torch.cuda.max_memory_allocated()), "device": torch.cuda.get_device_name()}


def probe_memory(config: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    """`_probe` as a Ray task on one GPU (Ray must be up). Returns its figures plus "trial_bytes"
    (peak reserved + the CUDA context and anything else on the GPU at start: conservative)."""
    import ray

    task = ray.remote(num_gpus=1, num_cpus=1, max_retries=0)(_probe)
    out = ray.get(task.remote(config), timeout=timeout_s)
    out["trial_bytes"] = out["peak_reserved"] + out["context"]
    return out


def probe_key(config: dict[str, Any]) -> tuple:
    """What decides a trial's GPU memory: configs equal in these share one probe."""
    return tuple(str(config.get(k)) for k in ("dataset", "backbone", "host", "host_options", "batch_size",
                                               "eval_batch_size", "amp", "data_on_device", "fast_step"))


def plan(configs: list[dict[str, Any]], *, cluster_cpus: float, cluster_gpus: float, trials: int,
         cpus_per_trial: float | None, max_probes: int = 4) -> tuple[Packing, list[dict[str, Any]]]:
    """Probe each distinct kind of trial (up to `max_probes`), then decide for the largest; a failed probe
    gives one trial per GPU with the reason."""
    kinds: dict[tuple, dict[str, Any]] = {}
    for c in configs:
        kinds.setdefault(probe_key(c), c)
    probes = []
    for c in list(kinds.values())[:max_probes]:
        try:
            probes.append(probe_memory(c))
        except Exception as e:  # noqa: BLE001 - any failure: do not pack, say why
            msg = str(e).strip().splitlines()
            return decide(gpu_total_bytes=1.0, trial_bytes=None, cluster_cpus=cluster_cpus,
                          cluster_gpus=cluster_gpus, trials=trials, cpus_per_trial=cpus_per_trial,
                          probe_error=f"{type(e).__name__}: {msg[-1] if msg else ''}"[:200]), probes
    worst = max(probes, key=lambda r: r["trial_bytes"])
    return decide(gpu_total_bytes=worst["total"], trial_bytes=worst["trial_bytes"], cluster_cpus=cluster_cpus,
                  cluster_gpus=cluster_gpus, trials=trials, cpus_per_trial=cpus_per_trial), probes
