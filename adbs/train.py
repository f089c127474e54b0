"""One full FSCIL trial: base session, prototype replacement, incremental sessions.

Follows method.md ("ADB", "IC") and the authors' public code:
- base session: backbone + cosine classifier + one boundary per base class,
  trained jointly by one Nesterov SGD (weight decay reaching m too), loss
  CE(T * |m| * cos) + alpha * IC over the base classes; the best epoch is
  picked on *validation* accuracy (the official code picks it on test);
- base classifier rows replaced by class-mean features (eval mode, test
  transform); learned base boundaries kept;
- session t: new rows = prototypes of the K shots, new boundaries start at the
  mean of the old ones and alone are fine-tuned (`finetune_boundaries`),
  evaluation over all seen classes with T * |m| * cos.

The backbone is frozen after the base session, so val/test features are
computed once and every session evaluates on them (identical to re-running the
backbone each session, as the official code does, but cheaper).

Hooks receive plain dicts (see `Hooks`); no tracking library is imported here.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from adbs.backbones import create_backbone
from adbs.boundary import boundary_logits, finetune_boundaries, init_new_boundaries, inter_class_constraint
from adbs.config import Config
from adbs.data import FSCILData, build_data, make_loader
from adbs.metrics import (boundary_stats, class_separation, collapse_warnings, prediction_stats,
                          session_accuracies, trial_summary)

if TYPE_CHECKING:
    from adbs.cache import BaseCache

MetricsHook = Callable[[dict[str, float]], None]


class NumericalError(RuntimeError):
    """A loss or boundary became NaN/inf; the message names the quantity and where."""


@dataclass
class Hooks:
    """Callbacks from a running trial. Any of them may raise to stop the trial (e.g. pruning)."""

    on_base_epoch: MetricsHook | None = None
    """After every base epoch: epoch (1-based), train_loss, train_acc, val_acc, lr, boundary_* (adbs.metrics)."""
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


@dataclass
class BaseSession:
    """Everything the incremental sessions need from a trained base session."""

    backbone_state: dict[str, torch.Tensor]
    prototypes: torch.Tensor  # (n_base, d): classifier rows after prototype replacement
    margins: torch.Tensor  # (n_base,): learned base boundaries
    curve: list[dict[str, float]]
    best_epoch: int


@dataclass
class TrialResult:
    config: dict[str, Any]
    base_curve: list[dict[str, float]]
    sessions: list[dict[str, float]]
    margins: list[list[float]]
    summary: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Signs of the collapsed boundary regime (adbs.metrics.collapse_warnings); empty when none."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_device(cfg: Config) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was requested but torch sees no CUDA GPU; use device='auto' or 'cpu'")
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class _Runtime:
    """Device placement, AMP and channels_last in one place.

    channels_last on every device: on CPU (oneDNN) it makes the ConvNet's eval pass ~3x and its training
    step ~1.5x faster than NCHW (max-pooling in NCHW alone took a third of the eval time); AMP is GPU only,
    CPU runs fp32.
    """

    def __init__(self, cfg: Config):
        self.device = resolve_device(cfg)
        self.cuda = self.device.type == "cuda"
        self.amp = cfg.amp and self.cuda
        if self.cuda:
            torch.backends.cudnn.benchmark = True
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        # Loader workers follow the CPUs this process may use (a study trial sets torch's threads to
        # its --cpus-per-trial): one decoding worker per CPU, none when there is a single CPU.
        threads = torch.get_num_threads()
        self.num_workers = cfg.num_workers if cfg.num_workers is not None else (threads if threads > 1 else 0)

    def images(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, non_blocking=True)
        return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x

    def module(self, m: torch.nn.Module) -> torch.nn.Module:
        m = m.to(self.device)
        return m.to(memory_format=torch.channels_last)

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.amp else nullcontext()


def _check_finite(what: str, value: torch.Tensor, where: str) -> None:
    if not torch.isfinite(value).all():
        raise NumericalError(f"{what} became NaN/inf at {where}")


@torch.no_grad()
def extract_features(backbone, data: FSCILData, pool, indices, rt: _Runtime, cfg: Config, *, train: bool = False, seed: int = 0):
    """Backbone features (float32, on device) and labels of `indices`, in order."""
    backbone.eval()
    feats, labels = [], []
    loader = make_loader(data, pool, indices, train=train, batch_size=cfg.eval_batch_size, shuffle=False, seed=seed, num_workers=rt.num_workers)
    for x, y in loader:
        with rt.autocast():
            f = backbone(rt.images(x))
        feats.append(f.float())
        labels.append(y.to(rt.device))
    if not feats:
        return torch.empty(0, getattr(backbone, "out_dim", 0), device=rt.device), torch.empty(0, dtype=torch.long, device=rt.device)
    return torch.cat(feats), torch.cat(labels)


def class_means(features: torch.Tensor, labels: torch.Tensor, classes) -> torch.Tensor:
    return torch.stack([features[labels == int(c)].mean(0) for c in classes])


def train_base(cfg: Config, data: FSCILData, hooks: Hooks | None = None, resume: dict[str, Any] | None = None) -> BaseSession:
    """Base-session training with validation-based epoch selection, then prototype replacement.

    `resume` is a state given earlier to `hooks.on_checkpoint` (phase "base"): training
    continues after its epoch with the same weights, optimiser, schedule, loader position
    and best-so-far, so the result equals an uninterrupted run's.
    """
    hooks = hooks or Hooks()
    rt = _Runtime(cfg)
    seed_everything(cfg.seed)
    base = data.sessions[0]
    n_base = len(base.classes)

    backbone = rt.module(create_backbone(cfg.backbone, pretrained=cfg.pretrained))
    # nn.Linear(d, n, bias=False) init, as the official cosine classifier.
    weights = torch.nn.Parameter(torch.empty(n_base, backbone.out_dim, device=rt.device))
    torch.nn.init.kaiming_uniform_(weights, a=math.sqrt(5))
    # m starts at 1.0 (official). The baseline keeps m = 1 fixed.
    margins = torch.ones(n_base, device=rt.device)
    if cfg.learn_margins:
        margins = torch.nn.Parameter(margins)

    decay = [*backbone.parameters(), weights]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    if cfg.learn_margins:
        # Released code: m sits in the same SGD as everything else (same lr; wd 5e-4 pulls it toward 0).
        groups.append({"params": [margins], "lr": cfg.base_lr * cfg.boundary_lr_scale,
                       "weight_decay": cfg.weight_decay if cfg.margin_weight_decay else 0.0})
    opt = torch.optim.SGD(groups, lr=cfg.base_lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
    if cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.base_epochs)
    else:
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)

    loader = make_loader(data, data.train_pool, base.train, train=True, batch_size=cfg.batch_size, shuffle=True, seed=cfg.seed, num_workers=rt.num_workers)
    alpha = cfg.effective_alpha
    best_acc, best_epoch, best_state = -1.0, 0, None
    curve: list[dict[str, float]] = []
    start = 1
    if resume is not None:
        backbone.load_state_dict(resume["backbone"])
        with torch.no_grad():
            weights.copy_(resume["weights"])
            margins.copy_(resume["margins"])
        opt.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
        loader.epoch = resume["loader_epoch"]
        best_acc, best_epoch = resume["best_acc"], resume["best_epoch"]
        best_state = (resume["best_backbone"], resume["best_margins"].to(rt.device))
        curve = list(resume["curve"])
        start = resume["epoch"] + 1
    for epoch in range(start, cfg.base_epochs + 1):
        t0 = time.perf_counter()
        backbone.train()
        if cfg.learn_margins:  # warm-up: m frozen (no gradient, so no momentum either) for the first epochs
            margins.requires_grad_(epoch > cfg.boundary_warmup_epochs)
        lr = opt.param_groups[0]["lr"]
        loss_sum = torch.zeros((), device=rt.device)
        correct = torch.zeros((), device=rt.device)
        seen = 0
        for x, y in loader:
            x, y = rt.images(x), y.to(rt.device)
            with rt.autocast():
                feats = backbone(x)
            logits = boundary_logits(feats.float(), weights, margins, cfg.temperature, absolute=cfg.abs_margin)
            loss = F.cross_entropy(logits, y)
            if alpha:
                loss = loss + alpha * inter_class_constraint(margins, weights, cfg.ic_reduction)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * len(y)
            correct += (logits.argmax(1) == y).sum()
            seen += len(y)
        sched.step()
        where = f"base epoch {epoch}"
        _check_finite("base training loss", loss_sum, where)
        _check_finite("base boundaries m", margins.detach(), where)

        vf, vy = extract_features(backbone, data, data.train_pool, base.val, rt, cfg)
        with torch.no_grad():
            vpred = boundary_logits(vf, weights, margins, cfg.temperature, absolute=cfg.abs_margin).argmax(1)
        val_acc = 100.0 * (vpred == vy).float().mean().item()
        row = {
            "epoch": epoch,
            "train_loss": loss_sum.item() / max(seen, 1),
            "train_acc": 100.0 * correct.item() / max(seen, 1),
            "val_acc": val_acc,
            "lr": lr,
            "epoch_time_s": time.perf_counter() - t0,
            "reused": 0.0,
        }
        row.update({k: v for k, v in boundary_stats(margins, n_base).items() if "novel" not in k})
        curve.append(row)
        if val_acc > best_acc:
            best_acc, best_epoch = val_acc, epoch
            best_state = (copy.deepcopy(backbone.state_dict()), margins.detach().clone())
        if hooks.log:
            hooks.log(
                f"base epoch {epoch}/{cfg.base_epochs}  loss {row['train_loss']:.4f}  train {row['train_acc']:.2f}%  "
                f"val {val_acc:.2f}%  lr {lr:.4g}  m {row['boundary_mean']:.3f} [{row['boundary_min']:.3f}, "
                f"{row['boundary_max']:.3f}], {int(row['boundary_negative'])} < 0  {row['epoch_time_s']:.1f}s"
            )
        if hooks.on_checkpoint and (epoch % max(hooks.checkpoint_every, 1) == 0 or epoch == cfg.base_epochs):
            hooks.on_checkpoint({
                "phase": "base", "epoch": epoch, "backbone": _cpu(backbone.state_dict()),
                "weights": weights.detach().cpu().clone(), "margins": margins.detach().cpu().clone(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "loader_epoch": loader.epoch,
                "best_acc": best_acc, "best_epoch": best_epoch, "best_backbone": _cpu(best_state[0]),
                "best_margins": best_state[1].cpu(), "curve": list(curve),
            })
        if hooks.on_base_epoch:  # after on_checkpoint, so a tracker can attach the state to this report
            hooks.on_base_epoch(dict(row))

    assert best_state is not None
    backbone.load_state_dict(best_state[0])
    best_margins = best_state[1]
    # Prototype replacement: base rows := mean feature of each base class's training images (eval mode, test transform).
    tf, ty = extract_features(backbone, data, data.train_pool, base.train, rt, cfg)
    prototypes = class_means(tf, ty, base.classes)
    return BaseSession(
        backbone_state={k: v.detach().cpu() for k, v in backbone.state_dict().items()},
        prototypes=prototypes.cpu(),
        margins=best_margins.cpu(),
        curve=curve,
        best_epoch=best_epoch,
    )


def _cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def _base_state(b: BaseSession) -> dict[str, Any]:
    return dict(vars(b))  # the dataclass's fields; BaseSession(**state) rebuilds it


FeatureSource = Callable[[str, np.ndarray, Callable[[], tuple[torch.Tensor, torch.Tensor]]], tuple[torch.Tensor, torch.Tensor]]


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
    rt = _Runtime(cfg)
    backbone = rt.module(create_backbone(cfg.backbone))
    backbone.load_state_dict(base_session.backbone_state)
    backbone.eval()
    for p in backbone.parameters():
        p.requires_grad_(False)
    n_base = len(data.sessions[0].classes)

    # Frozen backbone: val/test features of every class, computed once for all sessions.
    all_val = np.concatenate([s.val for s in data.sessions])
    all_test = np.concatenate([s.test for s in data.sessions])
    def frozen(name: str, pool, indices):
        compute = lambda: extract_features(backbone, data, pool, indices, rt, cfg)  # noqa: E731
        if features is None:
            return compute()
        f, y = features(f"{name}-bs{cfg.eval_batch_size}", indices, compute)
        return f.to(rt.device), y.to(rt.device)

    t_features = time.perf_counter()
    val_f, val_y = frozen("val", data.train_pool, all_val)
    test_f, test_y = frozen("test", data.test_pool, all_test)
    t_features = time.perf_counter() - t_features

    weights = base_session.prototypes.to(rt.device)
    margins = base_session.margins.to(rt.device)
    if cfg.abs_base_boundary:  # remedy: no negative m enters the sessions (released code keeps the sign)
        margins = margins.abs()
    rows: list[dict[str, float]] = []
    margins_per_session: list[list[float]] = []
    done = -1
    if resume is not None and resume.get("phase") == "sessions":
        weights, margins = resume["weights"].to(rt.device), resume["margins"].to(rt.device)
        rows, margins_per_session, done = list(resume["rows"]), list(resume["margins_per_session"]), resume["session"]
    for t, sess in enumerate(data.sessions):
        if t <= done:
            continue
        if t > 0:
            shot_f, shot_y = extract_features(backbone, data, data.train_pool, sess.train, rt, cfg)
            weights = torch.cat([weights, class_means(shot_f, shot_y, sess.classes)])
            margins = torch.cat([margins, _new_boundaries(cfg, margins, len(sess.classes))])
            epochs = cfg.effective_finetune_epochs
            if epochs > 0:
                # One augmented view of the shots per epoch, backbone in eval mode (official);
                # views are computed up front with no graph since the backbone gets no gradient.
                views = _augmented_views(backbone, data, sess.train, epochs, rt, cfg, seed=cfg.seed * 1000 + t)
                margins = finetune_boundaries(
                    views, shot_y, weights, margins, len(margins) - len(sess.classes),
                    alpha=cfg.effective_alpha, lr=cfg.finetune_lr, epochs=epochs, temperature=cfg.temperature,
                    ic_reduction=cfg.ic_reduction, absolute=cfg.finetune_abs_boundary,
                )
                _check_finite("novel boundaries m", margins, f"session {t}")
        n_seen = len(weights)
        row: dict[str, float] = {"session": t, "n_classes": n_seen}
        for split, f, y in (("val", val_f, val_y), ("test", test_f, test_y)):
            keep = y < n_seen
            with torch.no_grad():
                pred = boundary_logits(f[keep], weights, margins, cfg.temperature, absolute=cfg.abs_margin).argmax(1)
            for k, v in {**session_accuracies(pred, y[keep], n_base), **prediction_stats(pred, n_base, n_seen)}.items():
                row[f"{split}_{k}"] = v
        row.update(boundary_stats(margins, n_base))
        rows.append(row)
        margins_per_session.append(margins.cpu().tolist())
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
                "phase": "sessions", "session": t, **(base_ref or {"base": _base_state(base_session)}), "weights": weights.cpu(),
                "margins": margins.cpu(), "rows": list(rows), "margins_per_session": list(margins_per_session),
            })
        if hooks.on_session:
            hooks.on_session(dict(row))

    summary: dict[str, float] = {}
    for split in ("val", "test"):
        for k, v in trial_summary([r[f"{split}_acc"] for r in rows]).items():
            summary[f"{split}_{k}"] = v
    summary["test_last_hmean"] = rows[-1]["test_hmean"]
    summary["d_cs"] = class_separation(weights)
    summary["best_base_epoch"] = base_session.best_epoch
    summary["boundary_base_mean"] = rows[-1]["boundary_base_mean"]
    summary["boundary_novel_mean"] = rows[-1]["boundary_novel_mean"]
    summary["boundary_negative"] = rows[-1]["boundary_negative"]
    warnings = collapse_warnings(rows)
    summary["collapse_warning"] = float(bool(warnings))
    if warnings and hooks.log:
        hooks.log("WARNING: " + "; ".join(warnings))
    return TrialResult(
        config=cfg.to_dict(), base_curve=list(base_session.curve), sessions=rows, margins=margins_per_session, summary=summary,
        extra={"features_s": t_features},  # val/test feature extraction (stored by BaseCache.features): bench/bench.py
        warnings=warnings,
    )


def _new_boundaries(cfg: Config, old: torch.Tensor, n_new: int) -> torch.Tensor:
    """Initial m of the new classes (Config.new_margin_init)."""
    if cfg.new_margin_init == "one":
        return torch.ones(n_new, device=old.device)
    return init_new_boundaries(old.abs() if cfg.new_margin_init == "abs_mean" else old, n_new)


def _augmented_views(backbone, data: FSCILData, indices, epochs: int, rt: _Runtime, cfg: Config, seed: int) -> torch.Tensor:
    loader = make_loader(data, data.train_pool, indices, train=True, batch_size=len(indices), shuffle=False, seed=seed, num_workers=rt.num_workers)
    views = []
    with torch.no_grad():
        for _ in range(epochs):
            (x, _y), = list(loader)
            with rt.autocast():
                views.append(backbone(rt.images(x)).float())
    return torch.stack(views)


def run_trial(
    cfg: Config,
    *,
    hooks: Hooks | None = None,
    data: FSCILData | None = None,
    cache: "BaseCache | str | None" = None,
    resume: dict[str, Any] | None = None,
) -> TrialResult:
    """The full pipeline for one config and seed: validate, build data, base session, all sessions.

    With `cache` (a BaseCache or its folder), the base session is loaded when an
    identical one was trained before (see adbs.cache.base_key) and stored
    otherwise; a reused base session replays its per-epoch curve through
    `hooks.on_base_epoch` with reused=1, so curves stay comparable.

    With `resume` (a state from `hooks.on_checkpoint`), the trial continues where
    that state was taken; hooks are called only for epochs/sessions after it.
    """
    from adbs.cache import BaseCache, base_key

    t0 = time.perf_counter()
    hooks = hooks or Hooks()
    cfg.validate()
    data = data if data is not None else build_data(cfg)
    reused, features, base_ref = False, None, None
    cache = None if cache is None else cache if isinstance(cache, BaseCache) else BaseCache(cache)
    key = base_key(cfg, resolve_device(cfg).type)
    if cache is not None:
        features = lambda name, idx, compute: cache.features(key, name, idx, compute)  # noqa: E731
    if resume is not None and resume.get("phase") == "sessions":
        reused = bool(resume.get("base_reused", False))
        if "base" in resume:
            base_session = BaseSession(**resume["base"])
        elif cache is not None:  # the checkpoint refers to the cached base session; retrained if it is gone
            base_session, _ = cache.get_or_train(key, lambda: train_base(cfg, data, Hooks(log=hooks.log)),
                                                 meta={"config": cfg.to_dict()})
            base_ref = {"base_key": key, "base_reused": reused}
        else:  # --no-cache now: retrain it (training is deterministic); later checkpoints carry it whole
            if hooks.log:
                hooks.log(f"base session {resume['base_key']} is not available without the cache; training it again")
            base_session = train_base(cfg, data, Hooks(log=hooks.log))
    elif cache is None:
        base_session = train_base(cfg, data, hooks, resume)
    else:
        base_session, reused = cache.get_or_train(key, lambda: train_base(cfg, data, hooks, resume), meta={"config": cfg.to_dict()})
        base_ref = {"base_key": key, "base_reused": reused}
        if reused:
            if hooks.log:
                hooks.log(f"base session reused from cache {key} (best epoch {base_session.best_epoch})")
            for row in base_session.curve:
                if hooks.on_base_epoch:
                    hooks.on_base_epoch({**row, "reused": 1.0})
    result = run_sessions(cfg, data, base_session, hooks, resume, features, base_ref)
    result.summary["base_reused"] = float(reused)
    result.summary["wall_time_s"] = time.perf_counter() - t0
    return result
