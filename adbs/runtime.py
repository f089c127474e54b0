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

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import torch

from adbs.fields import ConfigError

if TYPE_CHECKING:  # annotations only: the hosts import this module, and the config package imports the hosts
    from adbs.config import Config

CUDA_TF32 = True
"""CUDA runs use TF32 for matmul and cuDNN convolutions (Runtime below; docs/gpu.md, "Measured")."""


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
        if cfg.fast_step != "off":  # compiled kernels round differently; off keeps the key CUDA entries had before
            out["fast_step"] = cfg.fast_step
    return out


def describe(cfg: Config, kind: str) -> str:
    """One line for a run's header: device and what of the runtime changes its numbers."""
    if kind == "cpu":
        n = torch_threads(cfg, kind)
        why = f"threads={cfg.threads}" if cfg.threads else "threads unset: 1 on CPU"
        fast = (f"; fast_step={cfg.fast_step} is CUDA only: not applied on CPU, where the step stays eager"
                if cfg.fast_step != "off" else "")
        return f"cpu, {n} torch thread{'s' * (n != 1)} ({why}; CPU numbers depend on the threads){fast}"
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda"
    return f"{name}, TF32 {'on' if CUDA_TF32 else 'off'}, amp {'on' if cfg.amp else 'off'}, fast_step {cfg.fast_step}"


def resolve_device(cfg: Config) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was requested but torch sees no CUDA GPU; use device='auto' or 'cpu'")
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


MAX_DEFAULT_WORKERS = 4


def default_workers(threads: int) -> int:
    """Loader workers for file-based pools from the CPUs this process may use (a study trial sets torch's
    threads to its --cpus-per-trial): one per CPU up to 4, none with a single CPU. More than 4 fed a GPU
    trial more slowly on a 16-CPU machine (docs/gpu.md, "Measured"): they contend with the training
    process for the same cores."""
    return min(threads, MAX_DEFAULT_WORKERS) if threads > 1 else 0


class Runtime:
    """Device placement, precision, channels_last and the data path in one place (the trainer and the hosts use it).

    channels_last on every device: on CPU (oneDNN) it makes the ConvNet's eval pass ~3x and its training
    step ~1.5x faster than NCHW (max-pooling in NCHW alone took a third of the eval time); AMP is GPU only
    and off by default, CPU runs fp32. On CUDA: TF32 for matmul and cuDNN convolutions and cudnn.benchmark
    (the ResNet-12 step measured fastest in TF32 at batch 64, docs/gpu.md, "Measured"), so GPU numbers are
    not bit-reproducible run to run (cuDNN picks algorithms by timing); CPU numbers are, for a config and
    seed. In-memory pools are kept and augmented on the training device (`data_device`, Config.data_on_device).
    """

    def __init__(self, cfg: Config):
        self.device = resolve_device(cfg)
        self.cuda = self.device.type == "cuda"
        self.amp = cfg.amp and self.cuda
        if self.cuda:
            torch.backends.cudnn.benchmark = True
            torch.backends.cuda.matmul.allow_tf32 = CUDA_TF32
            torch.backends.cudnn.allow_tf32 = CUDA_TF32
        apply_threads(cfg, self.device.type)  # the one thread rule (adbs/runtime.py): CPU numbers depend on it
        on_device = cfg.data_on_device if cfg.data_on_device is not None else self.cuda
        self.data_device: torch.device | None = self.device if on_device else None
        self.num_workers = cfg.num_workers if cfg.num_workers is not None else default_workers(torch.get_num_threads())
        self.fast_step = cfg.fast_step if self.cuda else "off"
        """What of Config.fast_step applies here: its value on CUDA; off on CPU (the compiled step is CUDA only)."""
        self.one_transfer = cfg.fast_step != "off"
        """An epoch's figures come back to the host in one transfer (adbs/trainer.py: read), on every device: the
        numbers are the same as one transfer per figure, only the waits for the GPU are fewer."""

    def images(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, non_blocking=True)
        return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x

    def module(self, m: torch.nn.Module) -> torch.nn.Module:
        m = m.to(self.device)
        return m.to(memory_format=torch.channels_last)

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.amp else nullcontext()

    def speed_up(self, module: torch.nn.Module) -> torch.nn.Module:
        """`module` (the base session's backbone) with Config.fast_step applied, in place; unchanged when off or on
        CPU. compile: its forward through torch.compile (inductor's fused kernels, fewer launches), in training
        and evaluation; cuda_graphs: its training forward (and so backward) through torch.compile's
        reduce-overhead mode, which replays the step's kernels as CUDA graphs (one launch instead of hundreds),
        evaluation left eager: a graph's outputs are overwritten by its next replay, and the evaluation passes
        keep every batch's features (adbs/trainer.py: extract_features). The forward is replaced on the instance,
        so state_dict keys, checkpoints and the base-session cache entries stay as they were. Shapes are static
        (dynamic=False): each batch size compiles once (the last, smaller batch of an epoch too)."""
        if self.fast_step == "off":
            return module
        eager = module.forward
        if self.fast_step == "compile":
            fast = torch.compile(eager, dynamic=False)
        else:
            graphed = torch.compile(eager, mode="reduce-overhead", dynamic=False)

            def fast(*args: Any, **kwargs: Any) -> Any:
                return graphed(*args, **kwargs) if module.training else eager(*args, **kwargs)
        module.__dict__["forward"] = fast  # shadows the class's forward for this instance only
        return module

    def step_begin(self) -> None:
        """Before each training step: with cuda_graphs, tell torch a new step begins (the previous step's graph
        outputs may be overwritten from here on; the trainer keeps none of them)."""
        if self.fast_step == "cuda_graphs":
            torch.compiler.cudagraph_mark_step_begin()
