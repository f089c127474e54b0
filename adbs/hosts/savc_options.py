"""SAVC's options and presets: what adbs/hosts/savc.py (the method) reads from Config.host_options, each option a
field with its docstring, default (the CPU setting) and checks, and the presets `savc_<preset>`. No torch here: the
config package reads this module for every flag and preset (adbs/hosts/__init__.py), before a trial loads torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adbs.fields import Base, ConfigError

if TYPE_CHECKING:  # annotations only: the config package imports this module
    from adbs.config import Config

FANTASIES = ("rotation2", "rot_color_perm12")
PAIRINGS = ("copy", "official")


@dataclass
class Options:
    """SAVC's options; defaults are the CPU setting, the paper presets (PRESETS below) SAVC's commands."""

    fantasy: Base[str] = "rotation2"
    """Fantasy transforms: rotation2 (0/180 degrees, M = 2; SAVC on CIFAR100 and CUB200, and the ADBS paper
    everywhere) or rot_color_perm12 (4 rotations x 3 channel orders, M = 12; SAVC's miniImageNet command)."""
    proj_dim: Base[int] = 32
    """Output size of the projection head (SAVC: moco_dim 32 on CIFAR100, 128 otherwise)."""
    queue_size: Base[int] = 1024
    """Keys in the queue (SAVC: moco_k 8192; a CPU batch of 64 x 2 copies fills 1024 in 8 steps)."""
    key_momentum: Base[float] = 0.995
    """Momentum of the key encoder's update (SAVC: moco_m 0.995 on CIFAR100, 0.999 otherwise)."""
    contrast_temperature: Base[float] = 0.07
    """Temperature of the contrastive logits (SAVC: moco_t 0.07)."""
    global_weight: Base[float] = 0.2
    """Weight of the global contrastive term (SAVC's commands: alpha 0.2)."""
    small_weight: Base[float] = 0.8
    """Weight of the small-crop contrastive term (SAVC's commands: beta 0.8); unused without small crops."""
    small_crops: Base[int] = 0
    """Small crops per image (SAVC: 4; 0 leaves the small-crop term out, the CPU setting of docs/hosts.md)."""
    small_crop_size: Base[int] = 18
    """Side of a small crop in pixels (SAVC: 18 on CIFAR100, 50 on miniImageNet, 96 on CUB200)."""
    global_scale: Base[tuple[float, ...]] = (0.9, 1.0)
    """Area range of the global crops (SAVC: 0.9-1.0 on CIFAR100, 0.2-1.0 otherwise)."""
    small_scale: Base[tuple[float, ...]] = (0.2, 0.7)
    """Area range of the small crops (SAVC: 0.2-0.7 on CIFAR100, 0.05-0.14 otherwise)."""
    small_pairing: Base[str] = "copy"
    """Which key a small crop is contrasted with: copy (the key of its image under its own fantasy copy, with
    that copy's joint label) or official (SAVC's helper.py/Network.py reshape, which pairs half of an
    image's small crops with the key and label of the other copy; kept to reproduce it)."""
    constrained: Base[bool] = True
    """Small crops must overlap the key crop by 10% of their area (SAVC: -constrained_cropping)."""

    def check(self, cfg: Config) -> None:
        if self.fantasy not in FANTASIES:
            raise ConfigError(f"unknown savc.fantasy {self.fantasy!r}; valid choices: {', '.join(FANTASIES)}")
        for name in ("proj_dim", "queue_size", "small_crop_size", "contrast_temperature"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"savc.{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= self.key_momentum < 1.0:
            raise ConfigError(f"savc.key_momentum must be in [0, 1), got {self.key_momentum}")
        if self.small_pairing not in PAIRINGS:
            raise ConfigError(f"unknown savc.small_pairing {self.small_pairing!r}; valid choices: {', '.join(PAIRINGS)}")
        if self.small_crops < 0 or self.global_weight < 0 or self.small_weight < 0:
            raise ConfigError("savc.small_crops, savc.global_weight and savc.small_weight must be >= 0")
        for name in ("global_scale", "small_scale"):
            lo_hi = getattr(self, name)
            if len(lo_hi) != 2 or not 0 < lo_hi[0] <= lo_hi[1] <= 1:
                raise ConfigError(f"savc.{name} must be two area fractions 0 < lo <= hi <= 1, got {lo_hi}")


# Presets: `savc_<preset>` = preset <preset> (adbs/config/presets.py) with host savc and these values. The CPU one changes
# the host only (the option defaults are the CPU setting); the paper ones follow SAVC's public code for the dataset
# (docs/hosts.md, which also says where the ADBS paper departs from it).
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {},
    # zysong0113/SAVC README, CIFAR100 command: 600 epochs, lr 0.1 cosine, wd 5e-4, batch 128 (parser
    # default), ResNet-20, moco_dim 32, moco_k 8192, moco_m 0.995, t 0.07, crops 32/18 px at scales
    # 0.9-1.0 / 0.2-0.7, 2 + 4 crops constrained on the key, alpha 0.2, beta 0.8, rotation2.
    "cifar100": {"backbone": "resnet20", "base_epochs": 600, "batch_size": 128, "savc.queue_size": 8192,
                 "savc.small_crops": 4},
    # miniImageNet command: ResNet-18, 120 epochs, lr 0.1, milestones 40/70/100, moco_dim 128, moco_m 0.999,
    # crops 84/50 px at 0.2-1.0 / 0.05-0.14. Fantasy: rotation2, as the ADBS paper (SAVC's own command uses
    # rot_color_perm12: --set savc.fantasy=rot_color_perm12).
    "mini_imagenet": {"backbone": "resnet18", "batch_size": 128, "savc.queue_size": 8192, "savc.proj_dim": 128,
                      "savc.key_momentum": 0.999, "savc.small_crops": 4, "savc.small_crop_size": 50,
                      "savc.global_scale": (0.2, 1.0), "savc.small_scale": (0.05, 0.14)},
    # CUB200 command: ImageNet ResNet-18 (--pretrained FILE), lr 0.002, milestones 60/80/100, 120 epochs,
    # moco_dim 128, moco_m 0.999, crops 224/96 px at 0.2-1.0 / 0.05-0.14.
    "cub200": {"batch_size": 128, "savc.queue_size": 8192, "savc.proj_dim": 128, "savc.key_momentum": 0.999,
               "savc.small_crops": 4, "savc.small_crop_size": 96, "savc.global_scale": (0.2, 1.0),
               "savc.small_scale": (0.05, 0.14)},
}
