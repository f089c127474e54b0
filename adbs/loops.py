"""The base session and the incremental sessions of one trial, for any host, with ADBS applied by config.

Follows docs/method.md ("ADB", "IC") and the authors' public code; the host (adbs/hosts/, `Config.host`)
supplies the method's own parts and ADBS wraps the host's classification head:

- base session (`train_base`): the host's model (backbone, head rows, whatever else it has) and one
  boundary m per head row, trained jointly by one Nesterov SGD per base phase (weight decay reaching m
  too), loss = the host's base loss on T * |m| * cos logits + alpha * IC over the head's rows; the best
  epoch is picked on *validation* accuracy (the official codes pick it on test); then the host makes the
  rows the sessions start from (prototype replacement: class means of the training images, eval mode,
  test transform) and the base rows' m are kept;
- session t (`run_sessions`, adbs/sessions.py, importable from here too): any training the host does in a
  session, new rows from the shots, new boundaries at the mean of the old ones, fine-tuned alone
  (`finetune_boundaries`) on the shots' augmented features, evaluation over all seen classes.

What ADBS adds to the host's base session (the boundaries' optimiser group, their warm-up, the IC term) is
`BaseADBS`. What both loops share (hooks, feature extraction) is adbs/trainer.py's; the checkpoints they
write are adbs/state.py's. Resume and the base-session cache are adbs/trial.py's.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from adbs.backbones import create_backbone
from adbs.boundary import inter_class_constraint
from adbs.config import Config
from adbs.data import FSCILData, make_loader
from adbs.data.augment import batch_generator
from adbs.hosts import create_host
from adbs.hosts.interface import Head, Host, Phase
from adbs.metrics import boundary_stat_tensors
from adbs.runtime import Runtime
from adbs.state import BaseCheckpoint, BaseSession, Checkpoint, read_checkpoint
from adbs.trainer import (
    Hooks,
    NumericalError,
    check_finite,
    class_scores,
    cpu_state,
    extract_features,
    read,
    seed_everything,
)


# -- ADBS in the base session: all the trainer adds to a host's training -----------------------------------
@dataclass
class BaseADBS:
    """What ADBS adds to the host's base session, in one place: the boundaries' parameter group in the optimiser,
    their warm-up and the IC term on the host's loss. With variant=baseline (m = 1, fixed) the group is empty and
    nothing here changes the host's training; with alpha = 0 there is no IC term."""

    cfg: Config
    boundaries: torch.Tensor  # one m per head row (a Parameter when learned)
    head: Head
    ic_rows: int | None  # head rows IC runs over (the first ones); None = every row

    def param_groups(self) -> list[dict[str, Any]]:
        """The boundaries' optimiser group, lr and weight decay set; every phase's optimiser gets it after the
        phase's own parameters (adbs/hosts: Phase.optimizer keeps it as it is or leaves it out)."""
        cfg = self.cfg
        if not cfg.learn_boundaries:
            return []
        # Released code: m sits in the same SGD as everything else (same lr; wd 5e-4 pulls it toward 0).
        return [{"params": [self.boundaries], "lr": cfg.base_lr * cfg.boundary_lr_scale,
                 "weight_decay": cfg.weight_decay if cfg.boundary_weight_decay else 0.0}]

    def warm_up(self, epoch: int) -> None:
        """m frozen (no gradient, so no momentum either) for the first boundary_warmup_epochs epochs."""
        if self.cfg.learn_boundaries:
            self.boundaries.requires_grad_(epoch > self.cfg.boundary_warmup_epochs)

    def loss(self, host_loss: torch.Tensor) -> torch.Tensor:
        """The host's loss plus alpha * IC over the head's rows."""
        alpha, n = self.cfg.effective_alpha, self.ic_rows
        if not alpha:
            return host_loss
        m, w = (self.boundaries, self.head.weights) if n is None else (self.boundaries[:n], self.head.weights[:n])
        return host_loss + alpha * inter_class_constraint(m, w, self.cfg.ic_reduction)


def _optimizer(cfg: Config, params: list[torch.nn.Parameter], boundary_groups: list[dict[str, Any]], epochs: int):
    """The base session's Nesterov SGD (the boundaries in their own group) and lr schedule."""
    groups = [{"params": params, "weight_decay": cfg.weight_decay}, *boundary_groups]
    opt = torch.optim.SGD(groups, lr=cfg.base_lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
    if cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    else:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)
    return opt, sched


# -- the base session: for each phase, for each epoch: train, validate, checkpoint -----------------------------
def train_base(cfg: Config, data: FSCILData, hooks: Hooks | None = None,
               resume: BaseCheckpoint | dict[str, Any] | None = None) -> BaseSession:
    """Base-session training with validation-based epoch selection, then the host's session rows.

    `resume` is a state given earlier to `hooks.on_checkpoint` (phase "base"): training
    continues after its epoch with the same weights, optimiser, schedule, loader position
    and best-so-far, so the result equals an uninterrupted run's.
    """
    hooks = hooks or Hooks()
    run = _BaseRun.start(cfg, data, None if resume is None else read_checkpoint(resume))
    total = sum(p.epochs for p in run.phases)
    for phase, first, loader_start in _phase_plan(run.phases, cfg):
        if run.done >= first + phase.epochs:  # finished before the checkpoint resumed from
            continue
        opt, sched, batches = run.start_phase(phase, first, loader_start)
        for epoch in range(max(run.done, first) + 1, first + phase.epochs + 1):
            t0 = time.perf_counter()
            trained = run.train_epoch(phase, opt, batches, epoch)
            sched.step()
            row = run.validate(phase, epoch, trained, t0, total)  # the epoch's figures read back, checked, recorded
            _log_base_epoch(hooks, row, total)
            if hooks.on_checkpoint and (epoch % max(hooks.checkpoint_every, 1) == 0 or epoch == total):
                hooks.on_checkpoint(run.checkpoint(epoch, opt, sched, batches).to_dict())
            if hooks.on_base_epoch:  # after on_checkpoint, so a tracker can attach the state to this report
                hooks.on_base_epoch(dict(row))
    return run.finish()


def _phase_plan(phases: list[Phase], cfg: Config) -> list[tuple[Phase, int, int]]:
    """(phase, base epochs before it, its loader's position when it starts) for every phase.

    The loader's position is the epochs it has run (its shuffles and augmentations follow from it): the shared
    loader's count over the phases before that use it, a phase's own loader's 0.
    """
    plan, first, shared = [], 0, 0
    for phase in phases:
        plan.append((phase, first, shared if _shared_loader(phase, cfg) else 0))
        first += phase.epochs
        shared += phase.epochs if _shared_loader(phase, cfg) else 0
    return plan


def _shared_loader(phase: Phase, cfg: Config) -> bool:
    return phase.batch_size in (None, cfg.batch_size)


@dataclass
class _BaseRun:
    """One base session in training: the host, its model with ADBS's boundaries, the training loader, and the
    progress a checkpoint saves (`done`: the last finished epoch, counted over all phases)."""

    cfg: Config
    data: FSCILData
    rt: Runtime
    host: Host
    model: torch.nn.Module
    boundaries: torch.Tensor
    head: Head
    adbs: BaseADBS
    phases: list[Phase]
    loader: Any
    resume: BaseCheckpoint | None = None
    done: int = 0
    best_acc: float = -1.0
    best_epoch: int = 0
    best_state: tuple[dict[str, torch.Tensor], torch.Tensor] | None = None
    curve: list[dict[str, float]] = field(default_factory=list)

    @classmethod
    def start(cls, cfg: Config, data: FSCILData, resume: Checkpoint | None) -> _BaseRun:
        """The seeded host and model (boundaries m = 1.0, as the official code starts them), or the checkpoint's."""
        if resume is not None and not isinstance(resume, BaseCheckpoint):
            raise ValueError(f"train_base resumes from a base-session checkpoint, not a {resume.phase!r} one")
        rt = Runtime(cfg)
        seed_everything(cfg.seed)
        host = create_host(cfg, data, rt)
        model = host.build(rt.module(create_backbone(cfg.backbone, pretrained=cfg.pretrained)))
        rt.speed_up(model.backbone)  # Config.fast_step, after build: a host's copies of the backbone stay eager (SAVC)
        boundaries = torch.ones(model.head.shape[0], device=rt.device)  # the fixed-boundary baseline keeps m = 1
        if cfg.learn_boundaries:
            boundaries = torch.nn.Parameter(boundaries)
        head = Head(model.head, boundaries, host.scale, cfg.abs_boundary)
        phases = host.phases()
        loader = make_loader(data, data.train_pool, data.sessions[0].train, train=host.augmented_batches,
                             batch_size=cfg.batch_size, shuffle=True, seed=cfg.seed, num_workers=rt.num_workers,
                             device=rt.data_device)
        run = cls(cfg, data, rt, host, model, boundaries, head, BaseADBS(cfg, boundaries, head, host.ic_rows), phases,
                  loader, resume)
        if resume is not None:
            model.load_state_dict(resume.model)
            with torch.no_grad():
                boundaries.copy_(resume.boundaries)
            run.best_acc, run.best_epoch, run.done = resume.best_acc, resume.best_epoch, resume.epoch
            run.curve = list(resume.curve)
            if resume.best_model is not None:
                # written together (_BaseRun.checkpoint: both from best_state, or both None)
                assert resume.best_boundaries is not None
                run.best_state = (resume.best_model, resume.best_boundaries.to(rt.device))
        return run

    def base_features(self):
        """The `embed` features and labels of the base training images (eval mode, test transform)."""
        return extract_features(self.host, self.model, self.data, self.data.train_pool, self.data.sessions[0].train,
                                self.rt, self.cfg)

    def start_phase(self, phase: Phase, first: int, loader_start: int):
        """The phase's optimiser, schedule and positioned loader (the checkpoint's when resumed inside the phase)."""
        cfg, model = self.cfg, self.model
        if phase.start is not None and self.done <= first:  # resumed inside the phase: its effect is in the model state
            phase.start(model, self.base_features)
        params = phase.trainable(model) if phase.trainable else [p for p in model.parameters() if p.requires_grad]
        if phase.optimizer is not None:
            opt, sched = phase.optimizer([{"params": params}, *self.adbs.param_groups()])
        else:
            opt, sched = _optimizer(cfg, params, self.adbs.param_groups(), phase.epochs)
        if self.done > first:  # resumed in the middle of this phase
            assert self.resume is not None  # only a checkpoint sets done past a phase's first epoch before it starts
            opt.load_state_dict(self.resume.optimizer)
            sched.load_state_dict(self.resume.scheduler)
        batches = self.loader
        if not _shared_loader(phase, cfg):
            assert phase.batch_size is not None  # None is the shared loader's batch size (_shared_loader)
            batches = make_loader(self.data, self.data.train_pool, self.data.sessions[0].train,
                                  train=self.host.augmented_batches, batch_size=phase.batch_size, shuffle=True,
                                  seed=cfg.seed, num_workers=self.rt.num_workers, device=self.rt.data_device)
        batches.epoch = loader_start + max(self.done, first) - first
        return opt, sched, batches

    def train_epoch(self, phase: Phase, opt, batches, epoch: int) -> dict[str, Any]:
        """One epoch of the phase's steps with ADBS's terms: its loss sum and correct count (tensors on the device,
        nothing read back per step), the images seen and trained on, and the lr."""
        cfg, rt, model = self.cfg, self.rt, self.model
        model.train()
        self.adbs.warm_up(epoch)
        lr = opt.param_groups[0]["lr"]
        loss_sum = torch.zeros((), device=rt.device)
        correct = torch.zeros((), device=rt.device)
        seen = 0
        for b, (x, y) in enumerate(batches):
            loss, right, n = base_step(self, phase, opt, rt.images(x), y.to(rt.device), batch_generator(cfg.seed, epoch, b))
            loss_sum += loss
            correct += right
            seen += n
        return {"loss_sum": loss_sum, "correct": correct, "seen": seen, "images": len(batches.indices), "lr": lr}

    def validate(self, phase: Phase, epoch: int, trained: dict[str, Any], t0: float, total: int) -> dict[str, float]:
        """The epoch's curve row: its figures read back (checked finite first), its validation accuracy; keeps the
        model when a selecting phase's best so far. With Runtime.one_transfer every figure comes back in one
        transfer after the validation pass; else each on its own, the finiteness checked before that pass, as
        before Config.fast_step existed. The same numbers either way."""
        host, cfg, base, where = self.host, self.cfg, self.data.sessions[0], f"base epoch {epoch}"
        checks = {"base training loss": trained["loss_sum"], "base boundaries m": self.boundaries.detach()}
        if not self.rt.one_transfer:
            for what, value in checks.items():
                check_finite(what, value, where)
        vf, vy = extract_features(host, self.model, self.data, self.data.train_pool, base.val, self.rt, cfg)
        with torch.no_grad():
            rows, m = host.val_classifier(self.model, self.head, self.base_features)
            vpred = class_scores(host, vf, rows, m, cfg).argmax(1)
        stats = {k: v for k, v in boundary_stat_tensors(self.boundaries[:host.base_rows], host.base_rows).items()
                 if "novel" not in k and isinstance(v, torch.Tensor)}  # the base rows' scope is never empty
        finite = {what: torch.isfinite(v).all() for what, v in checks.items()} if self.rt.one_transfer else {}
        got = read({"loss_sum": trained["loss_sum"], "correct": trained["correct"], "val": (vpred == vy).float().mean(),
                    **stats, **finite}, at_once=self.rt.one_transfer)
        for what in finite:
            if not got[what]:
                raise NumericalError(f"{what} became NaN/inf at {where}")
        val_acc = 100.0 * got["val"]
        row = {"epoch": epoch, "train_loss": got["loss_sum"] / max(trained["images"], 1),
               "train_acc": 100.0 * got["correct"] / max(trained["seen"], 1),
               "val_acc": val_acc, "lr": trained["lr"], "epoch_time_s": time.perf_counter() - t0,
               "epochs": total,  # base epochs of all phases: progress lines say "epoch i/N" and an ETA from it
               "reused": 0.0}
        row.update({k: got[k] for k in stats})
        self.curve.append(row)
        if phase.select and val_acc > self.best_acc:
            self.best_acc, self.best_epoch = val_acc, epoch
            self.best_state = (copy.deepcopy(self.model.state_dict()), self.boundaries.detach().clone())
        return row

    def checkpoint(self, epoch: int, opt, sched, batches) -> BaseCheckpoint:
        best = self.best_state
        return BaseCheckpoint(
            epoch=epoch, model=cpu_state(self.model.state_dict()), boundaries=self.boundaries.detach().cpu().clone(),
            optimizer=opt.state_dict(), scheduler=sched.state_dict(), loader_epoch=batches.epoch,
            best_acc=self.best_acc, best_epoch=self.best_epoch, best_model=None if best is None else cpu_state(best[0]),
            best_boundaries=None if best is None else best[1].cpu(), curve=list(self.curve))

    def finish(self) -> BaseSession:
        """The best epoch's model, and the rows the sessions start from (prototype replacement: class means of the
        base training images, eval mode, test transform, in the host's feature space)."""
        assert self.best_state is not None, "no base phase selects its best epoch"
        self.model.load_state_dict(self.best_state[0])
        tf, ty = self.base_features()
        prototypes = self.host.rows(tf, ty, self.data.sessions[0].classes)
        return BaseSession(
            backbone_state={k: v.detach().cpu() for k, v in self.model.backbone.state_dict().items()},
            prototypes=prototypes.cpu(),
            boundaries=self.best_state[1][:self.host.base_rows].cpu(),
            curve=self.curve,
            best_epoch=self.best_epoch,
            host_state=cpu_state(self.host.session_state(self.model)),
        )


def base_step(run: _BaseRun, phase: Phase, opt, x: torch.Tensor, y: torch.Tensor,
              g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """One training step of a base run: the host's step, ADBS's terms on its loss, backward, the optimiser's step.
    Returns (loss x images, correct predictions, images scored) with the tensors left on the device: nothing here
    waits for the GPU. A module-level name, so bench/gpu_profile.py can wrap it where _BaseRun.train_epoch looks it up."""
    run.rt.step_begin()
    step = phase.step(run.model, run.head, x, y, g)
    loss = run.adbs.loss(step.loss)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach() * len(y), (step.scores.argmax(1) == step.targets).sum(), len(step.targets)


def _log_base_epoch(hooks: Hooks, row: dict[str, float], total: int) -> None:
    if hooks.log:
        hooks.log(
            f"base epoch {row['epoch']}/{total}  loss {row['train_loss']:.4f}  train {row['train_acc']:.2f}%  "
            f"val {row['val_acc']:.2f}%  lr {row['lr']:.4g}  m {row['boundary_mean']:.3f} [{row['boundary_min']:.3f}, "
            f"{row['boundary_max']:.3f}], {int(row['boundary_negative'])} < 0  {row['epoch_time_s']:.1f}s"
        )
