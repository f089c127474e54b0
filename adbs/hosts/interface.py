"""The host interface: what a host method supplies (`Host`) and what the trainer hands it (`Head`, `Step`, `Phase`);
the registry that finds the hosts by name is adbs/hosts/__init__.py.

What a host supplies and what the trainer (adbs/loops.py) does with it
----------------------------------------------------------------------
A host supplies its base-session parts (`build`: the backbone plus its heads, projectors, key encoders;
one `head` of classification rows), its views and base loss (`base_step`, inside one or more base
`phases`), how rows of new classes are made (`rows`, on the features `embed` gives), any training in an
incremental session (`session_step`), and how row logits become class scores (`predict`).

ADBS is not part of any host. The trainer owns one boundary m per row of the host's head and applies the
four functions of the plug-in API (adbs/boundary.py) to it, for every host alike, as `Config.variant`
says: `boundary_logits` in the `Head` the host's loss calls, `inter_class_constraint` over the head's rows
added to the host's loss, `init_new_boundaries` for each new row, `finetune_boundaries` on the shots'
features in every session. With variant=baseline, m = 1 stays fixed and none of it changes the host.

Rows and copies. A host may classify every image under several copies (SAVC's fantasy rotations:
`copies` = M). Its rows are then (class, copy) pairs in class-major order, row c * M + j for class c under
copy j; features of an image list are (N, M, d) and shot labels become joint labels y * M + j. A host
with one copy (baseline, ALICE) has one row per class.

Randomness. The trainer seeds everything and hands `base_step` a torch.Generator made from (seed, epoch,
batch): a host draws its augmentations from it and from nothing else, so a trial resumed from a
checkpoint continues bit-identically.

Adding a host: adbs/hosts/__init__.py says which files (one, two with options of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import torch

from adbs.boundary import boundary_logits
from adbs.fields import parse_options
from adbs.hosts import options_class

if TYPE_CHECKING:  # annotations only: the config package imports the registry and options of adbs/hosts/ (adbs/fields.py)
    from adbs.config import Config
    from adbs.data import DatasetSpec, FSCILData
    from adbs.runtime import Runtime


@dataclass
class Head:
    """The host's classification rows with ADBS's boundaries: logits T * |m_c| * cos(f, w_c).

    `weights` are the host's rows (trained in the base session), `boundaries` one boundary m per row, owned
    by the trainer (1 and fixed without ADBS), `scale` the host's logit scale (T, or ALICE's s).
    """

    weights: torch.Tensor
    boundaries: torch.Tensor
    scale: float
    absolute: bool = True

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        return boundary_logits(features.float(), self.weights, self.boundaries, self.scale, absolute=self.absolute)


@dataclass
class Step:
    """What a host's base step returns: its loss (without ADBS's IC, which the trainer adds) and the class
    scores with their targets for the training accuracy."""

    loss: torch.Tensor
    scores: torch.Tensor
    targets: torch.Tensor


@dataclass
class Phase:
    """One phase of the base session: `epochs` epochs of `step` on the base classes.

    Most hosts have one phase with Config's optimiser and schedule; a host with several (e.g. a
    pretraining phase before the base phase) lists them, each with the parameters it trains and, if it
    needs one, its own optimiser (`optimizer(param_groups) -> (optimizer, scheduler)`), batch size and a
    `start` hook. `param_groups` is [{"params": the phase's trainable parameters}] followed by ADBS's boundary
    group when the boundaries are learned, its lr and weight decay already set (adbs/loops.py:
    BaseADBS.param_groups): a host's optimiser adds it as it is (OrCo's alignment phase), or leaves it out (a
    phase with no classifier for the boundaries to act on). The best epoch is picked on validation accuracy
    among the epochs of phases with `select=True`.
    """

    name: str
    epochs: int
    step: Callable[..., Step]
    trainable: Callable[[torch.nn.Module], list[torch.nn.Parameter]] | None = None
    optimizer: Callable[[list[dict[str, Any]]], tuple[Any, Any]] | None = None
    select: bool = True
    start: Callable[[torch.nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]], None] | None = None
    """Called once before the phase's first epoch as start(model, base_features) (e.g. OrCo fixes its pseudo-targets
    from the base class means there); what it does must live in the model's state, since a trial resumed inside
    the phase does not call it again."""
    batch_size: int | None = None
    """Base images per batch in this phase; None = Config.batch_size (a phase with its own batch size gets its
    own loader, whose shuffles are fixed by the seed and the phase's epoch)."""


class Host:
    """The parts of an FSCIL method the trainer calls; each host file overrides them in reading order.

    Defaults are the plain cosine-prototype method (one copy per image, one base phase with Config's
    optimiser, rows = class means, no incremental training, class score = row logit).
    """

    name: ClassVar[str]
    """The host's name, the name of its module in adbs/hosts/ (its options: adbs/hosts/<name>_options.py)."""
    copies: ClassVar[int] = 1
    """Copies of each image the host classifies (rows per class; SAVC's fantasy transforms)."""
    augmented_batches: ClassVar[bool] = True
    """Base batches come with the dataset's train augmentation (True) or as test-transformed images the
    host augments itself in `base_step` (False)."""

    @classmethod
    def check_dataset(cls, options: Any, spec: "DatasetSpec") -> None:
        """Checks of the host's options against the dataset's spec (ConfigError naming both), before any compute:
        Config.validate runs it (adbs/config/checks.py), so a run, its dry run and a study's every configuration
        are refused before they start. None here."""

    def __init__(self, cfg: Config, data: "FSCILData", rt: "Runtime"):
        self.cfg, self.data, self.rt = cfg, data, rt
        self.opt: Any = options_class(self.name)(**parse_options(cfg.host_options))
        self.n_base = data.base_classes

    # -- parts -------------------------------------------------------------------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        """The base-session model: a module with `backbone` and `head` (rows x features) at least."""
        raise NotImplementedError

    @property
    def scale(self) -> float:
        """Logit scale of the head and of every session's classifier."""
        return self.cfg.temperature

    @property
    def session_scale(self) -> float:
        """Logit scale of the sessions' classifier (its boundary fine-tuning and evaluation): the head's."""
        return self.scale

    @property
    def ic_rows(self) -> int | None:
        """Head rows IC runs over (the first ones); None = every row."""
        return None

    @property
    def base_rows(self) -> int:
        """Head rows of the base classes: they and their m enter the sessions (the first rows)."""
        return self.n_base * self.copies

    def phases(self) -> list[Phase]:
        return [Phase("base", self.cfg.base_epochs, self.base_step)]

    # -- views and base loss -----------------------------------------------------------------------
    def base_step(self, model: torch.nn.Module, head: Head, x: torch.Tensor, y: torch.Tensor,
                  g: torch.Generator) -> Step:
        raise NotImplementedError

    def val_classifier(self, model: torch.nn.Module, head: Head,
                       base_features: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, m) the base session is validated with after each epoch: the head's base rows.

        `base_features()` gives the `embed` features and labels of the base training images, for hosts
        that classify by class means (ALICE).
        """
        n = self.base_rows
        return head.weights[:n].detach(), head.boundaries[:n].detach()

    # -- features and rows of new classes ----------------------------------------------------------
    def embed(self, model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """Features the sessions classify, (B, copies, d), in eval mode."""
        return model.backbone(x).unsqueeze(1)

    def rows(self, features: torch.Tensor, labels: torch.Tensor, classes) -> torch.Tensor:
        """Classifier rows of `classes` from features (N, copies, d): one class mean per (class, copy)."""
        return copy_means(features, labels, classes)

    def session_state(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """State of the parts besides the backbone that `embed` needs in the sessions (none here)."""
        return {}

    # -- incremental sessions ----------------------------------------------------------------------
    def session_step(self, model: torch.nn.Module, session: int) -> bool:
        """Training in incremental session `session` (its shots: self.data.sessions[session].train), before its
        rows are made; True when it changed what `embed` computes (the trainer then recomputes the evaluation
        features and checkpoints the model). None here."""
        return False

    # -- prediction --------------------------------------------------------------------------------
    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        """Class scores (N, classes) from row logits (N, copies, rows)."""
        return logits[:, 0]


def copy_means(features: torch.Tensor, labels: torch.Tensor, classes) -> torch.Tensor:
    """Mean feature of each (class, copy) in class-major order: (len(classes) * copies, d)."""
    if features.shape[1] == 1:  # one copy: the (N, d) means, exactly as the released prototype replacement
        return torch.stack([features[labels == int(c), 0].mean(0) for c in classes])
    return torch.cat([features[labels == int(c)].mean(0) for c in classes])


def copy_average(logits: torch.Tensor) -> torch.Tensor:
    """Class scores from (N, M, C * M) row logits: the mean over copies j of copy j's logit for row c*M + j.

    SAVC's test-time rule (zysong0113/SAVC models/savc/helper.py: test, `joint_preds[j::m, j::m] / m`).
    """
    n, m, rows = logits.shape
    return logits.view(n, m, rows // m, m).diagonal(dim1=1, dim2=3).mean(-1)


def joint_labels(y: torch.Tensor, copies: int) -> torch.Tensor:
    """Labels of the copies of each image, copy-minor: y * M + j (the row of class y under copy j)."""
    return (y[:, None] * copies + torch.arange(copies, device=y.device)).flatten()
