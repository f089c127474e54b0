"""What a trial keeps: a trained base session (cached and checkpointed) and a trial's result.

Plain dataclasses of tensors and lists, imported by the loops (adbs/loops.py), the trial
(adbs/trial.py) and the base-session cache (adbs/cache.py) alike, so none of those imports another
to read or write them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass
class BaseSession:
    """Everything the incremental sessions need from a trained base session."""

    backbone_state: dict[str, torch.Tensor]
    prototypes: torch.Tensor  # (base rows, d): the classifier rows the sessions start from
    boundaries: torch.Tensor  # (base rows,): learned base boundaries
    curve: list[dict[str, float]]
    best_epoch: int
    host_state: dict[str, torch.Tensor] = field(default_factory=dict)
    """State of the host's parts besides the backbone that its session features need (adbs/hosts: Host.session_state)."""


def base_state(b: BaseSession) -> dict[str, Any]:
    """The saved form of a base session: its fields (BaseSession(**state) rebuilds it)."""
    return dict(vars(b))


@dataclass
class TrialResult:
    config: dict[str, Any]
    base_curve: list[dict[str, float]]
    sessions: list[dict[str, float]]
    boundaries: list[list[float]]
    summary: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Signs of the collapsed boundary regime (adbs.metrics.collapse_warnings); empty when none."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
