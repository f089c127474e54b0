"""ALICE: FSCIL from an open-set perspective (Peng et al., ECCV 2022), with ADBS on its angular head.

Public code: CanPeng123/FSCIL_ALICE (alice/model/model_factory.py, alice/loss/criterion.py,
alice/train/train.py, alice/validation/validation.py, main_base.py, main_inc_ncm.py, run_*.sh); facts
and the open choices in docs/hosts.md, "ALICE". Read top to bottom:

1. Parts. The backbone, a projector Linear-BN-ReLU-Linear-BN (the last BN without affine), and an
   angular-penalty head over the projector's output with rows for the real classes, for every pair of
   base classes (class augmentation) and reserved rows, sized as ALICE sizes it for the dataset.
2. Views. Two views of every image (random resized crop at 0.2-1, flip, colour jitter, greyscale); class
   augmentation mixes images of two different classes, lambda ~ Beta(20, 20) (set to 0.5 outside
   [0.4, 0.6]), into a new class standing for the pair, with the same partners and lambdas in both views.
3. Base loss. The CosFace loss, -log e^{s(cos t_y - M)} / (e^{s(cos t_y - M)} + sum_{j != y} e^{s cos t_j}),
   s = 30, M = 0.4, averaged over the two views.
4. Rows of new classes: class means of backbone features (the projector is dropped after training).
5. Incremental step: none.
6. Prediction: nearest class mean by cosine.

Where ADBS enters (docs/hosts.md, a choice): m scales the head's cosines, s * (|m_c| cos t_c - M [c = y]),
one m per real base class and IC over them, the pair and reserved rows at m = 1 (`pair_boundaries`). The head lives
in projector space while ALICE classifies in backbone space: the learned m of the real base classes are carried to the class
means in the space `space` names (backbone, as ALICE, by default), and the sessions classify them with
ADBS's logits T * |m| * cos, T = Config.temperature as in the released ADBS sessions (`session_scale`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from adbs.boundary import boundary_logits, cosine
from adbs.data import augment
from adbs.fields import Base, ConfigError, NotBase
from adbs.hosts import Head, Host, Step, copy_means, register_host

if TYPE_CHECKING:  # annotations only: the config package imports the hosts (adbs/fields.py says why)
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


def pair_classes(n: int) -> int:
    return n * (n - 1) // 2


def pair_label(a: torch.Tensor, b: torch.Tensor, n: int, first: int) -> torch.Tensor:
    """Row of the mixed class of classes a != b among n classes: `first` + the index of {a, b} in the upper
    triangle, row by row (alice/train/train.py: fusion_aug_generate_label, base session)."""
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    return first + (2 * n - lo - 1) * lo // 2 + (hi - lo) - 1


def mix_classes(views: list[torch.Tensor], y: torch.Tensor, n_classes: int, times: int, beta: float,
                g: torch.Generator) -> tuple[list[torch.Tensor], torch.Tensor]:
    """ALICE's class augmentation: `times` rounds, each pairing every image with a random permutation's image
    and, where their classes differ, appending lam * x_i + (1 - lam) * x_partner to every view with the
    pair's label (classes n_classes, n_classes + 1, ...)."""
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=g)))
    mixed: list[list[torch.Tensor]] = [[] for _ in views]
    labels: list[torch.Tensor] = []
    for _ in range(times):
        perm = torch.randperm(len(y), generator=g).to(y.device)
        keep = y != y[perm]
        lam = torch.as_tensor(rng.beta(beta, beta, size=len(y)), dtype=views[0].dtype, device=y.device)
        lam = torch.where((lam < 0.4) | (lam > 0.6), torch.full_like(lam, 0.5), lam)[keep].view(-1, 1, 1, 1)
        for out, v in zip(mixed, views):
            out.append(lam * v[keep] + (1 - lam) * v[perm][keep])
        labels.append(pair_label(y[keep], y[perm][keep], n_classes, n_classes))
    if not labels:
        return views, y
    return [torch.cat([v, *m]) for v, m in zip(views, mixed)], torch.cat([y, *labels])


def cosface_loss(logits: torch.Tensor, y: torch.Tensor, penalty: float) -> torch.Tensor:
    """CE after lowering the true class's logit by `penalty` (= s * M on s * cos logits: the CosFace loss of
    alice/loss/criterion.py)."""
    return F.cross_entropy(logits - penalty * F.one_hot(y, logits.shape[1]).to(logits.dtype), y)


class AliceModel(torch.nn.Module):
    def __init__(self, backbone: torch.nn.Module, proj_dim: int, rows: int, device: torch.device):
        super().__init__()
        d = backbone.out_dim
        self.backbone = backbone
        # model_factory.py: projection_MLP with num_proj_layers 2 = layer1 + layer3
        self.projector = torch.nn.Sequential(
            torch.nn.Linear(d, proj_dim), torch.nn.BatchNorm1d(proj_dim), torch.nn.ReLU(inplace=True),
            torch.nn.Linear(proj_dim, proj_dim), torch.nn.BatchNorm1d(proj_dim, affine=False),
        ).to(device)
        # The angular head (angular_fc, xavier): rows after the base classes stand for mixed pairs and
        # reserved classes, and enter every softmax.
        self.head = torch.nn.Parameter(torch.empty(rows, proj_dim, device=device))
        torch.nn.init.xavier_uniform_(self.head)


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


@register_host
class ALICE(Host):
    name = "alice"
    Options = Options
    presets = PRESETS
    augmented_batches = False  # the host makes its two views itself

    @property
    def scale(self) -> float:
        return self.opt.s

    @property
    def session_scale(self) -> float:
        return self.cfg.temperature if self.opt.session_scale is None else self.opt.session_scale

    @property
    def ic_rows(self) -> int | None:
        return None if self.opt.pair_boundaries else self.n_base

    @property
    def head_rows(self) -> int:
        """The real classes, the pairs of base classes and, reserved, the pairs of every standard session's
        classes (model_factory.py: total_num_of_cls), without class augmentation the real classes only."""
        spec = self.data.spec
        if not self.opt.mix_times:
            return spec.num_classes
        sessions = spec.novel_classes // spec.default_ways
        return spec.num_classes + pair_classes(self.n_base) + sessions * pair_classes(spec.default_ways)

    # -- 1. parts --------------------------------------------------------------------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        return AliceModel(backbone, self.opt.proj_dim, self.head_rows, self.rt.device)

    # -- 2. views --------------------------------------------------------------------------------------
    def _view(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        mean, std = self.data.spec.mean, self.data.spec.std
        v = augment.hflip(augment.random_resized_crop(x, x.shape[-1], self.opt.crop_scale, g), g)
        return augment.random_grayscale(augment.color_jitter(v, g, mean, std), g, mean, std)

    # -- 3. base loss ----------------------------------------------------------------------------------
    def base_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        o = self.opt
        views = [self._view(x, g) for _ in range(o.views)]
        views, targets = mix_classes(views, y, self.n_base, o.mix_times, o.mix_beta, g)
        loss, first = 0.0, None
        for v in views:
            with self.rt.autocast():
                z = model.projector(model.backbone(self.rt.images(v)))
            if o.pair_boundaries:
                logits = head.logits(z)  # s * |m| * cos over every head row
            else:  # s * |m| * cos over the real base classes; the other rows keep m = 1
                n = self.n_base
                logits = torch.cat([boundary_logits(z.float(), head.weights[:n], head.boundaries[:n], head.scale,
                                                    absolute=head.absolute),
                                    head.scale * cosine(z.float(), head.weights[n:])], 1)
            loss = loss + cosface_loss(logits, targets, o.s * o.angular_margin) / len(views)
            first = logits if first is None else first
        assert first is not None, "ALICE's views (at least one) give the first logits"
        return Step(loss, first[: len(y), : self.n_base].detach(), y)

    def val_classifier(self, model, head: Head, base_features):
        """Nearest class mean, as ALICE validates (validation.py: NCMValidation), with the base m."""
        tf, ty = base_features()
        return copy_means(tf, ty, self.data.sessions[0].classes), head.boundaries[: self.n_base].detach()

    # -- 4. rows of new classes: class means (Host.rows) in the chosen space -----------------------------
    def embed(self, model, x: torch.Tensor) -> torch.Tensor:
        f = model.backbone(x)
        return (model.projector(f) if self.opt.space == "projector" else f).unsqueeze(1)

    def session_state(self, model) -> dict[str, torch.Tensor]:
        if self.opt.space != "projector":
            return {}
        return {f"projector.{k}": v for k, v in model.projector.state_dict().items()}

    # -- 5. incremental step: none; 6. prediction: the nearest class mean (Host.predict) -----------------
