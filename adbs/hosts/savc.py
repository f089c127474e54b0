"""SAVC: Learning with Fantasy (Song et al., CVPR 2023), with ADBS on its joint classifier.

Public code: zysong0113/SAVC (models/savc/Network.py, helper.py, fscil_trainer.py, losses.py,
augmentations/fantasy.py, augmentations/constrained_cropping.py); facts and the open choices in
docs/hosts.md, "SAVC".
Its options (a docstring each, the checks) and presets: adbs/hosts/savc_options.py. Read top to bottom:

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

import torch
import torch.nn.functional as F

from adbs.data import augment
from adbs.fields import ConfigError
from adbs.hosts import register_host
from adbs.hosts.interface import Head, Host, Step, copy_average, joint_labels
from adbs.hosts.savc_options import Options


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


@register_host
class SAVC(Host):
    name = "savc"
    opt: Options  # Host.__init__ makes it from cfg.host_options (adbs/hosts/savc_options.py)
    augmented_batches = False  # the host makes its classification view and its crops itself

    @classmethod
    def check_dataset(cls, options: Options, spec) -> None:
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
