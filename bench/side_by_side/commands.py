"""What each code runs with: the released code's command line, ours' overrides and command line, --ours-set,
and the settings of ours that differ from the released run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from . import ALL_SESSIONS, ToolError

# Config fields the tool sets from its own options; --ours-set may not touch them.
OURS_RESERVED = {
    "dataset": "always cifar100 (the written benchmark)", "data_root": "the written benchmark",
    "index_list": "the written lists", "seed": "--seeds", "base_epochs": "--epochs", "device": "--device",
    "sessions": "--sessions",
}
# The released run's settings (its README's CIFAR-100 command and train.py defaults), as Config fields of ours:
# any field of ours' resolved config that differs is printed as a difference.
RELEASED_AS_CONFIG: dict[str, Any] = {
    "backbone": "resnet12", "variant": "adb+ic", "alpha": 0.01, "ic_reduction": "mean", "abs_boundary": True,
    "new_boundary_init": "mean", "boundary_weight_decay": True, "finetune_epochs": 10, "finetune_lr": 0.01,
    "finetune_abs_boundary": False, "abs_base_boundary": False, "boundary_lr_scale": 1.0,
    "boundary_warmup_epochs": 0, "base_lr": 0.1, "schedule": "cosine", "batch_size": 64, "momentum": 0.9,
    "weight_decay": 5e-4, "temperature": 16.0, "base_images_per_class": None, "shots": 5,
}


def released_command(python: str, data_root: Path, *, seed: int, epochs: int, device: str) -> list[str]:
    """The released README's CIFAR-100 command with -epochs_base and -seed; one crop of 32 px (the published
    multi-crops are computed and dropped by base_train, models/adbs/helper.py)."""
    cmd = [python, "train.py", "-project", "adbs", "-dataset", "cifar100", "-dataroot", str(data_root),
           "-base_mode", "ft_cos", "-new_mode", "avg_cos", "-lr_base", "0.1", "-lr_new", "0.01", "-decay", "0.0005",
           "-epochs_base", str(epochs), "-schedule", "Cosine", "-gpu", "0", "-margin", "-seed", str(seed),
           "-num_crops", "1", "1", "-size_crops", "32", "32"]
    if device == "cpu":
        cmd += ["-num_workers", "0"]
    return cmd


def parse_ours_set(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE items -> {field: typed value}; unknown keys, bad values and the tool's own fields raise."""
    from adbs.config import ConfigError, coerce

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ToolError(f"--ours-set {item!r}: expected KEY=VALUE with KEY a Config field (python -m adbs.run "
                            "--help lists them), e.g. amp=false")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if key in OURS_RESERVED:
            raise ToolError(f"--ours-set {key}: set by the tool ({OURS_RESERVED[key]}); use that option instead")
        try:
            out[key] = coerce(key, value)
        except ConfigError as e:
            raise ToolError(f"--ours-set {item!r}: {e}") from None
    return out


def ours_overrides(data: dict[str, Any], *, seed: int, epochs: int, device: str, sessions: int,
                   ours_set: dict[str, Any]) -> dict[str, Any]:
    """ours' config as overrides of the cifar100 preset (what ours_command passes on its command line)."""
    o = {"dataset": "cifar100", "data_root": data["data_root"], "index_list": data["index_list"],
         "variant": "adb+ic", "base_epochs": epochs, "seed": seed, "device": device}
    if sessions != ALL_SESSIONS:
        o["sessions"] = sessions
    return {**o, **ours_set}


def ours_command(python: str, overrides: dict[str, Any], out_json: Path) -> list[str]:
    """`python -m adbs.run --preset cifar100` with the overrides as flags, its result JSON to out_json."""
    cmd = [python, "-m", "adbs.run", "--preset", "cifar100", "--out", str(out_json)]
    for k, v in overrides.items():
        flag = "--" + k.replace("_", "-")
        if isinstance(v, (list, tuple)):
            cmd += [flag, *map(str, v)]
        else:
            cmd += [flag, "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)]
    return cmd


def config_differences(config: dict[str, Any], device: str) -> list[str]:
    """Settings of ours' resolved config that differ from the released run, in words."""
    out = []
    if config.get("amp") and device == "cuda":
        out.append("ours trains with bf16 autocast (amp=true); the released code trains in fp32 (--ours-set amp=false)")
    vf = config.get("val_fraction")
    if vf:
        out.append(f"ours trains the base session on {100 * (1 - vf):.0f}% of the base images (val_fraction={vf} held "
                   "out) and keeps the base epoch with the best validation accuracy; the released code trains on all "
                   "of them and keeps the epoch with the best test accuracy (docs/protocols.md)")
    for k, v in RELEASED_AS_CONFIG.items():
        if k in config and config[k] != v and not (isinstance(v, float) and math.isclose(float(config[k] or 0), v)):
            out.append(f"{k}={config[k]!r} (released: {v!r})")
    return out
