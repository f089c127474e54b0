"""What the two loops of adbs/loops.py (the base session) and adbs/sessions.py (the incremental sessions) share:
the hooks a running trial calls, its numerical check, seeding, feature extraction and the class scores.

Hooks receive plain dicts (see `Hooks`); no tracking library is imported here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from adbs.boundary import boundary_logits
from adbs.config import Config
from adbs.data import FSCILData, make_loader
from adbs.hosts.interface import Host
from adbs.runtime import Runtime

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
    """Receives a resumable trial state, the saved form of an adbs/state.py checkpoint (plain tensors/lists, with
    its format): every `checkpoint_every` base epochs, at the end of the base session and after every
    incremental session. Pass it back as run_trial(..., resume=state) to continue bit-identically."""
    checkpoint_every: int = 5
    """Base epochs between checkpoints (the last base epoch always checkpoints)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def check_finite(what: str, value: torch.Tensor, where: str) -> None:
    if not torch.isfinite(value).all():
        raise NumericalError(f"{what} became NaN/inf at {where}")


def read(values: dict[str, torch.Tensor], *, at_once: bool) -> dict[str, float]:
    """The values of 0-d tensors on the host, as Python floats: in one transfer (at_once: one wait for the GPU's
    queue instead of one per value) or each on its own. The same floats either way: float32 and integer counts
    below 2**53 widen to float64 exactly, as `.item()` gives them."""
    if not at_once:
        return {k: float(v.item()) for k, v in values.items()}
    return dict(zip(values, torch.stack([v.detach().double() for v in values.values()]).tolist()))


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


def class_scores(host: Host, features: torch.Tensor, rows: torch.Tensor, boundaries: torch.Tensor,
                 cfg: Config) -> torch.Tensor:
    """Class scores of features (N, copies, d) against rows with boundaries: the host's prediction rule."""
    logits = boundary_logits(features.flatten(0, 1), rows, boundaries, host.session_scale, absolute=cfg.abs_boundary)
    return host.predict(logits.view(len(features), host.copies, len(rows)))



def cpu_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()}
