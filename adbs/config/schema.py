"""The schema: one typed config for a whole FSCIL trial, its fields, derived values and checks.

Every field has a one-line docstring (the string literal after it) and declares whether it shapes the base
session: `Base[T]` (part of the base-session cache key, adbs/cache.py) or `NotBase[T]` (acts only on incremental
sessions, on speed or on what is reported). tests/adbs/config/test_config.py fails for a field that declares neither, so a
new field cannot silently stay out of the key. Derived values (effective alpha, ...) are computed here and
nowhere else. Unknown keys and wrong types raise `ConfigError` naming the valid choices, before any compute starts.

Host methods (adbs/hosts/) are chosen by `host`; a host's own options live beside it as a small dataclass
(`Options` in adbs/hosts/<host>_options.py, a docstring per field, the same Base/NotBase declarations) and reach the
config as `host_options`, set key by key as `<host>.<option>` (`--set savc.queue_size=512`). Why one field rather
than one Config field per option: adding a host touches adbs/hosts/ alone, and the config keeps one flat schema for
every table, MLflow run and search space.

Config's methods need the values (replace) and the registry checks (validate, the dataset, host and backbone ones
first): they import adbs/config/values.py and adbs/config/checks.py, which take the config or its class as an
argument and never import this module, so nothing is filled in at import time and there is no import circle.
`from_dict` and `coerce` (adbs/config/values.py bound to Config) are here for the same reason.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from adbs.config import checks, values
from adbs.fields import Base, ConfigError, NotBase, check_choice, check_positive, check_range

VARIANTS = ("baseline", "adb", "adb+ic")
SCHEDULES = ("cosine", "milestones")
IC_REDUCTIONS = ("mean", "sum")
NEW_BOUNDARY_INITS = ("mean", "abs_mean", "one")
DEVICES = ("auto", "cpu", "cuda")
FAST_STEPS = ("off", "compile", "cuda_graphs")  # adbs/runtime.py: Runtime.speed_up
SYNTHETIC_VERSIONS = (1, 2, 3)  # adbs.data.synthetic.RECIPES


# Fields whose default is the released code's boundary handling and whose other values are remedies for
# the collapsed regime (docs/boundary-dynamics.md); a table made with another value says so in its header.
BOUNDARY_REMEDIES = ("new_boundary_init", "finetune_abs_boundary", "abs_base_boundary", "boundary_lr_scale",
                     "boundary_warmup_epochs")


@dataclass
class Config:
    # --- data -----------------------------------------------------------------
    dataset: Base[str] = "synthetic"
    """Dataset registry name: synthetic (embedded, offline), cifar100, mini_imagenet, cub200."""
    data_root: Base[str | None] = None
    """Folder holding the dataset in its community layout (docs/data.md); unused by synthetic."""
    index_list: Base[str | None] = None
    """Folder with the standard split files session_1.txt.. (the paper's exact 5-shot draws)."""
    ways: NotBase[int | None] = None
    """Novel classes per incremental session; None = the dataset's standard (5, or 10 on CUB200)."""
    shots: NotBase[int] = 5
    """Training images per novel class in each incremental session."""
    sessions: NotBase[int | None] = None
    """Incremental sessions after the base one; None = all novel classes (novel // ways)."""
    split_seed: Base[int] = 0
    """Seed of the few-shot draw and of the validation carve-out, separate from `seed`."""
    val_fraction: Base[float] = 0.05
    """Share of each base class's training images held out for validation (never trained on)."""
    novel_val_per_class: NotBase[int] = 20
    """Held-out validation images per novel class, taken from its training images not drawn as shots."""
    base_images_per_class: Base[int | None] = 80
    """Cap on base-session training images per class, after the validation carve-out (None = all, as the paper presets)."""
    test_images_per_class: NotBase[int | None] = None
    """Cap on the test images scored per class, the first ones of each (None = all, as the paper): a faster, noisier
    score for quick checks (the smoke preset)."""
    synthetic_seed: Base[int] = 0
    """Seed that generates the embedded synthetic benchmark (same seed and version, same images)."""
    synthetic_version: Base[int] = 3
    """Embedded benchmark version: 3 (CIFAR-100-like superclasses and class geometry, calibrated on the
    baseline), 2 or 1 (earlier versions, kept to regenerate earlier tables); see adbs/data/synthetic.py."""

    # --- model ------------------------------------------------------------------
    backbone: Base[str] = "convnet_signed"
    """Backbone registry name: convnet_signed (the CPU setting: a small ConvNet with signed features), convnet
    (the same with a ReLU feature layer, benchmark v1/v2's), resnet12, resnet18, resnet18_cifar, resnet20."""
    pretrained: Base[str | None] = None
    """Path to a local state_dict file to initialise the backbone from (e.g. ImageNet ResNet-18 for CUB200)."""
    temperature: Base[float] = 16.0
    """Logit scale T in T * |m_c| * cos(f(x), w_c) (16 in the official code; a host may scale its own head,
    e.g. ALICE's s)."""

    # --- host method: the FSCIL method ADBS is plugged into (adbs/hosts/, docs/hosts.md) ------------
    host: Base[str] = "baseline"
    """Host method (adbs/hosts/ registry): baseline (cosine prototypes, the released ADBS code), savc, alice, orco."""
    host_options: Base[str] = "{}"
    """The host's own options that differ from its defaults, as JSON (set them one by one as
    <host>.<option>=VALUE, e.g. savc.queue_size=512; adbs/hosts/<host>_options.py: Options lists them). The cache key
    takes those options the host declares as shaping the base session."""

    # --- method -----------------------------------------------------------------
    variant: Base[str] = "adb+ic"
    """baseline (m = 1, no IC, no boundary fine-tuning), adb (learnable m, alpha = 0), adb+ic (full ADBS)."""
    alpha: Base[float] = 0.01
    """IC loss weight (official code default 0.01; the paper reports 0.05); used only by adb+ic."""
    ic_reduction: Base[str] = "mean"
    """IC over all n^2 ordered pairs: mean (official code) or sum (the paper's Eq.)."""
    abs_boundary: Base[bool] = True
    """Use |m| in base-session and evaluation logits (official); False uses signed m everywhere."""
    new_boundary_init: NotBase[str] = "mean"
    """Initial boundary of a new class: mean (the released code: signed mean of all earlier boundaries),
    abs_mean (mean of their |m|, the magnitude the logits use: the paper's "mean boundary of all old
    classes" when some m are negative) or one."""
    boundary_weight_decay: Base[bool] = True
    """Apply the base optimizer's weight decay to the boundaries too (official: they share one SGD)."""
    finetune_epochs: NotBase[int] = 10
    """Boundary fine-tuning steps per incremental session (one full-batch step per epoch; 0 = none)."""
    finetune_lr: NotBase[float] = 0.01
    """Learning rate of the incremental boundary fine-tuning SGD."""

    # --- boundary remedies: each default is the released code; docs/boundary-dynamics.md says why ------
    finetune_abs_boundary: NotBase[bool] = False
    """Multiply by |m| in the incremental fine-tuning loop, as evaluation does (released code: the signed m,
    so old classes whose m crossed zero enter it with negative logits)."""
    abs_base_boundary: NotBase[bool] = False
    """Replace the base boundaries by |m| after the base session, before any incremental session (released
    code: the signed m is carried into the sessions, where the new-boundary mean and fine-tuning use it)."""
    boundary_lr_scale: Base[float] = 1.0
    """Multiplier of the base-session learning rate for the boundaries m (released code: 1, m shares the
    backbone's SGD and lr)."""
    boundary_warmup_epochs: Base[int] = 0
    """Base epochs during which m stays frozen at 1 before it trains (released code: 0, m trains from the
    first step, while predictions are still poor and many m cross zero)."""

    # --- base session training ----------------------------------------------------
    base_epochs: Base[int] = 8
    """Epochs of base-session training."""
    base_lr: Base[float] = 0.1
    """Initial learning rate of the base-session SGD."""
    schedule: Base[str] = "cosine"
    """Learning-rate schedule: cosine (CIFAR100) or milestones (miniImageNet, CUB200)."""
    milestones: Base[tuple[int, ...]] = (40, 70, 100)
    """Epochs at which the milestones schedule multiplies the lr by `gamma`."""
    gamma: Base[float] = 0.1
    """Multiplicative lr decay at each milestone."""
    batch_size: Base[int] = 64
    """Base-session mini-batch size (official code 64; the paper says 128)."""
    momentum: Base[float] = 0.9
    """SGD momentum (Nesterov) of the base session."""
    weight_decay: Base[float] = 5e-4
    """SGD weight decay of the base session."""

    # --- runtime ------------------------------------------------------------------
    seed: Base[int] = 0
    """Training seed (weights init, shuffling, augmentation)."""
    device: Base[str] = "auto"
    """auto (cuda when available), cpu or cuda."""
    amp: Base[bool] = False
    """Mixed precision (bfloat16 autocast) on GPU; ignored on CPU. Off by default: the released code trains
    in fp32, and at batch 64 the ResNet-12 step measured slower with bf16 autocast than in fp32 with TF32
    (docs/gpu.md, "Measured"); CUDA runs use TF32 for matmul and convolutions either way."""
    fast_step: Base[str] = "off"
    """A faster base-session training step on CUDA: off (eager, as before), compile (torch.compile of the backbone,
    training and evaluation) or cuda_graphs (the backbone's training forward and backward compiled and replayed as
    CUDA graphs, torch.compile mode reduce-overhead). Not applied on CPU, where the step stays eager and the run's
    header says so. Any value but off also brings an epoch's figures (loss, accuracies, finiteness, boundary
    statistics) back to the host in one transfer instead of one per figure; the CPU numbers are the same to the
    digit either way (tests/adbs/test_fast_step.py). On CUDA compiled kernels round differently, so it is part of
    the base-session key there (adbs/runtime.py: settings); docs/gpu.md, "The faster step"."""
    num_workers: NotBase[int | None] = None
    """DataLoader worker processes for file-based datasets (0 = load in the main process; None = one per
    torch thread up to 4 when there are 2 or more threads, i.e. the trial's CPUs under the study platform:
    on a 16-CPU GPU machine 4 loader workers fed a trial faster than 16, docs/gpu.md, "Measured").
    In-memory pools (synthetic, cifar100) never start workers."""
    data_on_device: NotBase[bool | None] = None
    """Keep an in-memory pool's uint8 images on the training device and augment them there (random crop,
    flip, normalise), so a GPU trial does not wait on host-side batches (docs/gpu.md, "Data path").
    None = on for CUDA, off on CPU; the batches are identical either way (the random draws stay on the
    CPU generator), so it is outside the base-session key. File-based pools ignore it."""
    # eval_batch_size batches the base session's validation and prototype passes too; outside the key as before
    # (BN is in eval mode there, so it changes those numbers by float rounding at most).
    eval_batch_size: NotBase[int] = 128
    """Batch size for feature extraction at evaluation (128 is ~1.5x faster than 512 for the CPU ConvNet:
    bench/bench.py; the GPU presets use 512)."""
    keep_embeddings: NotBase[bool] = True
    """Keep a small sample of the last session's test features (6 base and 4 novel classes, 50 images each,
    reduced to 50 principal components) and the cosine similarities of all class prototypes with the trial's
    result (adbs.metrics.embedding_sample): the data of the paper's t-SNE and similarity figures, which the
    ablation study and studies/report.py draw. Numbers are unchanged either way; false leaves out ~70 kB a
    trial in the study's results (~0.4 MB in a `python -m adbs.run` result JSON)."""
    threads: NotBase[int | None] = None
    """torch CPU threads. None = 1 on CPU (the rule of adbs/runtime.py, shared by `python -m adbs.run` and a
    study's trials, whose threads follow --cpus-per-trial: the thread count changes CPU numbers by float
    rounding, so it is part of the base-session cache key) and torch's default on CUDA."""

    # ------------------------------------------------------------------------------
    # derived values: computed here only
    @property
    def learn_boundaries(self) -> bool:
        return self.variant != "baseline"

    @property
    def effective_alpha(self) -> float:
        return self.alpha if self.variant == "adb+ic" else 0.0

    @property
    def effective_finetune_epochs(self) -> int:
        return self.finetune_epochs if self.learn_boundaries else 0

    def inert_fields(self) -> tuple[str, ...]:
        """Fields this config never reads, so their values change nothing: milestones and gamma under the cosine
        schedule (adbs/loops.py: _optimizer), alpha and ic_reduction without IC (effective_alpha), the incremental
        fine-tuning's fields with fixed boundaries (effective_finetune_epochs). A result's record of its
        configuration leaves them out (adbs_lab/results/tables.py: best_config)."""
        inert: list[str] = []
        if self.schedule != "milestones":
            inert += ["milestones", "gamma"]
        if self.variant != "adb+ic":
            inert += ["alpha", "ic_reduction"]
        if not self.learn_boundaries:
            inert += ["finetune_epochs", "finetune_lr", "finetune_abs_boundary"]
        return tuple(inert)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["milestones"] = list(self.milestones)
        return d

    def replace(self, **overrides: Any) -> "Config":
        """A copy with `overrides`, checked and typed as from_dict does (this config's own values are typed already:
        only the overrides are coerced)."""
        return dataclasses.replace(self, **values.typed(Config, overrides, self.to_dict()))

    def validate(self) -> "Config":
        """Every check that needs no data (dataset-dependent ones live in adbs.data): the host's first, the
        datasets' and backbones' registries last (they load torch: adbs/config/checks.py)."""
        checks.check_host(self)
        for name, choices in (("variant", VARIANTS), ("schedule", SCHEDULES), ("ic_reduction", IC_REDUCTIONS),
                              ("new_boundary_init", NEW_BOUNDARY_INITS), ("device", DEVICES), ("fast_step", FAST_STEPS),
                              ("synthetic_version", SYNTHETIC_VERSIONS)):
            check_choice(name, getattr(self, name), choices)
        for name in ("shots", "base_epochs", "base_lr", "batch_size", "eval_batch_size", "temperature",
                     "novel_val_per_class"):
            check_positive(name, getattr(self, name))
        if self.ways is not None:
            check_positive("ways", self.ways)
        if self.sessions is not None and self.sessions < 0:
            raise ConfigError(f"sessions must be >= 0 or None (all novel classes), got {self.sessions}")
        for name in ("base_images_per_class", "test_images_per_class"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        if not 0.0 < self.val_fraction < 1.0:
            raise ConfigError(f"val_fraction must be in (0, 1), got {self.val_fraction}: a validation split is "
                              "required because selection, pruning and search never use test data")
        if self.variant == "adb+ic" and not self.alpha > 0:
            raise ConfigError(f"alpha must be > 0 for variant 'adb+ic', got {self.alpha}; "
                              "use variant='adb' for learnable boundaries without IC")
        if self.alpha < 0:
            raise ConfigError(f"alpha must be >= 0, got {self.alpha}")
        if not (self.boundary_lr_scale >= 0 and math.isfinite(self.boundary_lr_scale)):
            raise ConfigError(f"boundary_lr_scale must be a finite number >= 0, got {self.boundary_lr_scale}")
        if not 0 <= self.boundary_warmup_epochs <= self.base_epochs:
            raise ConfigError(f"boundary_warmup_epochs must be in 0..base_epochs ({self.base_epochs}), "
                              f"got {self.boundary_warmup_epochs}")
        if self.finetune_epochs < 0:
            raise ConfigError(f"finetune_epochs must be >= 0, got {self.finetune_epochs}")
        if self.learn_boundaries and self.finetune_epochs > 0 and not self.finetune_lr > 0:
            raise ConfigError(f"finetune_lr must be > 0, got {self.finetune_lr}")
        for name in ("momentum", "weight_decay", "gamma"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"num_workers must be >= 0, got {self.num_workers}")
        if self.threads is not None:
            check_range("threads", self.threads, 1, C_INT_MAX, "torch.set_num_threads takes a C int; None = the rule "
                        "of adbs/runtime.py")
        check_range("seed", self.seed, SEED_MIN, SEED_MAX, "torch.manual_seed takes a 64-bit seed, and the "
                    "incremental sessions seed with seed * 1000 + session (adbs/sessions.py, adbs/hosts/orco.py)")
        for name in ("split_seed", "synthetic_seed"):  # numpy's SeedSequence takes any int >= 0
            check_range(name, getattr(self, name), 0, None, "numpy seeds its generators with ints >= 0")
        checks.check_registries(self)  # an unknown dataset said as such, before it is asked for its data_root
        if self.dataset != "synthetic" and not self.data_root:
            raise ConfigError(f"dataset '{self.dataset}' needs data_root (--data-root DIR): the folder holding it "
                              "in the layout docs/data.md describes; the default dataset 'synthetic' needs none")
        return self


C_INT_MAX = 2**31 - 1
SEED_SPAN = 1000
"""Seeds derived from `seed`: seed * SEED_SPAN + k with 0 <= k < SEED_SPAN (a session's augmented views in
adbs/sessions.py, ORCO's session seeds in adbs/hosts/orco.py), each passed to torch.manual_seed."""
SEED_MIN = -(2**63 // SEED_SPAN)
"""The smallest `seed` whose derived seeds torch.manual_seed takes (it takes -2**63 .. 2**64 - 1)."""
SEED_MAX = (2**64 - SEED_SPAN) // SEED_SPAN
"""The largest `seed` whose derived seeds torch.manual_seed takes."""


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Config)}


def from_dict(overrides: dict[str, Any] | None = None) -> Config:
    """Config from defaults plus overrides (a dict given in code: a preset, a search space, a test); unknown keys and
    wrong types raise ConfigError naming the valid choices. Each value is coerced here, once (adbs/config/values.py).

    `<host>.<option>` keys set one option of the host (the one named by `host`, which they must match).
    """
    return Config(**values.typed(Config, overrides or {}))


def from_typed(typed: dict[str, Any]) -> Config:
    """Config from values typed already (adbs.config.precedence.resolve's): nothing is coerced again."""
    return Config(**typed)


def coerce(name: str, value: Any) -> Any:
    """One config value checked and converted to the type of key `name`: a Config field, an old name of one, or a
    host option `<host>.<option>`; strings from a CLI or a file are parsed."""
    return values.coerce_key(Config, name, value)
