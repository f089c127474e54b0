"""OrCo: Orthogonality and Contrast (Ahmed et al., CVPR 2024), with ADBS on its pseudo-target classifier.

Public code: noorahmedds/OrCo. Phase 1 runs in its copy of solo-learn (solo_learn/main_pretrain.py,
solo/methods/supcon.py, solo/losses/simclr.py, solo/utils/lars.py, scripts/pretrain/{cifar,minet}/base.yaml);
phases 2 and 3 in models/orco/ (fscil_trainer.py, Network.py, helper.py, supcon.py) with utils.py
(normalize, perturb_targets_norm_count, simplex_loss), dataloader/data_utils.py, train.py (defaults) and
scripts/incremental_session/run_{cifar,minet,cub}.sh (the commands). Facts and the open choices:
docs/hosts.md, "OrCo".
Its options (a docstring each, the checks) and presets: adbs/hosts/orco_options.py. Read top to bottom:

1. Parts. The backbone; a projector Linear-ReLU-Linear (OrCo: 640-2048-128); R fixed pseudo-targets, unit
   vectors in projector space (R = the dataset's classes, OrCo's reserve_mode "all"; or the projector's width,
   "full"), each with the class it is assigned to (-1: free); the base classes' targets are the head's rows;
   a linear probe on the detached backbone features (solo-learn's online classifier: it reports a training
   accuracy in phase 1 and trains nothing else).
2. Phase 1, pretraining (solo-learn's SupCon method; skipped with pretrain_epochs=0, as OrCo on CUB200 from
   an ImageNet backbone): backbone and projector under LARS with a warm-up cosine schedule; V views of each
   image; loss (1 - w) L_sup + w L_simclr, w = 0.1, both solo-learn's contrastive form at temperature 0.2.
3. Phase 2, base alignment. At its start the targets are spread (gradient steps on the mean log-sum-exp of
   their pairwise cosines) and the base classes' mean projections are assigned to targets by the Hungarian
   algorithm. Then the projector (with align_backbone, the backbone too) trains on two views of each image:
   L = SupCon(features and perturbed free targets) + orthogonality term + CE on the cosines to the targets.
   The best epoch is picked on validation accuracy (OrCo picks its projector on the test set).
4. Rows of a class: its target, never its mean.
5. Session step, phase 3, in every incremental session (the public code's loop is `range(1, 2)`: one
   session): the projector is set back to the base alignment's, the new classes' mean projections take free
   targets by the Hungarian algorithm, and the projector trains on the session's shots, the earlier sessions'
   shots and `exemplars` images of each base class: SupCon with perturbed targets + orthogonality term on the
   new classes + CE on the cosines, weighted separately for novel and base images.
6. Prediction: the target with the largest logit.

Views of phases 1-3: OrCo's own augmentations with `views=orco` (the paper presets) or the dataset's train
transform with `views=dataset` (the CPU setting: the embedded benchmark's classes do not survive OrCo's crops
and colour jitter; the option's docstring has the measurement).

Where ADBS enters (docs/hosts.md, choices): m multiplies the logits against the targets (the base alignment's
CE, evaluation and the boundary fine-tuning), IC runs over the base targets, and every session ends with the
trainer's fine-tuning of the new m on the shots' projections, at the scale `session_scale`. The projector's
training inside a session sees m = 1 (the seam's session step gets no boundaries; OrCo's loss as published).
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from adbs.data import augment, make_loader
from adbs.fields import ConfigError
from adbs.hosts import register_host
from adbs.hosts.interface import Head, Host, Phase, Step, copy_means
from adbs.hosts.orco_options import Options

if TYPE_CHECKING:  # annotations only: the config package imports the registry and options of adbs/hosts/ (adbs/fields.py)
    from adbs.config import Config


# -- schedules: a linear warm-up, then a cosine (scheduler/lr_scheduler.py: LinearWarmupCosineAnnealingLR) ----
def warmup_cosine(epoch: int, epochs: int, warmup: int, base: float, start: float, eta_min: float) -> float:
    """The lr of epoch `epoch` (0-based) in the closed form of OrCo's (and solo-learn's) warm-up cosine."""
    if epoch < warmup:
        return start + epoch * (base - start) / max(warmup - 1, 1)
    return eta_min + 0.5 * (base - eta_min) * (1 + math.cos(math.pi * (epoch - warmup) / max(epochs - warmup, 1)))


def _warmup_cosine_factor(epoch: int, epochs: int, warmup: int, base: float, start: float, eta_min: float) -> float:
    return warmup_cosine(epoch, epochs, warmup, base, start, eta_min) / base


def warmup_cosine_scheduler(opt: torch.optim.Optimizer, epochs: int, warmup: int, start: float, eta_min: float):
    """LambdaLR stepping warmup_cosine per epoch, for every group from its own lr."""
    return torch.optim.lr_scheduler.LambdaLR(opt, [
        partial(_warmup_cosine_factor, epochs=epochs, warmup=warmup, base=g["lr"], start=start, eta_min=eta_min)
        for g in opt.param_groups])


class LARS(torch.optim.Optimizer):
    """SGD with LARS scaling as solo-learn's (solo/utils/lars.py, clip_lr and exclude_bias_n_norm on): a weight
    matrix's step is lr * min(eta * |p| / (|g| + wd |p|) / lr, 1) * (g + wd p), biases and norm parameters
    (1-d) take the plain step without weight decay, then momentum."""

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0, eta: float = 0.02,
                 eps: float = 1e-8):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "eta": eta, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            wd, lr = group["weight_decay"], group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                d_p = p.grad
                if p.ndim != 1:
                    p_norm, g_norm = torch.norm(p), torch.norm(d_p)
                    if p_norm != 0 and g_norm != 0:
                        scale = group["eta"] * p_norm / (g_norm + p_norm * wd + group["eps"])
                        scale = torch.clamp(scale / lr, max=1.0)
                        d_p = d_p.add(p, alpha=wd) * scale
                if group["momentum"]:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = d_p.detach().clone()
                    else:
                        state["momentum_buffer"].mul_(group["momentum"]).add_(d_p)
                    d_p = state["momentum_buffer"]
                p.add_(d_p, alpha=-lr)


# -- losses ---------------------------------------------------------------------------------------------------
def solo_contrastive_loss(z: torch.Tensor, ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """solo-learn's simclr_loss_func: -mean_i log( sum_{p ~ i} e^{s_ip} / sum_{j != i} e^{s_ij} ), s = z.z / t.

    `z` (N, d) normalised, `ids` (N,): the positives of row i are the other rows with its id (its class: the
    supervised term; its image: SimCLR)."""
    s = z @ z.t() / temperature
    self_ = torch.eye(len(z), dtype=torch.bool, device=z.device)
    positive = (ids[:, None] == ids[None, :]) & ~self_
    log_pos = torch.logsumexp(s.masked_fill(~positive, -math.inf), 1)
    log_all = torch.logsumexp(s.masked_fill(self_, -math.inf), 1)
    return (log_all - log_pos).mean()


def supcon_loss(view1: torch.Tensor, view2: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """The supervised contrastive loss of models/orco/supcon.py (SupConLoss, contrast_mode all, base temperature
    = temperature): over the 2n anchors [view1; view2], -mean over positives p of log(e^{s_ip} / sum_{j != i}
    e^{s_ij}), averaged over anchors with a positive; s = a.c / t of normalised rows."""
    feats = torch.cat([view1, view2])
    y = labels.repeat(2)
    s = feats @ feats.t() / temperature
    self_ = torch.eye(len(feats), dtype=torch.bool, device=feats.device)
    positive = (y[:, None] == y[None, :]) & ~self_
    log_prob = s - torch.logsumexp(s.masked_fill(self_, -math.inf), 1, keepdim=True)
    count = positive.sum(1)
    mean_pos = (log_prob * positive).sum(1)[count > 0] / count[count > 0]
    return -mean_pos.mean()


def orthogonality_loss(feats: torch.Tensor, labels: torch.Tensor, assigned: torch.Tensor,
                       assigned_labels: torch.Tensor, free: torch.Tensor) -> torch.Tensor:
    """OrCo's orthogonality term (utils.py: simplex_loss): the normalised batch mean of each class in `labels`,
    the assigned targets of the classes not in the batch and the free targets, stacked as K unit vectors v;
    loss = (1/K) sum_i log sum_j e^{v_i . v_j} (diagonal included)."""
    classes = torch.unique(labels)
    means = torch.stack([feats[labels == c].mean(0) for c in classes]) if len(classes) else feats[:0]
    absent = ~torch.isin(assigned_labels.to(labels.device), classes)
    v = F.normalize(torch.cat([F.normalize(means, dim=1), assigned[absent], free]), dim=1)
    return torch.logsumexp(v @ v.t(), 1).sum() / len(v)


def split_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, n_base: int, novel_weight: float,
                        base_weight: float) -> torch.Tensor:
    """The session CE (models/orco/Network.py: pull_loss): novel_weight * CE over the novel images + base_weight
    * CE over the base images, each a mean over its own images (0 without any)."""
    loss = logits.new_zeros(())
    for keep, weight in ((labels >= n_base, novel_weight), (labels < n_base, base_weight)):
        if keep.any():
            loss = loss + weight * F.cross_entropy(logits[keep], labels[keep])
    return loss


# -- pseudo-targets ---------------------------------------------------------------------------------------------
def spread_targets(count: int, dim: int, steps: int, g: torch.Generator, accumulate: bool = True) -> torch.Tensor:
    """`count` unit vectors spread over the sphere by `steps` SGD steps (lr 1) on (1/R) sum_i log sum_j
    e^{cos(t_i, t_j)}, renormalised after each (Network.py: find_reseverve_vectors_all; `accumulate` as its
    loop, which never zeroes the gradient)."""
    points = torch.nn.Parameter(F.normalize(torch.randn(count, dim, generator=g), dim=1))
    opt = torch.optim.SGD([points], lr=1.0)
    for _ in range(steps):
        unit = F.normalize(points, dim=1)
        loss = torch.logsumexp(unit @ unit.t(), 1).sum() / count
        if not accumulate:
            opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            points.copy_(F.normalize(points, dim=1))
    return points.detach()


def assign_targets(means: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Index of the target each class mean takes: the assignment of largest total cosine (Network.py:
    assign_base_classifier / assign_novel_classifier, scipy's linear_sum_assignment with maximize=True)."""
    from scipy.optimize import linear_sum_assignment

    cost = (F.normalize(means.double(), dim=1) @ F.normalize(targets.double(), dim=1).t()).cpu().numpy()
    rows, cols = linear_sum_assignment(cost, maximize=True)
    return torch.as_tensor(cols[np.argsort(rows)], dtype=torch.long)


def perturbed_targets(targets: torch.Tensor, labels: torch.Tensor, count: int, epsilon: float, offset: float,
                      g: torch.Generator) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Two views of `count` targets drawn without repeats while there are enough (utils.py:
    perturb_targets_norm_count): normalise(t + epsilon * (U[0, 1) - offset)), with their labels."""
    ix = torch.randperm(len(targets), generator=g)
    if len(ix) < count:
        ix = ix.repeat(math.ceil(count / len(ix)))[:count]
        ix = ix[torch.randperm(count, generator=g)]
    else:
        ix = ix[:count]
    ix = ix.to(targets.device)
    views = [F.normalize(targets[ix] + ((torch.rand(count, targets.shape[1], generator=g) - offset) * epsilon)
                         .to(targets.device), dim=1) for _ in range(2)]
    return views, labels[ix]


# -- views ------------------------------------------------------------------------------------------------------
def _to01(x, mean, std):
    return x * torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1) + \
        torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)


def _from01(x, mean, std):
    return (x - torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)) / \
        torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)


def cutout(x: torch.Tensor, length: int, g: torch.Generator, mean, std) -> torch.Tensor:
    """Cutout(n_holes=1, length) per image (dataloader/autoaugment.py): a black length x length square, clipped
    to the image, around a uniformly drawn centre."""
    b, _, h, w = x.shape
    cy, cx = torch.randint(0, h, (b,), generator=g), torch.randint(0, w, (b,), generator=g)
    ys, xs = torch.arange(h).view(1, h, 1), torch.arange(w).view(1, 1, w)
    hole = ((ys >= (cy - length // 2).view(b, 1, 1)) & (ys < (cy + length // 2).view(b, 1, 1))
            & (xs >= (cx - length // 2).view(b, 1, 1)) & (xs < (cx + length // 2).view(b, 1, 1)))
    black = _from01(torch.zeros(1, x.shape[1], 1, 1, dtype=x.dtype, device=x.device), mean, std)
    return torch.where(hole.unsqueeze(1).to(x.device), black, x)


def cifar_autoaugment(x: torch.Tensor, g: torch.Generator, mean, std) -> torch.Tensor:
    """AutoAugment's CIFAR10 policy per image (OrCo: dataloader/autoaugment.py CIFAR10Policy; here torchvision's
    AutoAugmentPolicy.CIFAR10, the same sub-policies), on 8-bit images as PIL does, each image's draws from a
    seed taken from `g`."""
    from torchvision.transforms import v2

    policy = v2.AutoAugment(v2.AutoAugmentPolicy.CIFAR10)
    u8 = (_to01(x.float(), mean, std).clamp(0, 1) * 255).round().to(torch.uint8).cpu()
    seeds = torch.randint(0, 2**62, (len(x),), generator=g).tolist()
    out = []
    for img, seed in zip(u8, seeds):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            out.append(policy(img))
    return _from01(torch.stack(out).float().div(255), mean, std).to(x.device, x.dtype)


class OrCoModel(torch.nn.Module):
    def __init__(self, backbone: torch.nn.Module, hidden: int, dim: int, reserve: int, n_base: int,
                 device: torch.device):
        super().__init__()
        d = backbone.out_dim

        def projector():
            return torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, dim))

        self.backbone = backbone
        self.projector = projector().to(device)
        # The projector the base alignment ends with: every session starts from it (Network.py: set_projector,
        # reset_projector); filled from the base session.
        self.base_projector = projector().to(device).requires_grad_(False)
        self.probe = torch.nn.Linear(d, n_base).to(device)  # solo-learn's online classifier (phase 1 only)
        self.register_buffer("targets", torch.zeros(reserve, dim, device=device))
        self.register_buffer("owner", torch.full((reserve,), -1, dtype=torch.long, device=device))
        """The class each target is assigned to; -1: free."""
        self.register_buffer("head", torch.zeros(n_base, dim, device=device))
        """The base classes' targets in class order: the rows the trainer's head (and ADBS's m) is on."""

    def targets_of(self, classes) -> torch.Tensor:
        where = {int(c): i for i, c in enumerate(self.owner.tolist()) if c >= 0}
        return self.targets[torch.as_tensor([where[int(c)] for c in classes], device=self.targets.device)]


def reserved_targets(options: Options, num_classes: int) -> int:
    """How many pseudo-targets OrCo fixes: one per class (reserve all) or one per projector dimension (full)."""
    return num_classes if options.reserve == "all" else options.proj_dim


@register_host
class OrCo(Host):
    name = "orco"
    opt: Options  # Host.__init__ makes it from cfg.host_options (adbs/hosts/orco_options.py)
    augmented_batches = False  # the host makes its views itself

    @classmethod
    def check_dataset(cls, options: Options, spec) -> None:
        """Enough targets for the dataset's classes, and a train transform the dataset views can be made with."""
        reserve = reserved_targets(options, spec.num_classes)
        if reserve < spec.num_classes:
            raise ConfigError(f"orco.reserve=full gives {reserve} targets (one per orco.proj_dim) for the "
                              f"{spec.num_classes} classes of dataset {spec.name}, which need one each; raise "
                              f"orco.proj_dim to at least {spec.num_classes} or use orco.reserve=all")
        bad = augment.unbatched_parts(spec.train_transform) if options.views == "dataset" else []
        if bad:
            raise ConfigError(f"orco.views=dataset makes OrCo's views with the train transform of dataset "
                              f"{spec.name}, {spec.train_transform!r}, on whole batches, which has no {', '.join(bad)} "
                              f"(parts it can apply: {', '.join(augment.BATCHED)}); use another orco.views")

    def __init__(self, cfg: Config, data, rt):
        super().__init__(cfg, data, rt)
        self.check_dataset(self.opt, data.spec)
        self.reserve = reserved_targets(self.opt, data.spec.num_classes)
        self.model: OrCoModel | None = None

    @property
    def scale(self) -> float:
        return self.opt.ce_scale

    @property
    def session_scale(self) -> float:
        return self.cfg.temperature if self.opt.session_scale is None else self.opt.session_scale

    # -- 1. parts ---------------------------------------------------------------------------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        o = self.opt
        self.model = OrCoModel(backbone, o.proj_hidden, o.proj_dim, self.reserve, self.n_base, self.rt.device)
        return self.model

    def phases(self) -> list[Phase]:
        o = self.opt
        pretrain = Phase("pretrain", o.pretrain_epochs, self.pretrain_step, trainable=self._pretrain_parameters,
                         optimizer=self._pretrain_optimizer, select=False, batch_size=o.pretrain_batch_size)
        align = Phase("align", self.cfg.base_epochs, self.base_step, trainable=self._align_parameters,
                      optimizer=self._align_optimizer, start=self.fix_targets)
        return [pretrain, align] if o.pretrain_epochs else [align]

    # -- views (dataloader/data_utils.py: get_supcon_dataloader, get_supcon_joint_dataloader) -----------------
    def _view(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """Phases 2 and 3: random resized crop, flip, then colour jitter (0.4, 0.4, 0.4, 0.1; p 0.8) and grey
        (p 0.2), or with `autoaugment` AutoAugment, grey and Cutout(16)."""
        mean, std = self.data.spec.mean, self.data.spec.std
        if self.opt.views == "dataset":
            return augment.train_view(x, self.data.spec.train_transform, g, mean, std)
        v = augment.hflip(augment.random_resized_crop(x, x.shape[-1], self.opt.crop_scale, g), g)
        if self.opt.autoaugment:
            v = cifar_autoaugment(v, g, mean, std)
            return cutout(augment.random_grayscale(v, g, mean, std), 16, g, mean, std)
        return augment.random_grayscale(augment.color_jitter(v, g, mean, std), g, mean, std)

    def _pretrain_view(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """Phase 1 (solo-learn's symmetric augmentations): random resized crop, colour jitter (0.8, 0.8, 0.8,
        0.2; p 0.8), grey (p 0.2), flip. Its Gaussian blur and timm AutoAugment are not reproduced."""
        mean, std = self.data.spec.mean, self.data.spec.std
        if self.opt.views == "dataset":
            return augment.train_view(x, self.data.spec.train_transform, g, mean, std)
        v = augment.random_resized_crop(x, x.shape[-1], self.opt.pretrain_crop_scale, g)
        v = augment.color_jitter(v, g, mean, std, brightness=0.8, contrast=0.8, saturation=0.8, hue=0.2)
        return augment.hflip(augment.random_grayscale(v, g, mean, std), g)

    # -- 2. phase 1: supervised contrastive pretraining (solo/methods/supcon.py: training_step) ---------------
    def _pretrain_parameters(self, model) -> list[torch.nn.Parameter]:
        return [*model.backbone.parameters(), *model.projector.parameters(), *model.probe.parameters()]

    def _pretrain_optimizer(self, groups):
        """LARS (momentum 0.9, eta 0.02) at lr * batch / 256 (solo_learn/main_pretrain.py), the probe in its own
        group; the boundaries are left out: phase 1 has no classifier for them to act on."""
        o, model = self.opt, self.model
        scale = (o.pretrain_batch_size or self.cfg.batch_size) / 256
        probe = {id(p) for p in model.probe.parameters()}
        opt = LARS([{"params": [p for p in groups[0]["params"] if id(p) not in probe], "lr": o.pretrain_lr * scale},
                    {"params": list(model.probe.parameters()), "lr": o.probe_lr * scale}],
                   lr=o.pretrain_lr * scale, momentum=0.9, weight_decay=o.pretrain_weight_decay)
        return opt, warmup_cosine_scheduler(opt, o.pretrain_epochs, o.pretrain_warmup_epochs, 0.003, 0.0)

    def pretrain_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        o, b = self.opt, len(y)
        views = torch.cat([self._pretrain_view(x, g) for _ in range(o.pretrain_views)])
        with self.rt.autocast():
            feats = model.backbone(self.rt.images(views))
            z = model.projector(feats)
        z = F.normalize(z.float(), dim=1)
        labels = y.repeat(o.pretrain_views)
        images = torch.arange(b, device=y.device).repeat(o.pretrain_views)
        loss = (1 - o.simclr_weight) * solo_contrastive_loss(z, labels, o.pretrain_temperature) \
            + o.simclr_weight * solo_contrastive_loss(z, images, o.pretrain_temperature)
        probe = model.probe(feats.detach().float())
        return Step(loss + F.cross_entropy(probe, labels), probe.detach(), labels)

    # -- 3. phase 2: base alignment (fscil_trainer.py: train_phase2; Network.py: update_base) ----------------
    @torch.no_grad()
    def fix_targets(self, model, base_features) -> None:
        """Spread the targets, then assign them to the base classes' mean projections (test transform)."""
        g = augment.batch_generator(self.cfg.seed, 0, 0)  # epoch 0: no training batch uses it
        with torch.enable_grad():
            targets = spread_targets(self.reserve, self.opt.proj_dim, self.opt.target_steps, g,
                                     self.opt.target_accumulate)
        features, labels = base_features()
        means = copy_means(features, labels, self.data.sessions[0].classes)
        cols = assign_targets(means, targets)
        model.targets.copy_(targets)
        model.owner.fill_(-1)
        model.owner[cols.to(model.owner.device)] = torch.arange(self.n_base, device=model.owner.device)
        model.head.copy_(model.targets[cols.to(model.targets.device)])

    def _align_parameters(self, model) -> list[torch.nn.Parameter]:
        return [*model.projector.parameters(), *(model.backbone.parameters() if self.opt.align_backbone else [])]

    def _align_optimizer(self, groups):
        """SGD (momentum, dampening 0.9, Network.py: get_optimizer_base) at base_lr and weight_decay, the
        backbone at backbone_lr; schedule=milestones: OrCo's Milestone, cosine: its warm-up cosine. The
        boundaries share it as in the released ADBS code, in the group the trainer gives them (adbs/loops.py:
        BaseADBS.param_groups: lr scaled by boundary_lr_scale)."""
        cfg, o = self.cfg, self.opt
        backbone = {id(p) for p in self.model.backbone.parameters()}
        params = groups[0]["params"]
        out = [{"params": [p for p in params if id(p) not in backbone]}]
        if o.align_backbone:
            out.append({"params": [p for p in params if id(p) in backbone], "lr": o.backbone_lr or cfg.base_lr})
        out.extend(groups[1:])  # the boundaries' group, as the trainer made it
        opt = torch.optim.SGD(out, lr=cfg.base_lr, momentum=cfg.momentum, dampening=0.9,
                              weight_decay=cfg.weight_decay)
        if cfg.schedule == "milestones":
            return opt, torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)
        return opt, warmup_cosine_scheduler(opt, cfg.base_epochs, o.align_warmup_epochs, 3e-5, 1e-5)

    def _free(self, model) -> torch.Tensor:
        return model.targets[model.owner < 0]

    def base_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        o, b = self.opt, len(y)
        model.backbone.eval()  # OrCo's phase 2 runs the model in eval mode (helper.py: get_base_prototypes)
        views = self.rt.images(torch.cat([self._view(x, g), self._view(x, g)]))
        with torch.set_grad_enabled(o.align_backbone), self.rt.autocast():
            feats = model.backbone(views)
        with self.rt.autocast():
            z = model.projector(feats)
        z = F.normalize(z.float(), dim=1)
        f1, f2 = z[:b], z[b:]
        free = self._free(model)
        (t1, t2), tl = perturbed_targets(free, torch.arange(len(free), device=y.device) + self.n_base, b,
                                         o.perturb_base, o.perturb_offset, g)
        loss = o.sup_weight * supcon_loss(torch.cat([f1, t1]), torch.cat([f2, t2]), torch.cat([y, tl]),
                                          o.temperature)
        loss = loss + o.orth_weight * orthogonality_loss(f1, y, head.weights, torch.arange(self.n_base), free)
        logits = head.logits(z)  # s * |m| * cos to the base targets
        y2 = y.repeat(2)
        loss = loss + o.ce_weight * F.cross_entropy(logits, y2)
        return Step(loss, logits.detach(), y2)

    def val_classifier(self, model, head: Head, base_features):
        """The base targets once assigned; before (phase 1), the base class means of the projections."""
        if bool((model.owner >= 0).any()):
            return super().val_classifier(model, head, base_features)
        tf, ty = base_features()
        return copy_means(tf, ty, self.data.sessions[0].classes), head.boundaries[: self.n_base].detach()

    # -- 4. rows of a class: its target; features: the projections ------------------------------------------
    def embed(self, model, x: torch.Tensor) -> torch.Tensor:
        return model.projector(model.backbone(x)).unsqueeze(1)

    def rows(self, features: torch.Tensor, labels: torch.Tensor, classes) -> torch.Tensor:
        assert self.model is not None  # rows are asked for after build made the model
        return self.model.targets_of(classes).clone()

    def session_state(self, model) -> dict[str, torch.Tensor]:
        projector = model.projector.state_dict()
        return {**{f"projector.{k}": v for k, v in projector.items()},
                **{f"base_projector.{k}": v for k, v in projector.items()},
                "targets": model.targets, "owner": model.owner, "head": model.head}

    # -- 5. session step, phase 3 (fscil_trainer.py: train; Network.py: update_targets, update_incremental) --
    def _exemplar_indices(self, session: int) -> np.ndarray:
        """The session's shots, the first `exemplars` shots of every earlier session's classes and the first
        `exemplars` training images of every base class (data_utils.py: get_supcon_joint_dataloader)."""
        k = self.data.shots if self.opt.exemplars is None else self.opt.exemplars
        labels = self.data.train_pool.labels
        keep = [self.data.sessions[session].train]
        for split in self.data.sessions[:session]:
            keep += [split.train[labels[split.train] == c][:k] for c in split.classes]
        return np.concatenate(keep)

    def _images(self, indices: np.ndarray, train: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        loader = make_loader(self.data, self.data.train_pool, indices, train=train, batch_size=max(len(indices), 1),
                             shuffle=False, seed=seed, num_workers=self.rt.num_workers, device=self.rt.data_device)
        (x, y), = list(loader)
        return self.rt.images(x), y.to(self.rt.device)

    def session_step(self, model, session: int) -> bool:
        o, rt, n_base = self.opt, self.rt, self.n_base
        split = self.data.sessions[session]
        seed = self.cfg.seed * 1000 + session
        model.eval()  # "Following CEC" (fscil_trainer.py: train): the backbone's BN keeps its statistics
        model.projector.load_state_dict(model.base_projector.state_dict())

        # Assignment: the new classes' mean projections, one view of the shots under the dataset's train
        # transform (the session's train loader), take free targets.
        x, y = self._images(split.train, train=True, seed=seed + 500)
        with torch.no_grad(), rt.autocast():
            z = model.projector(model.backbone(x))
        free = torch.nonzero(model.owner < 0).flatten()
        cols = assign_targets(copy_means(z.float().unsqueeze(1), y, split.classes), model.targets[free])
        model.owner[free[cols.to(free.device)]] = torch.as_tensor(split.classes, device=model.owner.device)

        # The targets the losses see: the seen classes' (rows, orthogonality); for the perturbed SupCon every
        # target but the base ones, novel classes' first (labelled with their class), then the free ones.
        seen = self.data.classes_seen(session)
        rows = model.targets_of(seen)
        free_targets = self._free(model)
        others = torch.cat([rows[n_base:], free_targets])
        other_labels = torch.arange(len(others), device=rt.device) + n_base
        seen_labels = torch.as_tensor(seen, device=rt.device)

        images, labels = self._images(self._exemplar_indices(session), train=False, seed=seed)
        batch = o.session_batch_size or len(labels)
        params = list(model.projector.parameters())
        for p in params:
            p.requires_grad_(True)
        opt = torch.optim.SGD(params, lr=o.session_lr, momentum=0.9, dampening=0.9,
                              weight_decay=o.session_weight_decay)
        sched = warmup_cosine_scheduler(opt, o.session_epochs, o.session_warmup_epochs, 3e-5, 0.0)
        for epoch in range(o.session_epochs):
            order = torch.randperm(len(labels), generator=augment.batch_generator(seed, epoch, -1)).to(rt.device)
            for b, start in enumerate(range(0, len(labels), batch)):
                g = augment.batch_generator(seed, epoch, b)
                pick = order[start:start + batch]
                xb, yb = images[pick], labels[pick]
                views = rt.images(torch.cat([self._view(xb, g), self._view(xb, g)]))
                with torch.no_grad(), rt.autocast():
                    feats = model.backbone(views)
                with rt.autocast():
                    zb = model.projector(feats)
                zb = F.normalize(zb.float(), dim=1)
                f1, f2 = zb[: len(yb)], zb[len(yb):]
                (t1, t2), tl = perturbed_targets(others, other_labels, len(yb), o.perturb_session, o.perturb_offset, g)
                loss = o.sup_weight * supcon_loss(torch.cat([f1, t1]), torch.cat([f2, t2]), torch.cat([yb, tl]),
                                                  o.temperature)
                new = yb >= n_base
                loss = loss + o.orth_weight * orthogonality_loss(f1[new], yb[new], rows, seen_labels, free_targets)
                logits = o.ce_scale * F.linear(zb, F.normalize(rows, dim=1))
                loss = loss + o.ce_weight * split_cross_entropy(logits, yb.repeat(2), n_base, o.novel_ce_weight,
                                                                o.base_ce_weight)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            sched.step()
        for p in params:
            p.requires_grad_(False)
        model.eval()
        return True

    # -- 6. prediction: the largest logit over the targets (Host.predict) ----------------------------------------
