"""ALICE's options and presets: what adbs/hosts/alice.py (the method) reads from Config.host_options, each option a
field with its docstring, default (the CPU setting) and checks, and the presets `alice_<preset>`. No torch here: the
config package reads this module for every flag and preset (adbs/hosts/__init__.py), before a trial loads torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adbs.fields import Base, ConfigError, NotBase

if TYPE_CHECKING:  # annotations only: the config package imports this module
    from adbs.config import Config

SPACES = ("backbone", "projector")


@dataclass
class Options:
    """ALICE's options; defaults are the CPU setting, the paper presets (PRESETS below) ALICE's scripts."""

    proj_dim: Base[int] = 512
    """Width of the projector and of the head's input (ALICE: feat_dim 2048; narrower on CPU)."""
    s: Base[float] = 30.0
    """Scale s of the angular head's logits (ALICE: loss_s 30)."""
    angular_margin: Base[float] = 0.4
    """CosFace margin M subtracted from the true class's cosine (ALICE: loss_m 0.4)."""
    views: Base[int] = 2
    """Augmented views per image, the loss averaged over them (ALICE: 2, --data_transform)."""
    mix_times: Base[int] = 1
    """Rounds of class augmentation per batch, each mixing every image with a random partner of another class
    (ALICE: 4 with --data_fusion, off on CUB200; 1 on CPU, where each round adds a batch's worth of images)."""
    mix_beta: Base[float] = 20.0
    """Mixing weights lambda ~ Beta(mix_beta, mix_beta), set to 0.5 outside [0.4, 0.6] (ALICE: 20)."""
    crop_scale: Base[tuple[float, ...]] = (0.2, 1.0)
    """Area range of the random resized crops of the views (ALICE: 0.2-1.0)."""
    pair_boundaries: Base[bool] = False
    """Learned m for the mixed-pair and reserved rows too, IC over every head row (True); or m only for the
    real base classes, the other rows' logits at m = 1 and outside IC (False: the classes IC protects are the
    ones the sessions keep, and IC over ALICE's 1950 CIFAR rows costs more than the rest of a CPU step).
    A choice: ALICE has no boundaries."""
    session_scale: NotBase[float | None] = None
    """Logit scale of the sessions' classifier, ADBS's T * |m| * cos over class means (it sets the boundary
    fine-tuning's CE; predictions do not depend on it); None = Config.temperature (ADBS's T = 16), as the
    released ADBS sessions. A choice: ALICE's nearest-class-mean rule has no scale; s = 30 is its head's."""
    space: Base[str] = "backbone"
    """Features the sessions classify and validation uses (class means, with the base m carried over):
    backbone (ALICE's incremental NCM, main_inc_ncm.py) or projector (the head's space, where the base m
    were learned; ALICE's base-session validation uses it). A choice the public code does not make for ADBS."""

    def check(self, cfg: Config) -> None:
        if self.space not in SPACES:
            raise ConfigError(f"unknown alice.space {self.space!r}; valid choices: {', '.join(SPACES)}")
        for name in ("proj_dim", "s", "views", "mix_beta"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"alice.{name} must be > 0, got {getattr(self, name)}")
        if self.session_scale is not None and not self.session_scale > 0:
            raise ConfigError(f"alice.session_scale must be > 0 or None (= s), got {self.session_scale}")
        if self.angular_margin < 0 or self.mix_times < 0:
            raise ConfigError("alice.angular_margin and alice.mix_times must be >= 0")
        if len(self.crop_scale) != 2 or not 0 < self.crop_scale[0] <= self.crop_scale[1] <= 1:
            raise ConfigError(f"alice.crop_scale must be two area fractions 0 < lo <= hi <= 1, got {self.crop_scale}")


# Presets: `alice_<preset>` = preset <preset> (adbs/config/presets.py) with host alice and these values; the paper ones
# follow ALICE's public code for the dataset (docs/hosts.md, which also says where the ADBS paper departs from it).
PRESETS: dict[str, dict[str, Any]] = {
    # ALICE's own lr (0.01): at the baseline's 0.1 its CosFace head barely trains in 8 epochs (NCM validation
    # accuracy 6% against 35% after 4 epochs at 0.01, 40 images per class).
    "cpu": {"base_lr": 0.01},
    # CanPeng123/FSCIL_ALICE run_base_CIFAR100.sh: CIFAR ResNet-18, lr 0.01 (Nesterov), wd 5e-4, milestones
    # 60/70 x0.1, 100 epochs, batch 128, feat_dim 2048, cosface s 30 m 0.4, two views, data fusion.
    "cifar100": {"backbone": "resnet18_cifar", "base_lr": 0.01, "schedule": "milestones", "milestones": (60, 70),
                 "batch_size": 128, "alice.proj_dim": 2048, "alice.mix_times": 4},
    # run_base_miniImageNet.sh: as CIFAR100 with 200 epochs and batch 64.
    "mini_imagenet": {"backbone": "resnet18_cifar", "base_epochs": 200, "base_lr": 0.01, "milestones": (60, 70),
                      "alice.proj_dim": 2048, "alice.mix_times": 4},
    # run_base_CUB200.sh: ImageNet ResNet-18, lr 0.001, milestones 60/70, 100 epochs, batch 512, no fusion.
    "cub200": {"base_epochs": 100, "base_lr": 0.001, "milestones": (60, 70), "batch_size": 512,
               "alice.proj_dim": 2048, "alice.mix_times": 0},
}
