"""What a trial keeps: a trained base session (cached and checkpointed), its checkpoints and its result.

Plain dataclasses of tensors and lists, imported by the loops (adbs/loops.py), the trial
(adbs/trial.py) and the base-session cache (adbs/cache.py) alike, so none of those imports another
to read or write them.

Checkpoints and base-cache entries are saved as plain dicts (tensors, lists, numbers: torch.save without
pickled classes), written by `to_dict` and read back by `read_checkpoint` / `read_base_state` here and
nowhere else. Each carries FORMAT; a dict of another format (e.g. one written before checkpoints carried
a format) is refused with a `StateFormatError` that says what to do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

FORMAT = 2
"""Format of checkpoints and base-cache entries; 1 = the untyped dicts written before it existed."""


class StateFormatError(ValueError):
    """A checkpoint or base-cache entry written in another format than this code reads."""


class CheckpointKeyError(ValueError):
    """A trial checkpoint of another configuration than the trial resumed from it (adbs/trial.py: checkpoint_key)."""


@dataclass
class BaseSession:
    """Everything the incremental sessions need from a trained base session."""

    backbone_state: dict[str, torch.Tensor]
    prototypes: torch.Tensor  # (base rows, d): the classifier rows the sessions start from
    boundaries: torch.Tensor  # (base rows,): learned base boundaries
    curve: list[dict[str, float]]
    best_epoch: int
    host_state: dict[str, torch.Tensor] = field(default_factory=dict)
    """State of the host's parts besides the backbone that its session features need
    (adbs/hosts: Host.session_state)."""


def base_state(b: BaseSession) -> dict[str, Any]:
    """The saved form of a base session: its fields and the format (`read_base_state` rebuilds it)."""
    return {"format": FORMAT, **vars(b)}


def read_base_state(state: dict[str, Any]) -> BaseSession:
    """The base session of a saved form `base_state` wrote; another format raises StateFormatError."""
    _check_format(state, "base session",
                  "a base-session cache entry of another format is discarded and trained again (adbs/cache.py)")
    return BaseSession(**{k: v for k, v in state.items() if k != "format"})


@dataclass
class BaseCheckpoint:
    """The base session's training after `epoch` (1-based, counted over all base phases): enough to continue it
    bit-identically (adbs/loops.py: train_base)."""

    epoch: int
    model: dict[str, torch.Tensor]
    boundaries: torch.Tensor
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    loader_epoch: int
    """The training loader's position (epochs it has run); resume derives it from `epoch` and the phases, this
    records it for inspection."""
    best_acc: float
    best_epoch: int
    best_model: dict[str, torch.Tensor] | None
    best_boundaries: torch.Tensor | None
    curve: list[dict[str, float]]

    phase = "base"

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "phase": self.phase, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass
class SessionCheckpoint:
    """The incremental sessions after session `session` (0 = the base session's evaluation)
    (adbs/sessions.py: run_sessions). The base session is in `base`, or in the base-session cache under `base_key`."""

    session: int
    weights: torch.Tensor
    boundaries: torch.Tensor
    rows: list[dict[str, float]]
    boundaries_per_session: list[list[float]]
    session_model: dict[str, torch.Tensor] | None
    """The host's model when it trained in a session (its features changed), else None."""
    base: BaseSession | None = None
    base_key: str | None = None
    base_reused: bool = False

    phase = "sessions"

    def to_dict(self) -> dict[str, Any]:
        out = {"format": FORMAT, "phase": self.phase, "session": self.session, "weights": self.weights,
               "boundaries": self.boundaries, "rows": self.rows, "boundaries_per_session": self.boundaries_per_session,
               "session_model": self.session_model}
        if self.base is not None:
            out["base"] = base_state(self.base)
        else:
            out.update(base_key=self.base_key, base_reused=self.base_reused)
        return out


Checkpoint = BaseCheckpoint | SessionCheckpoint


def read_checkpoint(state: dict[str, Any] | Checkpoint) -> Checkpoint:
    """The checkpoint of a dict `to_dict` wrote (a checkpoint is returned as it is); a dict of another format
    raises StateFormatError saying what to do."""
    if isinstance(state, (BaseCheckpoint, SessionCheckpoint)):
        return state
    _check_format(state, "trial checkpoint",
                  "start the trial again without it (the same numbers: training is deterministic), or finish it "
                  "with the version of adbs that wrote it")
    values = {k: v for k, v in state.items() if k not in ("format", "phase", "key")}  # key: adbs/trial.py
    if state.get("phase") == BaseCheckpoint.phase:
        return BaseCheckpoint(**values)
    if state.get("phase") == SessionCheckpoint.phase:
        if "base" in values:
            values["base"] = read_base_state(values["base"])
        return SessionCheckpoint(**values)
    raise StateFormatError(f"trial checkpoint of unknown phase {state.get('phase')!r} (valid: 'base', 'sessions')")


def _check_format(state: Any, what: str, fix: str) -> None:
    if not isinstance(state, dict):
        raise StateFormatError(f"a {what} is a dict, not a {type(state).__name__}")
    got = state.get("format", 1)
    if got != FORMAT:
        raise StateFormatError(f"this {what} has format {got!r} (written by another version of adbs; format 1 = "
                               f"before checkpoints carried a format) and this version reads format {FORMAT}: {fix}")


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
