"""OrCo's options and presets: what adbs/hosts/orco.py (the method) reads from Config.host_options, each option a
field with its docstring, default (the CPU setting) and checks, and the presets `orco_<preset>`. No torch here: the
config package reads this module for every flag and preset (adbs/hosts/__init__.py), before a trial loads torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adbs.fields import Base, ConfigError, NotBase
from adbs.hosts import CONFIG_DEFAULT

if TYPE_CHECKING:  # annotations only: the config package imports this module
    from adbs.config import Config

RESERVES = ("all", "full")
VIEWS = ("orco", "dataset")

@dataclass
class Options:
    """OrCo's options; defaults are the CPU setting, the paper presets (PRESETS below) OrCo's commands."""

    # -- parts ----------------------------------------------------------------------------------------------
    proj_hidden: Base[int] = 512
    """Hidden width of the projector Linear-ReLU-Linear (OrCo: 2048; narrower on CPU)."""
    proj_dim: Base[int] = 128
    """Output width of the projector, the space of the targets (OrCo: 128 on CIFAR100 and miniImageNet, 256 on
    CUB200)."""
    reserve: Base[str] = "all"
    """How many pseudo-targets: all (one per class of the dataset, OrCo's default -reserve_mode all) or full (one
    per projector dimension, its CUB200 command)."""
    target_steps: Base[int] = 1000
    """Gradient steps (SGD, lr 1) spreading the targets (OrCo: -epochs_target_gen 1000, 5000 on CUB200)."""
    target_accumulate: Base[bool] = True
    """Spread the targets as OrCo's loop does (Network.py: find_reseverve_vectors_all never zeroes the gradient,
    so each step moves by the sum of all gradients so far); False zeroes it every step (plain descent)."""

    views: Base[str] = "dataset"
    """Augmentation of every view of phases 1-3: orco (solo-learn's in phase 1, OrCo's supcon loader in phases 2
    and 3: crops from 20% of the area, strong colour jitter, grey) or dataset (the dataset's train transform, on
    the embedded benchmark a padded crop and a flip). dataset is the CPU setting: the embedded benchmark's classes
    are compositions of shapes at fixed places in fixed colours, which OrCo's crops and jitter take apart (phase 1
    stayed at chance, 1.9% NCM validation accuracy after 8 epochs; 4.7% after 3 with dataset). The paper presets
    use orco."""

    # -- phase 1: supervised contrastive pretraining (solo-learn) --------------------------------------------
    pretrain_epochs: Base[int] = 4
    """Epochs of phase 1 (OrCo: 300 on CIFAR100, 400 on miniImageNet; 0 on CUB200, where the backbone is
    ImageNet-pretrained: give it with --pretrained and set 0 to start from it)."""
    pretrain_batch_size: Base[int | None] = None
    """Images per phase-1 batch; None = Config.batch_size (solo-learn: 512)."""
    pretrain_lr: Base[float] = 0.8
    """LARS learning rate before solo-learn's linear scaling by batch size / 256 (OrCo: 0.8 on CIFAR100, 0.4 on
    miniImageNet)."""
    probe_lr: Base[float] = 0.1
    """Learning rate of the probe, scaled as pretrain_lr (solo-learn classifier_lr: 0.1 CIFAR100, 0.2 mini)."""
    pretrain_weight_decay: Base[float] = 1e-5
    """LARS weight decay (solo-learn: 1e-5); biases and norm parameters are neither decayed nor LARS-scaled."""
    pretrain_warmup_epochs: Base[int] = 1
    """Linear warm-up epochs from lr 0.003 before the cosine decay to 0 (solo-learn: 10, stepped per batch; here
    per epoch, and 1 on CPU where phase 1 is short)."""
    pretrain_views: Base[int] = 2
    """Views of every image in phase 1 (OrCo: 4 crops on CIFAR100, 2 on miniImageNet)."""
    pretrain_temperature: Base[float] = 0.2
    """Temperature of both phase-1 contrastive terms (OrCo: 0.2)."""
    simclr_weight: Base[float] = 0.1
    """w in (1 - w) L_sup + w L_simclr (OrCo: simclr_weight 0.1 with convex_loss_comb)."""
    pretrain_crop_scale: Base[tuple[float, ...]] = (0.2, 1.0)
    """Area range of phase 1's random resized crops (OrCo: 0.2-1 on CIFAR100, 0.08-1 on miniImageNet)."""

    # -- phase 2: base alignment -------------------------------------------------------------------------------
    align_backbone: Base[bool] = False
    """Train the backbone with the projector in phase 2 (OrCo: -fine_tune_backbone_base, its CUB200 command);
    False trains the projector alone on the frozen backbone (CIFAR100, miniImageNet)."""
    backbone_lr: Base[float | None] = None
    """Phase 2's learning rate of the backbone when it trains; None = base_lr (OrCo: -lr_base_encoder)."""
    align_warmup_epochs: Base[int] = 3
    """With schedule=cosine: warm-up epochs from lr 3e-5 before the cosine decay to 1e-5 (OrCo:
    -warmup_epochs_base 3). schedule=milestones is OrCo's default Milestone schedule."""
    temperature: Base[float] = 0.07
    """Temperature of the supervised contrastive loss of phases 2 and 3 (models/orco/supcon.py: 0.07)."""
    perturb_base: Base[float] = 1e-2
    """Perturbation size of the targets in phase 2's SupCon: target + epsilon * (U[0, 1) - offset), then
    normalised (OrCo: -perturb_epsilon_base, 9e-5 in its CIFAR100 command)."""
    perturb_offset: Base[float] = 0.5
    """Offset of the uniform perturbation (OrCo: -perturb_offset 0.5)."""
    sup_weight: Base[float] = 1.0
    """Weight of the SupCon term in phases 2 and 3 (OrCo: -sup_lam 1)."""
    orth_weight: Base[float] = 1.0
    """Weight of the orthogonality term in phases 2 and 3 (OrCo: -simplex_lam 1)."""
    ce_weight: Base[float] = 1.0
    """Weight of the CE on the cosines to the targets in phases 2 and 3 (OrCo: -cos_lam 1)."""
    ce_scale: Base[float] = 1.0
    """Scale of those CE logits, s * |m| * cos (OrCo: PseudoTargetClassifier.temperature 1, logits = cos / 1)."""
    crop_scale: Base[tuple[float, ...]] = (0.2, 1.0)
    """Area range of the random resized crops of phases 2 and 3 (OrCo: -min_crop_scale 0.2)."""
    autoaugment: Base[bool] = False
    """Views of phases 2 and 3 with AutoAugment's CIFAR10 policy and Cutout(16) instead of colour jitter (OrCo:
    -rand_aug_sup_con, its CIFAR100 command; torchvision's policy per image, drawn from the step's generator;
    slow on CPU)."""

    # -- phase 3: the incremental sessions -------------------------------------------------------------------
    session_epochs: NotBase[int] = 5
    """Epochs of projector training in every incremental session (OrCo: -epochs_joint 100; 5 on CPU, where the
    sessions' training and the new features of every val/test image it makes each session are half a trial)."""
    session_batch_size: NotBase[int] = 64
    """Images per batch of the session training; 0 = all in one batch (OrCo: -batch_size_joint 64, 32 on CUB200)."""
    session_lr: NotBase[float] = 0.1
    """Learning rate of the session training's SGD (OrCo: -lr_new 0.1, 0.05 on CUB200)."""
    session_weight_decay: NotBase[float] = 1e-4
    """Weight decay of the session training (OrCo: -decay_new 1e-4 on CIFAR100 and miniImageNet, 1e-5 CUB200)."""
    session_warmup_epochs: NotBase[int] = 2
    """Warm-up epochs from lr 3e-5 before the session's cosine decay to 0 (OrCo: -warmup_epochs_inc 10 of 100)."""
    perturb_session: NotBase[float] = 1e-2
    """Perturbation size of the targets in the sessions' SupCon (OrCo: -perturb_epsilon_inc, 9e-5 on CIFAR100)."""
    novel_ce_weight: NotBase[float] = 0.5
    """Weight of the novel images' CE in the session training (OrCo: -cos_n_lam 0.5)."""
    base_ce_weight: NotBase[float] = 0.5
    """Weight of the base exemplars' CE in the session training (OrCo: -cos_b_lam, 0 in its CIFAR100 and
    miniImageNet commands, 0.6 on CUB200)."""
    exemplars: NotBase[int | None] = None
    """Training images kept per earlier class for the session training: the first k of every base class's
    training images and of every earlier session's shots; None = `shots` (OrCo: -exemplars_count -1 = shots).
    A protocol difference: FSCIL methods such as the baseline, SAVC and ALICE keep no image after its session;
    0 trains each session on its own shots alone."""
    session_scale: NotBase[float | None] = None
    """Logit scale of the sessions' classifier T * |m| * cos to the targets (the boundary fine-tuning's CE;
    predictions do not depend on it); None = Config.temperature (ADBS's T = 16). A choice: OrCo predicts by
    the largest cosine, and its CE scale (ce_scale 1) would leave the fine-tuning's CE almost flat."""

    def check(self, cfg: Config) -> None:
        if self.views not in VIEWS:
            raise ConfigError(f"unknown orco.views {self.views!r}; valid choices: {', '.join(VIEWS)}")
        if self.reserve not in RESERVES:
            raise ConfigError(f"unknown orco.reserve {self.reserve!r}; valid choices: {', '.join(RESERVES)}")
        for name in ("proj_hidden", "proj_dim", "pretrain_lr", "probe_lr", "pretrain_temperature", "temperature",
                     "ce_scale", "session_lr"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"orco.{name} must be > 0, got {getattr(self, name)}")
        for name in ("target_steps", "pretrain_epochs", "pretrain_warmup_epochs", "align_warmup_epochs",
                     "session_epochs", "session_batch_size", "session_warmup_epochs", "pretrain_weight_decay",
                     "perturb_base", "perturb_session", "sup_weight", "orth_weight", "ce_weight",
                     "novel_ce_weight", "base_ce_weight", "session_weight_decay"):
            if getattr(self, name) < 0:
                raise ConfigError(f"orco.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.simclr_weight <= 1.0:
            raise ConfigError(f"orco.simclr_weight must be in [0, 1], got {self.simclr_weight}")
        if self.pretrain_views < 2:
            raise ConfigError(f"orco.pretrain_views must be >= 2 (each image needs a positive), got {self.pretrain_views}")
        for name in ("pretrain_batch_size", "backbone_lr", "session_scale"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"orco.{name} must be > 0 or None, got {value}")
        if self.exemplars is not None and self.exemplars < 0:
            raise ConfigError(f"orco.exemplars must be >= 0 or None (= shots), got {self.exemplars}")
        for name in ("pretrain_crop_scale", "crop_scale"):
            lo_hi = getattr(self, name)
            if len(lo_hi) != 2 or not 0 < lo_hi[0] <= lo_hi[1] <= 1:
                raise ConfigError(f"orco.{name} must be two area fractions 0 < lo <= hi <= 1, got {lo_hi}")


# Presets: `orco_<preset>` = preset <preset> (adbs/config/presets.py) with host orco and these values (CONFIG_DEFAULT:
# Config's default, not the plain preset's value). Phase 2, the base alignment, is `base_epochs` (its selecting
# phase); phase 1 and the sessions' projector training are options. The ADBS paper's supplement trains the
# projector alone 10 epochs (phase 2) and 100 per session (phase 3) on CIFAR100 and miniImageNet, as OrCo's
# commands do, backbone and projector 200 epochs on CUB200 (phase 2; OrCo's command: 100), and fine-tunes the
# boundaries 10 epochs at the end of every session (docs/hosts.md, "OrCo").
PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {},
    # noorahmedds/OrCo scripts/incremental_session/run_cifar.sh: -epochs_base 10 -lr_base 0.25 -decay 5e-4
    # (base_schedule Milestone 60/80: constant over 10 epochs), batch_size_sup_con 128, -perturb_epsilon_base/inc
    # 9e-5, -rand_aug_sup_con, -epochs_joint 100 -batch_size_joint 64 -lr_new 0.1 -decay_new 1e-4 -cos_b_lam 0;
    # phase 1 from solo_learn/scripts/pretrain/cifar/base.yaml: resnet12_nc (640-d), projector 2048-128, LARS lr
    # 0.8 at batch 512, warm-up 10, 300 epochs, 4 crops at 0.2-1.
    "cifar100": {"orco.views": "orco", "base_epochs": 10, "base_lr": 0.25, "schedule": "milestones",
                 "milestones": (60, 80), "batch_size": 128, "orco.proj_hidden": 2048, "orco.pretrain_epochs": 300,
                 "orco.pretrain_batch_size": 512, "orco.pretrain_warmup_epochs": 10, "orco.pretrain_views": 4,
                 "orco.perturb_base": 9e-5, "orco.perturb_session": 9e-5, "orco.autoaugment": True,
                 "orco.session_epochs": 100, "orco.session_warmup_epochs": 10, "orco.base_ce_weight": 0.0},
    # run_minet.sh: -epochs_base 10 -decay 1e-4 -decay_new 1e-4 -cos_b_lam 0, lr_base 0.1 and perturbations 1e-2
    # (train.py's defaults), no -rand_aug_sup_con; ResNet-18 with a 3x3 stem (models/resnet18.py); phase 1 from
    # solo_learn/scripts/pretrain/minet/base.yaml: LARS lr 0.4 (probe 0.2) at batch 512, 400 epochs, 2 crops at
    # 0.08-1.
    # Boundary fine-tuning: the default 10 epochs (the ADBS paper for OrCo), not the plain preset's 6.
    "mini_imagenet": {"finetune_epochs": CONFIG_DEFAULT, "orco.views": "orco", "backbone": "resnet18_cifar",
                      "base_epochs": 10, "weight_decay": 1e-4, "milestones": (60, 80), "batch_size": 128,
                      "orco.proj_hidden": 2048, "orco.pretrain_epochs": 400, "orco.pretrain_batch_size": 512,
                      "orco.pretrain_lr": 0.4, "orco.probe_lr": 0.2, "orco.pretrain_warmup_epochs": 10,
                      "orco.pretrain_crop_scale": (0.08, 1.0), "orco.session_epochs": 100,
                      "orco.session_warmup_epochs": 10, "orco.base_ce_weight": 0.0},
    # run_cub.sh: no phase 1 (ImageNet ResNet-18: --pretrained FILE), -fine_tune_backbone_base -lr_base 0.025
    # -lr_base_encoder 0.025 -base_schedule Cosine -reserve_mode full (projector 256) -epochs_target_gen 5000,
    # -epochs_joint 100 -batch_size_joint 32 -lr_new 0.05 -decay_new 1e-5 -cos_b_lam 0.6; phase 2 200 epochs
    # as the ADBS paper (OrCo's -epochs_base 100: --base-epochs 100).
    # Cosine schedule and 10 epochs of boundary fine-tuning: the defaults (the plain preset: milestones, 1 epoch).
    "cub200": {"schedule": CONFIG_DEFAULT, "milestones": CONFIG_DEFAULT, "finetune_epochs": CONFIG_DEFAULT,
               "orco.views": "orco", "base_epochs": 200, "base_lr": 0.025, "batch_size": 128,
               "orco.proj_hidden": 2048, "orco.proj_dim": 256, "orco.reserve": "full", "orco.target_steps": 5000,
               "orco.pretrain_epochs": 0, "orco.align_backbone": True, "orco.backbone_lr": 0.025,
               "orco.session_epochs": 100, "orco.session_batch_size": 32, "orco.session_lr": 0.05,
               "orco.session_weight_decay": 1e-5, "orco.session_warmup_epochs": 10, "orco.base_ce_weight": 0.6},
}
