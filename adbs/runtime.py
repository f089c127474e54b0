"""What a trial's numbers depend on besides its Config values: torch's CPU threads, the device, the precision.

One rule for the CPU threads, used by every entry point (`python -m adbs.run`, a study's trial, a library
call of adbs.trial.run_trial), because the number of threads changes CPU results (oneDNN splits reductions
over threads, so the float rounding differs): `Config.threads` when set, else 1 on CPU. A study writes its
`--cpus-per-trial` into each trial's `threads` (adbs_lab/study.py), so a trial's logged config holds the
threads it ran with and `python -m adbs.run` with that config gives the same numbers. On CUDA an unset
`threads` leaves torch's default: CPU threads feed the GPU there (loader workers), and GPU numbers are not
bit-reproducible anyway (cuDNN picks algorithms by timing).

`settings` lists everything of this kind that changes the numbers of a base session; the base-session
cache key holds it (adbs/cache.py: base_key), so a session trained under other settings is never reused.
"""

from __future__ import annotations

from typing import Any

import torch

from adbs.config import Config, ConfigError

CUDA_TF32 = True
"""CUDA runs use TF32 for matmul and cuDNN convolutions (adbs/loops.py: Runtime; docs/gpu.md, "Measured")."""


def torch_threads(cfg: Config, device_kind: str) -> int | None:
    """The torch CPU threads a trial runs with: Config.threads, else 1 on CPU; None = torch's default (CUDA)."""
    if cfg.threads:
        return int(cfg.threads)
    return 1 if device_kind == "cpu" else None


def apply_threads(cfg: Config, device_kind: str) -> int:
    """Set torch's CPU threads by the rule above; returns the number in effect."""
    n = torch_threads(cfg, device_kind)
    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def check_device(cfg: Config) -> None:
    """device='cuda' on a machine where torch sees no GPU: a ConfigError before any compute."""
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but torch sees no CUDA GPU on this machine; use device=auto (CUDA when "
                          "there is one, else CPU) or device=cpu, or run on a machine with a GPU")


def device_kind(cfg: Config) -> str:
    """'cuda' or 'cpu': what device='auto'/'cpu'/'cuda' resolves to here (check_device first for 'cuda')."""
    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.device


def settings(cfg: Config, kind: str) -> dict[str, Any]:
    """The runtime settings that change a trial's numbers on a device of `kind` (part of the cache key)."""
    out: dict[str, Any] = {"device_kind": kind, "torch": torch.__version__}
    if kind == "cpu":
        out["threads"] = torch_threads(cfg, kind)
    else:
        out.update(amp=bool(cfg.amp), tf32=CUDA_TF32, cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                   gpu=torch.cuda.get_device_name() if torch.cuda.is_available() else None)
    return out


def describe(cfg: Config, kind: str) -> str:
    """One line for a run's header: device and what of the runtime changes its numbers."""
    if kind == "cpu":
        n = torch_threads(cfg, kind)
        why = f"threads={cfg.threads}" if cfg.threads else "threads unset: 1 on CPU"
        return f"cpu, {n} torch thread{'s' * (n != 1)} ({why}; CPU numbers depend on the threads)"
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda"
    return f"{name}, TF32 {'on' if CUDA_TF32 else 'off'}, amp {'on' if cfg.amp else 'off'}"
