"""One typed config for a whole FSCIL trial, its presets, and strict overrides.

Every field has a one-line docstring (the string literal after it). Derived
values (ways, number of sessions, effective alpha, ...) are computed here and
nowhere else. Unknown keys and wrong types raise `ConfigError` naming the valid
choices, before any compute starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

VARIANTS = ("baseline", "adb", "adb+ic")
SCHEDULES = ("cosine", "milestones")
IC_REDUCTIONS = ("mean", "sum")
NEW_MARGIN_INITS = ("mean", "abs_mean", "one")
DEVICES = ("auto", "cpu", "cuda")
SYNTHETIC_VERSIONS = (1, 2)  # adbs.data.synthetic.RECIPES


# Fields whose default is the released code's boundary handling and whose other values are remedies for
# the collapsed regime (docs/boundary-dynamics.md); a table made with another value says so in its header.
BOUNDARY_REMEDIES = ("new_margin_init", "finetune_abs_boundary", "abs_base_boundary", "boundary_lr_scale",
                     "boundary_warmup_epochs")


class ConfigError(ValueError):
    """A config value or key is invalid; the message says what is allowed."""


@dataclass
class Config:
    # --- data -----------------------------------------------------------------
    dataset: str = "synthetic"
    """Dataset registry name: synthetic (embedded, offline), cifar100, mini_imagenet, cub200."""
    data_root: str | None = None
    """Folder holding the dataset in its community layout (see README); unused by synthetic."""
    index_list: str | None = None
    """Folder with the standard split files session_1.txt.. (the paper's exact 5-shot draws)."""
    ways: int | None = None
    """Novel classes per incremental session; None = the dataset's standard (5, or 10 on CUB200)."""
    shots: int = 5
    """Training images per novel class in each incremental session."""
    sessions: int | None = None
    """Incremental sessions after the base one; None = all novel classes (novel // ways)."""
    split_seed: int = 0
    """Seed of the few-shot draw and of the validation carve-out, separate from `seed`."""
    val_fraction: float = 0.05
    """Share of each base class's training images held out for validation (never trained on)."""
    novel_val_per_class: int = 20
    """Held-out validation images per novel class, taken from its training images not drawn as shots."""
    base_images_per_class: int | None = 80
    """Cap on base-session training images per class, after the validation carve-out (None = all, as the paper presets)."""
    synthetic_seed: int = 0
    """Seed that generates the embedded synthetic benchmark (same seed and version, same images)."""
    synthetic_version: int = 2
    """Embedded benchmark version: 2 (CIFAR-100-like superclasses, calibrated on the baseline) or 1 (the
    original, kept to regenerate earlier tables); see adbs/data/synthetic.py."""

    # --- model ------------------------------------------------------------------
    backbone: str = "convnet"
    """Backbone registry name: convnet, resnet12, resnet18, resnet20."""
    pretrained: str | None = None
    """Path to a local state_dict file to initialise the backbone from (e.g. ImageNet ResNet-18 for CUB200)."""
    temperature: float = 16.0
    """Logit scale T in T * |m_c| * cos(f(x), w_c) (16 in the official code)."""

    # --- method -----------------------------------------------------------------
    variant: str = "adb+ic"
    """baseline (m = 1, no IC, no boundary fine-tuning), adb (learnable m, alpha = 0), adb+ic (full ADBS)."""
    alpha: float = 0.01
    """IC loss weight (official code default 0.01; the paper reports 0.05); used only by adb+ic."""
    ic_reduction: str = "mean"
    """IC over all n^2 ordered pairs: mean (official code) or sum (the paper's Eq.)."""
    abs_margin: bool = True
    """Use |m| in base-session and evaluation logits (official); False uses signed m everywhere."""
    new_margin_init: str = "mean"
    """Initial boundary of a new class: mean (the released code: signed mean of all earlier boundaries),
    abs_mean (mean of their |m|, the magnitude the logits use: the paper's "mean boundary of all old
    classes" when some m are negative) or one."""
    margin_weight_decay: bool = True
    """Apply the base optimizer's weight decay to the boundaries too (official: they share one SGD)."""
    finetune_epochs: int = 10
    """Boundary fine-tuning steps per incremental session (one full-batch step per epoch; 0 = none)."""
    finetune_lr: float = 0.01
    """Learning rate of the incremental boundary fine-tuning SGD."""

    # --- boundary remedies: each default is the released code; docs/boundary-dynamics.md says why ------
    finetune_abs_boundary: bool = False
    """Multiply by |m| in the incremental fine-tuning loop, as evaluation does (released code: the signed m,
    so old classes whose m crossed zero enter it with negative logits)."""
    abs_base_boundary: bool = False
    """Replace the base boundaries by |m| after the base session, before any incremental session (released
    code: the signed m is carried into the sessions, where the new-boundary mean and fine-tuning use it)."""
    boundary_lr_scale: float = 1.0
    """Multiplier of the base-session learning rate for the boundaries m (released code: 1, m shares the
    backbone's SGD and lr)."""
    boundary_warmup_epochs: int = 0
    """Base epochs during which m stays frozen at 1 before it trains (released code: 0, m trains from the
    first step, while predictions are still poor and many m cross zero)."""

    # --- base session training ----------------------------------------------------
    base_epochs: int = 8
    """Epochs of base-session training."""
    base_lr: float = 0.1
    """Initial learning rate of the base-session SGD."""
    schedule: str = "cosine"
    """Learning-rate schedule: cosine (CIFAR100) or milestones (miniImageNet, CUB200)."""
    milestones: tuple[int, ...] = (40, 70, 100)
    """Epochs at which the milestones schedule multiplies the lr by `gamma`."""
    gamma: float = 0.1
    """Multiplicative lr decay at each milestone."""
    batch_size: int = 64
    """Base-session mini-batch size (official code 64; the paper says 128)."""
    momentum: float = 0.9
    """SGD momentum (Nesterov) of the base session."""
    weight_decay: float = 5e-4
    """SGD weight decay of the base session."""

    # --- runtime ------------------------------------------------------------------
    seed: int = 0
    """Training seed (weights init, shuffling, augmentation)."""
    device: str = "auto"
    """auto (cuda when available), cpu or cuda."""
    amp: bool = True
    """Mixed precision (bfloat16 autocast) on GPU; ignored on CPU."""
    num_workers: int | None = None
    """DataLoader worker processes for file-based datasets (0 = load in the main process; None = one per
    torch thread when there are 2 or more, i.e. the trial's CPUs under the study platform). In-memory
    pools (synthetic, cifar100) never start workers."""
    eval_batch_size: int = 128
    """Batch size for feature extraction at evaluation (128 is ~1.5x faster than 512 for the CPU ConvNet:
    bench/bench.py; the GPU presets use 512)."""
    threads: int | None = None
    """torch CPU threads (None = leave torch's default)."""

    # ------------------------------------------------------------------------------
    # derived values: computed here only
    @property
    def learn_margins(self) -> bool:
        return self.variant != "baseline"

    @property
    def effective_alpha(self) -> float:
        return self.alpha if self.variant == "adb+ic" else 0.0

    @property
    def effective_finetune_epochs(self) -> int:
        return self.finetune_epochs if self.learn_margins else 0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["milestones"] = list(self.milestones)
        return d

    def replace(self, **overrides: Any) -> "Config":
        return from_dict({**self.to_dict(), **overrides})

    def validate(self) -> "Config":
        """Range checks that need no data; dataset-dependent checks live in adbs.data."""
        from adbs.backbones import BACKBONES  # late import: backbones import torch

        from adbs.data import DATASETS

        _choice("dataset", self.dataset, tuple(DATASETS))
        _choice("backbone", self.backbone, tuple(BACKBONES))
        _choice("variant", self.variant, VARIANTS)
        _choice("schedule", self.schedule, SCHEDULES)
        _choice("ic_reduction", self.ic_reduction, IC_REDUCTIONS)
        _choice("new_margin_init", self.new_margin_init, NEW_MARGIN_INITS)
        _choice("device", self.device, DEVICES)
        _choice("synthetic_version", self.synthetic_version, SYNTHETIC_VERSIONS)
        _positive("shots", self.shots)
        _positive("base_epochs", self.base_epochs)
        _positive("base_lr", self.base_lr)
        _positive("batch_size", self.batch_size)
        _positive("eval_batch_size", self.eval_batch_size)
        _positive("temperature", self.temperature)
        _positive("novel_val_per_class", self.novel_val_per_class)
        if self.ways is not None:
            _positive("ways", self.ways)
        if self.sessions is not None and self.sessions < 0:
            raise ConfigError(f"sessions must be >= 0 or None (all novel classes), got {self.sessions}")
        if self.base_images_per_class is not None:
            _positive("base_images_per_class", self.base_images_per_class)
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(
                f"val_fraction must be in (0, 1), got {self.val_fraction}: a validation split is "
                "required because selection, pruning and search never use test data"
            )
        if self.variant == "adb+ic" and not self.alpha > 0:
            raise ConfigError(
                f"alpha must be > 0 for variant 'adb+ic', got {self.alpha}; "
                "use variant='adb' for learnable boundaries without IC"
            )
        if self.alpha < 0:
            raise ConfigError(f"alpha must be >= 0, got {self.alpha}")
        if not (self.boundary_lr_scale >= 0 and math.isfinite(self.boundary_lr_scale)):
            raise ConfigError(f"boundary_lr_scale must be a finite number >= 0, got {self.boundary_lr_scale}")
        if not 0 <= self.boundary_warmup_epochs <= self.base_epochs:
            raise ConfigError(f"boundary_warmup_epochs must be in 0..base_epochs ({self.base_epochs}), "
                              f"got {self.boundary_warmup_epochs}")
        if self.finetune_epochs < 0:
            raise ConfigError(f"finetune_epochs must be >= 0, got {self.finetune_epochs}")
        if self.learn_margins and self.finetune_epochs > 0 and not self.finetune_lr > 0:
            raise ConfigError(f"finetune_lr must be > 0, got {self.finetune_lr}")
        for name in ("momentum", "weight_decay", "gamma"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"num_workers must be >= 0, got {self.num_workers}")
        if self.threads is not None:
            _positive("threads", self.threads)
        if self.dataset != "synthetic" and not self.data_root:
            raise ConfigError(
                f"dataset '{self.dataset}' needs data_root (--data-root DIR): the folder holding it "
                "in the layout the README describes; the default dataset 'synthetic' needs none"
            )
        return self


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; valid choices: {', '.join(map(str, choices))}")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be > 0, got {value}")


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Config)}
_HINTS = typing.get_type_hints(Config)


def field_doc(name: str) -> str:
    """The docstring of a Config field, read from this file's source."""
    return _FIELD_DOCS.get(name, "")


def _read_field_docs() -> dict[str, str]:
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Config))
    docs: dict[str, str] = {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    for prev, node in zip(body, body[1:]):
        if (
            isinstance(prev, ast.AnnAssign)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[prev.target.id] = " ".join(node.value.value.split())  # type: ignore[attr-defined]
    return docs


_FIELD_DOCS = _read_field_docs()


def coerce(name: str, value: Any) -> Any:
    """Check/convert one override to the field's type; strings from a CLI are parsed."""
    if name not in FIELDS:
        close = difflib.get_close_matches(name, FIELDS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"unknown config key {name!r}{hint}; valid keys: {', '.join(FIELDS)}")
    return _coerce_type(name, _HINTS[name], value)


def _coerce_type(name: str, tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce_type(name, a, value)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{name}: bad value {value!r}")
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(tp)
        if isinstance(value, str):
            value = [v for v in value.replace(",", " ").split() if v]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of {inner.__name__}, got {value!r}")
        return tuple(_coerce_type(name, inner, v) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ConfigError(f"{name} must be a bool (true/false), got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be an int, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        number = None
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise ConfigError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(number):  # nan/inf would only fail later, inside every trial
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {value!r}")
    raise ConfigError(f"{name}: unsupported type {tp}")


def from_dict(overrides: dict[str, Any] | None = None) -> Config:
    """Config from defaults plus overrides; unknown keys and wrong types raise."""
    overrides = dict(overrides or {})
    return Config(**{k: coerce(k, v) for k, v in overrides.items()})


# Presets hold only what differs from the defaults (the defaults are the CPU
# setting on the embedded benchmark). Paper presets follow the official code's
# per-dataset defaults (method.md, "Per-dataset defaults").
PRESETS: dict[str, dict[str, Any]] = {
    # Default CPU setting: embedded benchmark v2, small ConvNet, capped base images. One departure from the
    # released code: on benchmark v2 the released recipe never predicts a novel class (novel accuracy 0.00 in
    # every session); studies/boundary.py ranks the remedies by validation average accuracy, and lr_scale=0.1
    # ties with all remedies together (docs/boundary-dynamics.md). Tables made with it say so in their header.
    "cpu": {"boundary_lr_scale": 0.1},
    # Seconds-long end-to-end run for tests and --smoke.
    "smoke": {
        "base_epochs": 2,
        "base_images_per_class": 12,
        "novel_val_per_class": 5,
        "sessions": 2,
        "finetune_epochs": 2,
    },
    # (base_lr 0.1 cosine, fine-tuning 10 epochs at lr 0.01 are the defaults already)
    "cifar100": {
        "eval_batch_size": 512,
        "dataset": "cifar100",
        "backbone": "resnet12",
        "base_epochs": 100,
        "base_images_per_class": None,
    },
    "mini_imagenet": {
        "eval_batch_size": 512,
        "dataset": "mini_imagenet",
        "backbone": "resnet12",
        "base_epochs": 120,
        "schedule": "milestones",  # milestones 40/70/100 and base_lr 0.1 are the defaults
        "finetune_epochs": 6,
        "finetune_lr": 0.1,
        "base_images_per_class": None,
    },
    "cub200": {
        "eval_batch_size": 512,
        "dataset": "cub200",
        "backbone": "resnet18",
        "base_epochs": 120,
        "base_lr": 0.002,
        "schedule": "milestones",
        "milestones": (60, 80, 100),
        "finetune_epochs": 1,
        "base_images_per_class": None,
    },
}


def preset(name: str, **overrides: Any) -> Config:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return from_dict({**PRESETS[name], **overrides})


def resolve(preset_name: str = "cpu", study_defaults: dict[str, Any] | None = None,
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one precedence of config values: preset < a study's defaults < overrides; all coerced.

    `overrides` are what the user typed (a study's --dataset/--data-root/--set, or the field options of
    `python -m adbs.run`). A `dataset` override naming a paper preset while the preset is the default
    `cpu` picks that paper preset (`--dataset cifar100` means the paper's CIFAR100 settings). A study's
    defaults apply to the `cpu` preset only: they fit the CPU budget and never change a paper preset.
    Returns the overrides dict a Config is built from (`from_dict`), so searched fields can still be added.
    """
    overrides = {k: coerce(k, v) for k, v in (overrides or {}).items()}
    if preset_name not in PRESETS:
        raise ConfigError(f"unknown preset {preset_name!r}; valid presets: {', '.join(PRESETS)}")
    if preset_name == "cpu" and overrides.get("dataset") in PRESETS:
        preset_name = overrides["dataset"]
    out = dict(PRESETS[preset_name])
    if preset_name == "cpu":
        out.update(study_defaults or {})
    out.update(overrides)
    return {k: coerce(k, v) for k, v in out.items()}
