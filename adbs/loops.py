"""The base session and the incremental sessions of one trial, for any host, with ADBS applied by config.

Follows docs/method.md ("ADB", "IC") and the authors' public code; the host (adbs/hosts/, `Config.host`)
supplies the method's own parts and ADBS wraps the host's classification head:

- base session (`train_base`): the host's model (backbone, head rows, whatever else it has) and one
  boundary m per head row, trained jointly by one Nesterov SGD per base phase (weight decay reaching m
  too), loss = the host's base loss on T * |m| * cos logits + alpha * IC over the head's rows; the best
  epoch is picked on *validation* accuracy (the official codes pick it on test); then the host makes the
  rows the sessions start from (prototype replacement: class means of the training images, eval mode,
  test transform) and the base rows' m are kept;
- session t (`run_sessions`): any training the host does in a session, new rows from the shots, new
  boundaries at the mean of the old ones, fine-tuned alone (`finetune_boundaries`) on the shots'
  augmented features, evaluation over all seen classes with T * |m| * cos and the host's prediction rule.

Without a host that trains in the sessions the backbone is frozen after the base session, so val/test
features are computed once and every session evaluates on them (identical to re-running the backbone
each session, as the official code does, but cheaper).

Hooks receive plain dicts (see `Hooks`); no tracking library is imported here. Checkpoints, resume and
the base-session cache are adbs/trial.py's.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from adbs.backbones import create_backbone
from adbs.boundary import boundary_logits, finetune_boundaries, init_new_boundaries, inter_class_constraint
from adbs.config import Config
from adbs.data import FSCILData, make_loader
from adbs.data.augment import batch_generator
from adbs.hosts import Head, Host, create_host, joint_labels
from adbs.metrics import (boundary_stats, class_separation, collapse_warnings, embedding_sample, novel_image_geometry,
                          prediction_stats, prototype_geometry, session_accuracies, trial_summary)
from adbs.runtime import MAX_DEFAULT_WORKERS, Runtime, default_workers, resolve_device  # noqa: F401 - also from here
from adbs.state import BaseSession, TrialResult, base_state

MetricsHook = Callable[[dict[str, float]], None]


class NumericalError(RuntimeError):
    """A loss or boundary became NaN/inf; the message names the quantity and where."""


@dataclass
class Hooks:
    """Callbacks from a running trial. Any of them may raise to stop the trial (e.g. pruning)."""

    on_base_epoch: MetricsHook | None = None
    """After every base epoch: epoch (1-based), epochs (the base session's total), train_loss, train_acc, val_acc,
    lr, epoch_time_s, reused, boundary_* (adbs.metrics)."""
    on_session: MetricsHook | None = None
    """After every session (0 = base): session, n_classes, val_*/test_* acc, base_acc, novel_acc, hmean,
    pred_novel_share, unpredicted_classes, boundary_*."""
    log: Callable[[str], None] | None = None
    """Human-readable progress lines."""
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None
    """Receives a resumable trial state (plain tensors/lists): every `checkpoint_every` base epochs,
    at the end of the base session and after every incremental session. Pass it back as
    run_trial(..., resume=state) to continue bit-identically."""
    checkpoint_every: int = 5
    """Base epochs between checkpoints (the last base epoch always checkpoints)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _check_finite(what: str, value: torch.Tensor, where: str) -> None:
    if not torch.isfinite(value).all():
        raise NumericalError(f"{what} became NaN/inf at {where}")


@torch.no_grad()
def extract_features(host: Host, model, data: FSCILData, pool, indices, rt: Runtime, cfg: Config, *,
                     train: bool = False, seed: int = 0):
    """The host's session features (float32, on device; (N, copies, d)) and labels of `indices`, in order."""
    model.eval()
    feats, labels = [], []
    loader = make_loader(data, pool, indices, train=train, batch_size=cfg.eval_batch_size, shuffle=False, seed=seed,
                         num_workers=rt.num_workers, device=rt.data_device)
    for x, y in loader:
        with rt.autocast():
            f = host.embed(model, rt.images(x))
        feats.append(f.float())
        labels.append(y.to(rt.device))
    if not feats:
        dim = getattr(model.backbone, "out_dim", 0)
        return (torch.empty(0, host.copies, dim, device=rt.device),
                torch.empty(0, dtype=torch.long, device=rt.device))
    return torch.cat(feats), torch.cat(labels)


def _scores(host: Host, features: torch.Tensor, rows: torch.Tensor, boundaries: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Class scores of features (N, copies, d) against rows with boundaries: the host's prediction rule."""
    logits = boundary_logits(features.flatten(0, 1), rows, boundaries, host.session_scale, absolute=cfg.abs_boundary)
    return host.predict(logits.view(len(features), host.copies, len(rows)))


def _optimizer(cfg: Config, params: list[torch.nn.Parameter], boundaries: torch.Tensor, epochs: int):
    """The base session's Nesterov SGD (the boundaries in their own group) and lr schedule."""
    groups = [{"params": params, "weight_decay": cfg.weight_decay}]
    if cfg.learn_boundaries:
        # Released code: m sits in the same SGD as everything else (same lr; wd 5e-4 pulls it toward 0).
        groups.append({"params": [boundaries], "lr": cfg.base_lr * cfg.boundary_lr_scale,
                       "weight_decay": cfg.weight_decay if cfg.boundary_weight_decay else 0.0})
    opt = torch.optim.SGD(groups, lr=cfg.base_lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
    if cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    else:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)
    return opt, sched


def train_base(cfg: Config, data: FSCILData, hooks: Hooks | None = None, resume: dict[str, Any] | None = None) -> BaseSession:
    """Base-session training with validation-based epoch selection, then the host's session rows.

    `resume` is a state given earlier to `hooks.on_checkpoint` (phase "base"): training
    continues after its epoch with the same weights, optimiser, schedule, loader position
    and best-so-far, so the result equals an uninterrupted run's.
    """
    hooks = hooks or Hooks()
    rt = Runtime(cfg)
    seed_everything(cfg.seed)
    host = create_host(cfg, data, rt)
    base = data.sessions[0]
    n_rows = host.base_rows

    model = host.build(rt.module(create_backbone(cfg.backbone, pretrained=cfg.pretrained)))
    # m starts at 1.0 (official), one per head row. The fixed-boundary baseline keeps m = 1.
    boundaries = torch.ones(model.head.shape[0], device=rt.device)
    if cfg.learn_boundaries:
        boundaries = torch.nn.Parameter(boundaries)
    head = Head(model.head, boundaries, host.scale, cfg.abs_boundary)
    phases = host.phases()
    total = sum(p.epochs for p in phases)

    loader = make_loader(data, data.train_pool, base.train, train=host.augmented_batches, batch_size=cfg.batch_size,
                         shuffle=True, seed=cfg.seed, num_workers=rt.num_workers, device=rt.data_device)
    alpha = cfg.effective_alpha
    best_acc, best_epoch, best_state = -1.0, 0, None
    curve: list[dict[str, float]] = []
    done = 0  # last finished base epoch (1-based, counted over all phases)
    if resume is not None:
        model.load_state_dict(resume["model"])
        with torch.no_grad():
            boundaries.copy_(resume["boundaries"])
        best_acc, best_epoch = resume["best_acc"], resume["best_epoch"]
        if resume["best_model"] is not None:
            best_state = (resume["best_model"], resume["best_boundaries"].to(rt.device))
        curve = list(resume["curve"])
        done = resume["epoch"]

    def base_features():
        return extract_features(host, model, data, data.train_pool, base.train, rt, cfg)

    first = 0  # epochs before this phase
    shared_before = 0  # epochs of earlier phases that ran on the shared loader
    for k, phase in enumerate(phases):
        last = first + phase.epochs
        if done >= last:
            first = last
            if phase.batch_size in (None, cfg.batch_size):
                shared_before += phase.epochs
            continue
        if phase.start is not None and done <= first:  # resumed inside the phase: its effect is in the model state
            phase.start(model, base_features)
        params = phase.trainable(model) if phase.trainable else [p for p in model.parameters() if p.requires_grad]
        if phase.optimizer is not None:
            groups = [{"params": params}] + ([{"params": [boundaries]}] if cfg.learn_boundaries else [])
            opt, sched = phase.optimizer(groups)
        else:
            opt, sched = _optimizer(cfg, params, boundaries, phase.epochs)
        if done > first:  # resumed in the middle of this phase
            opt.load_state_dict(resume["optimizer"])
            sched.load_state_dict(resume["scheduler"])
        # The loader's position is the epochs it has run (its shuffles and augmentations follow from it): the
        # shared loader's count over the phases that use it, a phase's own loader's over that phase.
        if phase.batch_size in (None, cfg.batch_size):
            batches = loader
            batches.epoch = shared_before + max(done, first) - first
            shared_before += phase.epochs
        else:
            batches = make_loader(data, data.train_pool, base.train, train=host.augmented_batches,
                                  batch_size=phase.batch_size, shuffle=True, seed=cfg.seed,
                                  num_workers=rt.num_workers, device=rt.data_device)
            batches.epoch = max(done, first) - first
        for epoch in range(max(done, first) + 1, last + 1):
            t0 = time.perf_counter()
            model.train()
            if cfg.learn_boundaries:  # warm-up: m frozen (no gradient, so no momentum either) for the first epochs
                boundaries.requires_grad_(epoch > cfg.boundary_warmup_epochs)
            lr = opt.param_groups[0]["lr"]
            loss_sum = torch.zeros((), device=rt.device)
            correct = torch.zeros((), device=rt.device)
            seen = 0
            for b, (x, y) in enumerate(batches):
                x, y = rt.images(x), y.to(rt.device)
                step = phase.step(model, head, x, y, batch_generator(cfg.seed, epoch, b))
                loss = step.loss
                if alpha:
                    n = host.ic_rows
                    m, w = (boundaries, head.weights) if n is None else (boundaries[:n], head.weights[:n])
                    loss = loss + alpha * inter_class_constraint(m, w, cfg.ic_reduction)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_sum += loss.detach() * len(y)
                correct += (step.scores.argmax(1) == step.targets).sum()
                seen += len(step.targets)
            sched.step()
            where = f"base epoch {epoch}"
            _check_finite("base training loss", loss_sum, where)
            _check_finite("base boundaries m", boundaries.detach(), where)

            vf, vy = extract_features(host, model, data, data.train_pool, base.val, rt, cfg)
            with torch.no_grad():
                rows, m = host.val_classifier(model, head, base_features)
                vpred = _scores(host, vf, rows, m, cfg).argmax(1)
            val_acc = 100.0 * (vpred == vy).float().mean().item()
            row = {
                "epoch": epoch,
                "train_loss": loss_sum.item() / max(len(batches.indices), 1),
                "train_acc": 100.0 * correct.item() / max(seen, 1),
                "val_acc": val_acc,
                "lr": lr,
                "epoch_time_s": time.perf_counter() - t0,
                "epochs": total,  # base epochs of all phases: progress lines say "epoch i/N" and an ETA from it
                "reused": 0.0,
            }
            row.update({k: v for k, v in boundary_stats(boundaries[:n_rows], n_rows).items() if "novel" not in k})
            curve.append(row)
            if phase.select and val_acc > best_acc:
                best_acc, best_epoch = val_acc, epoch
                best_state = (copy.deepcopy(model.state_dict()), boundaries.detach().clone())
            if hooks.log:
                hooks.log(
                    f"base epoch {epoch}/{total}  loss {row['train_loss']:.4f}  train {row['train_acc']:.2f}%  "
                    f"val {val_acc:.2f}%  lr {lr:.4g}  m {row['boundary_mean']:.3f} [{row['boundary_min']:.3f}, "
                    f"{row['boundary_max']:.3f}], {int(row['boundary_negative'])} < 0  {row['epoch_time_s']:.1f}s"
                )
            if hooks.on_checkpoint and (epoch % max(hooks.checkpoint_every, 1) == 0 or epoch == total):
                hooks.on_checkpoint({
                    "phase": "base", "epoch": epoch, "model": _cpu(model.state_dict()),
                    "boundaries": boundaries.detach().cpu().clone(), "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(), "loader_epoch": batches.epoch, "best_acc": best_acc,
                    "best_epoch": best_epoch, "best_model": None if best_state is None else _cpu(best_state[0]),
                    "best_boundaries": None if best_state is None else best_state[1].cpu(), "curve": list(curve),
                })
            if hooks.on_base_epoch:  # after on_checkpoint, so a tracker can attach the state to this report
                hooks.on_base_epoch(dict(row))
        first = last

    assert best_state is not None, "no base phase selects its best epoch"
    model.load_state_dict(best_state[0])
    best_boundaries = best_state[1]
    # Prototype replacement: the rows the sessions start from (class means of the base training images,
    # eval mode, test transform, in the host's feature space).
    tf, ty = extract_features(host, model, data, data.train_pool, base.train, rt, cfg)
    prototypes = host.rows(tf, ty, base.classes)
    return BaseSession(
        backbone_state={k: v.detach().cpu() for k, v in model.backbone.state_dict().items()},
        prototypes=prototypes.cpu(),
        boundaries=best_boundaries[:n_rows].cpu(),
        curve=curve,
        best_epoch=best_epoch,
        host_state=_cpu(host.session_state(model)),
    )


def _cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()}


FeatureSource = Callable[[str, np.ndarray, Callable[[], tuple[torch.Tensor, torch.Tensor]]], tuple[torch.Tensor, torch.Tensor]]


def session_model(host: Host, cfg: Config, rt: Runtime, base_session: BaseSession) -> torch.nn.Module:
    """The host's model with the trained base session's backbone (and parts), frozen, in eval mode."""
    model = host.build(rt.module(create_backbone(cfg.backbone)))
    model.backbone.load_state_dict(base_session.backbone_state)
    if base_session.host_state:
        missing = set(base_session.host_state) - set(model.state_dict())
        if missing:
            raise KeyError(f"host {cfg.host} has no parts {sorted(missing)} to load the base session into")
        model.load_state_dict(base_session.host_state, strict=False)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def run_sessions(
    cfg: Config, data: FSCILData, base_session: BaseSession, hooks: Hooks | None = None,
    resume: dict[str, Any] | None = None, features: FeatureSource | None = None,
    base_ref: dict[str, Any] | None = None,
) -> TrialResult:
    """Session 0 evaluation after prototype replacement, then every incremental session.

    `resume` (phase "sessions") continues after the last finished session. `features(name, indices,
    compute)` may return stored val/test features instead of calling `compute` (BaseCache.features).
    `base_ref` (e.g. {"base_key": ...} when the base session is in a BaseCache) goes into the session
    checkpoints instead of the whole base state, which would otherwise be written again every session
    (~50 MB per session for a ResNet-12).
    """
    hooks = hooks or Hooks()
    # A host of its own, not train_base's: the sessions start from the BaseSession alone, whether it was just
    # trained or loaded from the base-session cache, so both paths give the same numbers (adbs/cache.py).
    rt = Runtime(cfg)
    host = create_host(cfg, data, rt)
    model = session_model(host, cfg, rt, base_session)
    n_base = len(data.sessions[0].classes)
    copies = host.copies

    # Frozen backbone: val/test features of every class, computed once for all sessions.
    all_val = np.concatenate([s.val for s in data.sessions])
    all_test = np.concatenate([s.test for s in data.sessions])
    def frozen(name: str, pool, indices, cached: bool = True):
        compute = lambda: extract_features(host, model, data, pool, indices, rt, cfg)  # noqa: E731
        if features is None or not cached:
            return compute()
        f, y = features(f"{name}-bs{cfg.eval_batch_size}", indices, compute)
        return f.to(rt.device), y.to(rt.device)

    weights = base_session.prototypes.to(rt.device)
    boundaries = base_session.boundaries.to(rt.device)
    if cfg.abs_base_boundary:  # remedy: no negative m enters the sessions (released code keeps the sign)
        boundaries = boundaries.abs()
    rows: list[dict[str, float]] = []
    boundaries_per_session: list[list[float]] = []
    done = -1
    trained = False  # has the host trained in a session (so its session model differs from the base one)?
    if resume is not None and resume.get("phase") == "sessions":
        weights, boundaries = resume["weights"].to(rt.device), resume["boundaries"].to(rt.device)
        rows, boundaries_per_session, done = list(resume["rows"]), list(resume["boundaries_per_session"]), resume["session"]
        if resume.get("session_model") is not None:
            model.load_state_dict(resume["session_model"])
            trained = True

    t_features = time.perf_counter()
    val_f, val_y = frozen("val", data.train_pool, all_val, cached=not trained)
    test_f, test_y = frozen("test", data.test_pool, all_test, cached=not trained)
    t_features = time.perf_counter() - t_features

    for t, sess in enumerate(data.sessions):
        if t <= done:
            continue
        if t > 0:
            if host.session_step(model, t):  # the host trained: its features of every image changed
                trained = True
                val_f, val_y = frozen("val", data.train_pool, all_val, cached=False)
                test_f, test_y = frozen("test", data.test_pool, all_test, cached=False)
            shot_f, shot_y = extract_features(host, model, data, data.train_pool, sess.train, rt, cfg)
            new_rows = host.rows(shot_f, shot_y, sess.classes)
            weights = torch.cat([weights, new_rows])
            boundaries = torch.cat([boundaries, new_boundaries(cfg, boundaries, len(new_rows))])
            epochs = cfg.effective_finetune_epochs
            if epochs > 0:
                # One augmented view of the shots per epoch, backbone in eval mode (official);
                # views are computed up front with no graph since the backbone gets no gradient.
                views = _augmented_views(host, model, data, sess.train, epochs, rt, cfg, seed=cfg.seed * 1000 + t)
                boundaries = finetune_boundaries(
                    views, joint_labels(shot_y, copies), weights, boundaries, len(boundaries) - len(new_rows),
                    alpha=cfg.effective_alpha, lr=cfg.finetune_lr, epochs=epochs, temperature=host.session_scale,
                    ic_reduction=cfg.ic_reduction, absolute=cfg.finetune_abs_boundary,
                )
                _check_finite("novel boundaries m", boundaries, f"session {t}")
        n_rows = len(weights)
        n_seen = n_rows // copies
        row: dict[str, float] = {"session": t, "n_classes": n_seen}
        for split, f, y in (("val", val_f, val_y), ("test", test_f, test_y)):
            keep = y < n_seen
            with torch.no_grad():
                pred = _scores(host, f[keep], weights, boundaries, cfg).argmax(1)
            for k, v in {**session_accuracies(pred, y[keep], n_base), **prediction_stats(pred, n_base, n_seen)}.items():
                row[f"{split}_{k}"] = v
        row.update(boundary_stats(boundaries, n_base * copies))
        rows.append(row)
        boundaries_per_session.append(boundaries.cpu().tolist())
        if hooks.log:
            hooks.log(
                f"session {t}: {n_seen} classes  val {row['val_acc']:.2f}%  test {row['test_acc']:.2f}% "
                f"(base {row['test_base_acc']:.2f}, novel {row['test_novel_acc']:.2f}; "
                f"{row['test_pred_novel_share']:.1f}% of predictions novel, "
                f"{int(row['test_unpredicted_classes'])} classes never predicted)  "
                f"m < 0: {int(row['boundary_negative'])}, |m| base {row['boundary_base_abs_mean']:.2f} "
                f"[{row['boundary_base_abs_min']:.2f}, {row['boundary_base_abs_max']:.2f}]"
                + (f", novel {row['boundary_novel_abs_mean']:.2f}" if t else "")
            )
        if hooks.on_checkpoint:
            hooks.on_checkpoint({
                "phase": "sessions", "session": t, **(base_ref or {"base": base_state(base_session)}), "weights": weights.cpu(),
                "boundaries": boundaries.cpu(), "rows": list(rows), "boundaries_per_session": list(boundaries_per_session),
                "session_model": _cpu(model.state_dict()) if trained else None,
            })
        if hooks.on_session:
            hooks.on_session(dict(row))

    summary: dict[str, float] = {}
    for split in ("val", "test"):
        for k, v in trial_summary([r[f"{split}_acc"] for r in rows]).items():
            summary[f"{split}_{k}"] = v
    summary["test_last_hmean"] = rows[-1]["test_hmean"]
    summary["d_cs"] = class_separation(weights)
    # Geometry of the novel classes against the base ones (first copy of each class for multi-copy hosts).
    rows0 = weights[::copies]
    summary.update(prototype_geometry(rows0, n_base))
    summary.update(novel_image_geometry(test_f[:, 0], test_y, rows0, n_base))
    summary["best_base_epoch"] = base_session.best_epoch
    summary["boundary_base_mean"] = rows[-1]["boundary_base_mean"]
    summary["boundary_novel_mean"] = rows[-1]["boundary_novel_mean"]
    summary["boundary_negative"] = rows[-1]["boundary_negative"]
    warnings = collapse_warnings(rows)
    summary["collapse_warning"] = float(bool(warnings))
    if warnings and hooks.log:
        hooks.log("WARNING: " + "; ".join(warnings))
    extra: dict[str, Any] = {"features_s": t_features}  # val/test feature extraction (BaseCache.features): bench/bench.py
    if cfg.keep_embeddings:  # the paper's t-SNE and prototype-similarity figures (adbs_lab/figures.py draws them)
        extra["embeddings"] = embedding_sample(test_f[:, 0], test_y, rows0, n_base)
    return TrialResult(
        config=cfg.to_dict(), base_curve=list(base_session.curve), sessions=rows, boundaries=boundaries_per_session, summary=summary,
        extra=extra, warnings=warnings,
    )


def new_boundaries(cfg: Config, old: torch.Tensor, n_new: int) -> torch.Tensor:
    """Initial m of the new rows (Config.new_boundary_init)."""
    if cfg.new_boundary_init == "one":
        return torch.ones(n_new, device=old.device)
    return init_new_boundaries(old.abs() if cfg.new_boundary_init == "abs_mean" else old, n_new)


def _augmented_views(host: Host, model, data: FSCILData, indices, epochs: int, rt: Runtime, cfg: Config,
                     seed: int) -> torch.Tensor:
    """(epochs, N * copies, d): one train-augmented view of the shots per epoch, in the host's feature space."""
    loader = make_loader(data, data.train_pool, indices, train=True, batch_size=len(indices), shuffle=False, seed=seed,
                         num_workers=rt.num_workers, device=rt.data_device)
    views = []
    with torch.no_grad():
        for _ in range(epochs):
            (x, _y), = list(loader)
            with rt.autocast():
                views.append(host.embed(model, rt.images(x)).float().flatten(0, 1))
    return torch.stack(views)
