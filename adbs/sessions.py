"""The incremental sessions of one trial, for any host, with ADBS applied by config (docs/method.md, "ADB", "IC").

Session t (`run_sessions`): any training the host does in a session, new rows from the shots, new boundaries at the
mean of the old ones, fine-tuned alone (`finetune_boundaries`) on the shots' augmented features, evaluation over all
seen classes with T * |m| * cos and the host's prediction rule.

Without a host that trains in the sessions the backbone is frozen after the base session, so val/test features are
computed once and every session evaluates on them (identical to re-running the backbone each session, as the
official code does, but cheaper).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from adbs.backbones import create_backbone
from adbs.boundary import finetune_boundaries, init_new_boundaries
from adbs.config import Config
from adbs.data import FSCILData, make_loader
from adbs.hosts import create_host
from adbs.hosts.interface import Host, joint_labels
from adbs.metrics import (
    boundary_stats,
    class_separation,
    collapse_warnings,
    embedding_sample,
    novel_image_geometry,
    prediction_stats,
    prototype_geometry,
    session_accuracies,
    trial_summary,
)
from adbs.runtime import Runtime
from adbs.state import BaseSession, SessionCheckpoint, TrialResult, read_checkpoint
from adbs.trainer import Hooks, check_finite, class_scores, cpu_state, extract_features

Features = tuple[torch.Tensor, torch.Tensor]
FeatureSource = Callable[[str, np.ndarray, Callable[[], Features]], Features]


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


# -- the incremental sessions: for each session: learn its classes, evaluate, checkpoint -----------------------
def run_sessions(
    cfg: Config, data: FSCILData, base_session: BaseSession, hooks: Hooks | None = None,
    resume: SessionCheckpoint | dict[str, Any] | None = None, features: FeatureSource | None = None,
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
    checkpoint = None if resume is None else read_checkpoint(resume)
    run = _SessionsRun.start(cfg, data, base_session,
                             checkpoint if isinstance(checkpoint, SessionCheckpoint) else None, features)
    for t, sess in enumerate(data.sessions):
        if t <= run.done:  # finished before the checkpoint resumed from
            continue
        if t > 0:
            run.learn(t, sess)
        row = run.evaluate(t)
        _log_session(hooks, t, row)
        if hooks.on_checkpoint:
            hooks.on_checkpoint(run.checkpoint(t, base_session, base_ref).to_dict())
        if hooks.on_session:
            hooks.on_session(dict(row))
    return run.result(base_session, hooks)


@dataclass
class _SessionsRun:
    """The incremental sessions in progress: the host's session model, the classifier's rows and boundaries, the
    evaluation features, and what a checkpoint saves (`done`: the last finished session)."""

    cfg: Config
    data: FSCILData
    rt: Runtime
    host: Host
    model: torch.nn.Module
    frozen: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    weights: torch.Tensor
    boundaries: torch.Tensor
    rows: list[dict[str, float]] = field(default_factory=list)
    boundaries_per_session: list[list[float]] = field(default_factory=list)
    done: int = -1
    trained: bool = False  # has the host trained in a session (so its session model differs from the base one)?
    evaluation: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    features_s: float = 0.0

    @classmethod
    def start(cls, cfg: Config, data: FSCILData, base_session: BaseSession, resume: SessionCheckpoint | None,
              features: FeatureSource | None) -> _SessionsRun:
        # A host of its own, not train_base's: the sessions start from the BaseSession alone, whether it was just
        # trained or loaded from the base-session cache, so both paths give the same numbers (adbs/cache.py).
        rt = Runtime(cfg)
        host = create_host(cfg, data, rt)
        model = session_model(host, cfg, rt, base_session)

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
        run = cls(cfg, data, rt, host, model, frozen, weights, boundaries)
        if resume is not None:
            run.weights, run.boundaries = resume.weights.to(rt.device), resume.boundaries.to(rt.device)
            run.rows, run.boundaries_per_session = list(resume.rows), list(resume.boundaries_per_session)
            run.done = resume.session
            if resume.session_model is not None:
                model.load_state_dict(resume.session_model)
                run.trained = True
        t0 = time.perf_counter()
        run.extract_evaluation(cached=not run.trained)
        run.features_s = time.perf_counter() - t0
        return run

    def extract_evaluation(self, cached: bool) -> None:
        """Val/test features of every class under the session model (the frozen backbone's: computed once)."""
        all_val = np.concatenate([s.val for s in self.data.sessions])
        all_test = np.concatenate([s.test for s in self.data.sessions])
        self.evaluation["val"] = self.frozen("val", self.data.train_pool, all_val, cached=cached)
        self.evaluation["test"] = self.frozen("test", self.data.test_pool, all_test, cached=cached)

    def learn(self, t: int, sess) -> None:
        """Session t's training: the host's own, the new classes' rows, their boundaries, then ADBS's fine-tuning."""
        cfg, host = self.cfg, self.host
        if host.session_step(self.model, t):  # the host trained: its features of every image changed
            self.trained = True
            self.extract_evaluation(cached=False)
        shot_f, shot_y = extract_features(host, self.model, self.data, self.data.train_pool, sess.train, self.rt, cfg)
        new_rows = host.rows(shot_f, shot_y, sess.classes)
        self.weights = torch.cat([self.weights, new_rows])
        self.boundaries = torch.cat([self.boundaries, new_boundaries(cfg, self.boundaries, len(new_rows))])
        epochs = cfg.effective_finetune_epochs
        if epochs > 0:
            # One augmented view of the shots per epoch, backbone in eval mode (official);
            # views are computed up front with no graph since the backbone gets no gradient.
            views = _augmented_views(host, self.model, self.data, sess.train, epochs, self.rt, cfg,
                                     seed=cfg.seed * 1000 + t)
            self.boundaries = finetune_boundaries(
                views, joint_labels(shot_y, host.copies), self.weights, self.boundaries,
                len(self.boundaries) - len(new_rows), alpha=cfg.effective_alpha, lr=cfg.finetune_lr, epochs=epochs,
                temperature=host.session_scale, ic_reduction=cfg.ic_reduction, absolute=cfg.finetune_abs_boundary,
            )
            check_finite("novel boundaries m", self.boundaries, f"session {t}")

    def evaluate(self, t: int) -> dict[str, float]:
        """Session t's row: accuracies over all seen classes, prediction shares and boundary statistics."""
        n_base, n_rows = len(self.data.sessions[0].classes), len(self.weights)
        n_seen = n_rows // self.host.copies
        row: dict[str, float] = {"session": t, "n_classes": n_seen}
        for split in ("val", "test"):
            f, y = self.evaluation[split]
            keep = y < n_seen
            with torch.no_grad():
                pred = class_scores(self.host, f[keep], self.weights, self.boundaries, self.cfg).argmax(1)
            for k, v in {**session_accuracies(pred, y[keep], n_base), **prediction_stats(pred, n_base, n_seen)}.items():
                row[f"{split}_{k}"] = v
        row.update(boundary_stats(self.boundaries, n_base * self.host.copies))
        self.rows.append(row)
        self.boundaries_per_session.append(self.boundaries.cpu().tolist())
        return row

    def checkpoint(self, t: int, base_session: BaseSession, base_ref: dict[str, Any] | None) -> SessionCheckpoint:
        carried = base_ref or {"base": base_session}
        return SessionCheckpoint(
            session=t, weights=self.weights.cpu(), boundaries=self.boundaries.cpu(), rows=list(self.rows),
            boundaries_per_session=list(self.boundaries_per_session),
            session_model=cpu_state(self.model.state_dict()) if self.trained else None, **carried)

    def result(self, base_session: BaseSession, hooks: Hooks) -> TrialResult:
        """The trial's result: its sessions' rows and the summary over them."""
        rows, weights, copies, cfg = self.rows, self.weights, self.host.copies, self.cfg
        n_base = len(self.data.sessions[0].classes)
        test_f, test_y = self.evaluation["test"]
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
        for k in ("boundary_base_mean", "boundary_novel_mean", "boundary_negative"):
            summary[k] = rows[-1][k]
        warnings = collapse_warnings(rows)
        summary["collapse_warning"] = float(bool(warnings))
        if warnings and hooks.log:
            hooks.log("WARNING: " + "; ".join(warnings))
        # val/test feature extraction (BaseCache.features): bench/bench.py
        extra: dict[str, Any] = {"features_s": self.features_s}
        if cfg.keep_embeddings:  # the paper's t-SNE and prototype-similarity figures (adbs_lab/results/figures.py draws them)
            extra["embeddings"] = embedding_sample(test_f[:, 0], test_y, rows0, n_base)
        return TrialResult(
            config=cfg.to_dict(), base_curve=list(base_session.curve), sessions=rows,
            boundaries=self.boundaries_per_session, summary=summary, extra=extra, warnings=warnings,
        )


def _log_session(hooks: Hooks, t: int, row: dict[str, float]) -> None:
    if hooks.log:
        hooks.log(
            f"session {t}: {row['n_classes']} classes  val {row['val_acc']:.2f}%  test {row['test_acc']:.2f}% "
            f"(base {row['test_base_acc']:.2f}, novel {row['test_novel_acc']:.2f}; "
            f"{row['test_pred_novel_share']:.1f}% of predictions novel, "
            f"{int(row['test_unpredicted_classes'])} classes never predicted)  "
            f"m < 0: {int(row['boundary_negative'])}, |m| base {row['boundary_base_abs_mean']:.2f} "
            f"[{row['boundary_base_abs_min']:.2f}, {row['boundary_base_abs_max']:.2f}]"
            + (f", novel {row['boundary_novel_abs_mean']:.2f}" if t else "")
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
