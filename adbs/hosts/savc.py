"""SAVC: Learning with Fantasy (Song et al., CVPR 2023), with ADBS on its joint classifier.

Public code: zysong0113/SAVC (models/savc/Network.py, helper.py, fscil_trainer.py, losses.py,
augmentations/fantasy.py, augmentations/constrained_cropping.py); facts and the open choices in
docs/hosts.md, "SAVC". Read top to bottom:

1. Parts. The backbone with a cosine classifier of C * M rows, one per (class, fantasy copy); a
   projection head (Linear-ReLU-Linear); a momentum copy of both (the key encoder) and a queue of its
   normalised keys with their joint labels.
2. Views. Every image appears under M fantasy transforms (rotation2: 0 and 180 degrees), class y under
   transform j being the fantasy class y * M + j. The classifier sees the dataset's train view; the
   contrastive branch two global crops (query, key) and optionally small crops that overlap the key,
   each flipped, colour-jittered and sometimes grey.
3. Base loss. CE on the joint labels + global_weight * L_global + small_weight * L_small, each a
   supervised contrastive term over the query, its key and the queued keys of the same joint label.
4. Rows of new classes: the mean feature of the shots under each fantasy copy (M rows per class).
5. Incremental step: none (SAVC's CIFAR setting; its optional backbone fine-tuning `-incft` is off in
   every published command).
6. Prediction: a class's score is the mean over copies j of copy j's logit for row c * M + j.

Where ADBS enters (docs/hosts.md, the most direct reading): one boundary m per joint row (the released
ADBS code sizes its `margin` parameter by num_classes * trans), so the logits are T * |m| * cos over joint rows, IC
runs over the joint rows, and each session's boundary fine-tuning sees the shots under every fantasy
copy with joint labels. Both parts of that are the trainer's (adbs/loops.py).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from adbs.data import augment
from adbs.fields import Base, ConfigError
from adbs.hosts import Head, Host, Step, copy_average, joint_labels, register_host

if TYPE_CHECKING:  # annotations only: the config package imports the hosts (adbs/fields.py says why)
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


# -- views: the fantasy transforms (augmentations/fantasy.py), copy-minor ---------------------------------
def fantasy(x: torch.Tensor, kind: str) -> torch.Tensor:
    """(B, C, H, W) -> (B * M, C, H, W), the M copies of each image next to each other."""
    if kind == "rotation2":
        copies = [x, torch.rot90(x, 2, (2, 3))]
    else:  # rot_color_perm12: every rotation with the channel orders RGB, GBR, BRG
        copies = [r[:, perm] for k in range(4) for r in [torch.rot90(x, k, (2, 3))] for perm in ([0, 1, 2], [1, 2, 0], [2, 0, 1])]
    return torch.stack(copies, 1).flatten(0, 1)


def copies_of(kind: str) -> int:
    return {"rotation2": 2, "rot_color_perm12": 12}[kind]


# -- base loss: the supervised contrastive term with a queue (losses.py: SupContrastive) ------------------
def supcon_queue_loss(q: torch.Tensor, k: torch.Tensor, labels: torch.Tensor, queue: torch.Tensor,
                      queue_labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over queries of the mean over positives p of -log(e^{l_p} / (e^{l_p} + sum_{n not positive} e^{l_n})).

    Logits l = [q.k, q.queue] / temperature of normalised q (n, p), k (n, p), queue (K, p); the positives of
    query i are its key and the queued keys with its label (queue label -1 marks an empty slot).
    """
    logits = torch.cat([(q * k).sum(1, keepdim=True), q @ queue.t()], 1) / temperature
    same = (labels[:, None] == queue_labels[None, :]) & (queue_labels[None, :] >= 0)
    positive = torch.cat([torch.ones_like(same[:, :1]), same], 1)
    negatives = torch.logsumexp(logits.masked_fill(positive, -math.inf), 1, keepdim=True)
    per_positive = F.softplus(negatives - logits)  # log(1 + sum_n e^{l_n - l_p}), stably
    return ((per_positive * positive).sum(1) / positive.sum(1)).mean()


def small_crop_keys(images: int, crops: int, copies: int, pairing: str) -> torch.Tensor:
    """The key (row of the keys, image-major, copy-minor) each small crop is contrasted with; small crops are
    listed (image, crop, copy). `copy`: its own image and copy. `official`: SAVC's view(b, -1, dim) of that
    list into rows of `crops` crops, row r against key r (zysong0113/SAVC models/savc/Network.py: forward)."""
    n = torch.arange(images * crops * copies)
    if pairing == "copy":
        return (n // (crops * copies)) * copies + n % copies
    return n // crops


class SAVCModel(torch.nn.Module):
    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Parameter, proj_dim: int, queue_size: int):
        super().__init__()
        d = backbone.out_dim
        self.backbone = backbone
        self.head = head
        self.projector = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU(), torch.nn.Linear(d, proj_dim))
        self.projector.to(head.device)
        # The key encoder: a copy of backbone and projector, moved only by the momentum update.
        self.key_backbone = copy.deepcopy(backbone)
        self.key_projector = copy.deepcopy(self.projector)
        for p in [*self.key_backbone.parameters(), *self.key_projector.parameters()]:
            p.requires_grad_(False)
        self.register_buffer("queue", F.normalize(torch.randn(queue_size, proj_dim, device=head.device), dim=1))
        self.register_buffer("queue_labels", torch.full((queue_size,), -1, dtype=torch.long, device=head.device))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long, device=head.device))

    @torch.no_grad()
    def momentum_update(self, m: float) -> None:
        for q, k in ((self.backbone, self.key_backbone), (self.projector, self.key_projector)):
            for pq, pk in zip(q.parameters(), k.parameters()):
                pk.mul_(m).add_(pq.detach(), alpha=1.0 - m)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor, labels: torch.Tensor) -> None:
        """Write the keys over the oldest entries (a ring, as Network.py: _dequeue_and_enqueue)."""
        n, size, ptr = len(keys), len(self.queue), int(self.queue_ptr)
        skip = max(n - size, 0)  # more keys than slots: the last `size` of them are the ones kept
        at = (ptr + skip + torch.arange(n - skip, device=keys.device)) % size
        self.queue[at] = keys[skip:]
        self.queue_labels[at] = labels[skip:]
        self.queue_ptr.fill_((ptr + n) % size)


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


@register_host
class SAVC(Host):
    name = "savc"
    Options = Options
    presets = PRESETS
    augmented_batches = False  # the host makes its classification view and its crops itself

    @classmethod
    def check_dataset(cls, options: Options, spec) -> None:  # type: ignore[valid-type]  # the module's Options
        """SAVC's classification view is the dataset's train transform applied to whole batches (base_step)."""
        bad = augment.unbatched_parts(spec.train_transform)
        if bad:
            raise ConfigError(f"host savc makes its classification view with the train transform of dataset "
                              f"{spec.name}, {spec.train_transform!r}, on whole batches, which has no {', '.join(bad)} "
                              f"(parts it can apply: {', '.join(augment.BATCHED)}); change the dataset's "
                              "train_transform or use another host")

    @property
    def copies(self) -> int:  # type: ignore[override]  # Host.copies is a class constant; SAVC's follows its options
        return copies_of(self.opt.fantasy)

    # -- 1. parts --------------------------------------------------------------------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        head = torch.nn.Parameter(torch.empty(self.n_base * self.copies, backbone.out_dim, device=self.rt.device))
        torch.nn.init.kaiming_uniform_(head, a=math.sqrt(5))  # nn.Linear(d, C * M, bias=False), as SAVC's fc
        return SAVCModel(backbone, head, self.opt.proj_dim, self.opt.queue_size)

    # -- 2. views --------------------------------------------------------------------------------------
    def _contrast_view(self, x: torch.Tensor, boxes: torch.Tensor, size: int, g: torch.Generator) -> torch.Tensor:
        """A crop flipped, colour-jittered and sometimes grey (SAVC's secondary transform), then its copies."""
        mean, std = self.data.spec.mean, self.data.spec.std
        v = augment.hflip(augment.resized_crop(x, boxes, size), g)
        v = augment.random_grayscale(augment.color_jitter(v, g, mean, std), g, mean, std)
        return self.rt.images(fantasy(v, self.opt.fantasy))

    # -- 3. base loss ----------------------------------------------------------------------------------
    def base_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        o, spec, M = self.opt, self.data.spec, self.copies
        b, _, h, w = x.shape
        cla = self.rt.images(fantasy(augment.train_view(x, spec.train_transform, g, spec.mean, spec.std), o.fantasy))
        yj = joint_labels(y, M)
        with self.rt.autocast():
            feats = model.backbone(cla)
        logits = head.logits(feats)  # T * |m| * cos over the C * M joint rows
        loss = F.cross_entropy(logits, yj)

        q_boxes = augment.crop_boxes(b, h, w, o.global_scale, g)
        k_boxes = augment.crop_boxes(b, h, w, o.global_scale, g)
        q_img, k_img = self._contrast_view(x, q_boxes, h, g), self._contrast_view(x, k_boxes, h, g)
        with self.rt.autocast():
            q = model.projector(model.backbone(q_img))
        q = F.normalize(q.float(), dim=1)
        with torch.no_grad():
            model.momentum_update(o.key_momentum)
            with self.rt.autocast():
                k = model.key_projector(model.key_backbone(k_img))
            k = F.normalize(k.float(), dim=1)
        # a copy of the queue: it is updated in place below, before the backward pass needs it
        queue, queue_labels = model.queue.clone(), model.queue_labels.clone()
        loss = loss + o.global_weight * supcon_queue_loss(q, k, yj, queue, queue_labels, o.contrast_temperature)
        if o.small_crops:
            views = torch.stack([self._contrast_view(x, augment.crop_boxes(b, h, w, o.small_scale, g,
                                                                           inside=k_boxes if o.constrained else None),
                                                     o.small_crop_size, g).reshape(b, M, x.shape[1], o.small_crop_size,
                                                                                   o.small_crop_size)
                                 for _ in range(o.small_crops)], 1)  # (image, crop, copy, ...)
            with self.rt.autocast():
                qs = model.projector(model.backbone(self.rt.images(views.flatten(0, 2))))
            qs = F.normalize(qs.float(), dim=1)
            key_of = small_crop_keys(b, o.small_crops, M, o.small_pairing).to(qs.device)
            loss = loss + o.small_weight * supcon_queue_loss(qs, k[key_of], yj[key_of], queue, queue_labels,
                                                             o.contrast_temperature)
        model.enqueue(k, yj)
        return Step(loss, copy_average(logits.detach().view(b, M, -1)), y)

    # -- 4. rows of new classes: one class mean per copy (Host.rows) -------------------------------------
    def embed(self, model, x: torch.Tensor) -> torch.Tensor:
        return model.backbone(self.rt.images(fantasy(x, self.opt.fantasy))).view(len(x), self.copies, -1)

    # -- 5. incremental step: none (Host.session_step) ----------------------------------------------------
    # -- 6. prediction: the mean over fantasy copies -----------------------------------------------------
    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return copy_average(logits)
