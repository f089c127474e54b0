"""ALICE: FSCIL from an open-set perspective (Peng et al., ECCV 2022), with ADBS on its angular head.

Public code: CanPeng123/FSCIL_ALICE (alice/model/model_factory.py, alice/loss/criterion.py,
alice/train/train.py, alice/validation/validation.py, main_base.py, main_inc_ncm.py, run_*.sh); facts
and the open choices in docs/hosts.md, "ALICE".
Its options (a docstring each, the checks) and presets: adbs/hosts/alice_options.py. Read top to bottom:

1. Parts. The backbone, a projector Linear-BN-ReLU-Linear-BN (the last BN without affine), and an
   angular-penalty head over the projector's output with rows for the real classes, for every pair of
   base classes (class augmentation) and reserved rows, sized as ALICE sizes it for the dataset.
2. Views. Two views of every image (random resized crop at 0.2-1, flip, colour jitter, greyscale); class
   augmentation mixes images of two different classes, lambda ~ Beta(20, 20) (set to 0.5 outside
   [0.4, 0.6]), into a new class standing for the pair, with the same partners and lambdas in both views.
3. Base loss. The CosFace loss, -log e^{s(cos t_y - M)} / (e^{s(cos t_y - M)} + sum_{j != y} e^{s cos t_j}),
   s = 30, M = 0.4, averaged over the two views.
4. Rows of new classes: class means of backbone features (the projector is dropped after training).
5. Incremental step: none.
6. Prediction: nearest class mean by cosine.

Where ADBS enters (docs/hosts.md, a choice): m scales the head's cosines, s * (|m_c| cos t_c - M [c = y]),
one m per real base class and IC over them, the pair and reserved rows at m = 1 (`pair_boundaries`). The head lives
in projector space while ALICE classifies in backbone space: the learned m of the real base classes are carried to the class
means in the space `space` names (backbone, as ALICE, by default), and the sessions classify them with
ADBS's logits T * |m| * cos, T = Config.temperature as in the released ADBS sessions (`session_scale`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from adbs.boundary import boundary_logits, cosine
from adbs.data import augment
from adbs.hosts import register_host
from adbs.hosts.interface import Head, Host, Step, copy_means
from adbs.hosts.alice_options import Options


def pair_classes(n: int) -> int:
    return n * (n - 1) // 2


def pair_label(a: torch.Tensor, b: torch.Tensor, n: int, first: int) -> torch.Tensor:
    """Row of the mixed class of classes a != b among n classes: `first` + the index of {a, b} in the upper
    triangle, row by row (alice/train/train.py: fusion_aug_generate_label, base session)."""
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    return first + (2 * n - lo - 1) * lo // 2 + (hi - lo) - 1


def mix_classes(views: list[torch.Tensor], y: torch.Tensor, n_classes: int, times: int, beta: float,
                g: torch.Generator) -> tuple[list[torch.Tensor], torch.Tensor]:
    """ALICE's class augmentation: `times` rounds, each pairing every image with a random permutation's image
    and, where their classes differ, appending lam * x_i + (1 - lam) * x_partner to every view with the
    pair's label (classes n_classes, n_classes + 1, ...)."""
    rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=g)))
    mixed: list[list[torch.Tensor]] = [[] for _ in views]
    labels: list[torch.Tensor] = []
    for _ in range(times):
        perm = torch.randperm(len(y), generator=g).to(y.device)
        keep = y != y[perm]
        lam = torch.as_tensor(rng.beta(beta, beta, size=len(y)), dtype=views[0].dtype, device=y.device)
        lam = torch.where((lam < 0.4) | (lam > 0.6), torch.full_like(lam, 0.5), lam)[keep].view(-1, 1, 1, 1)
        for out, v in zip(mixed, views):
            out.append(lam * v[keep] + (1 - lam) * v[perm][keep])
        labels.append(pair_label(y[keep], y[perm][keep], n_classes, n_classes))
    if not labels:
        return views, y
    return [torch.cat([v, *m]) for v, m in zip(views, mixed)], torch.cat([y, *labels])


def cosface_loss(logits: torch.Tensor, y: torch.Tensor, penalty: float) -> torch.Tensor:
    """CE after lowering the true class's logit by `penalty` (= s * M on s * cos logits: the CosFace loss of
    alice/loss/criterion.py)."""
    return F.cross_entropy(logits - penalty * F.one_hot(y, logits.shape[1]).to(logits.dtype), y)


class AliceModel(torch.nn.Module):
    def __init__(self, backbone: torch.nn.Module, proj_dim: int, rows: int, device: torch.device):
        super().__init__()
        d = backbone.out_dim
        self.backbone = backbone
        # model_factory.py: projection_MLP with num_proj_layers 2 = layer1 + layer3
        self.projector = torch.nn.Sequential(
            torch.nn.Linear(d, proj_dim), torch.nn.BatchNorm1d(proj_dim), torch.nn.ReLU(inplace=True),
            torch.nn.Linear(proj_dim, proj_dim), torch.nn.BatchNorm1d(proj_dim, affine=False),
        ).to(device)
        # The angular head (angular_fc, xavier): rows after the base classes stand for mixed pairs and
        # reserved classes, and enter every softmax.
        self.head = torch.nn.Parameter(torch.empty(rows, proj_dim, device=device))
        torch.nn.init.xavier_uniform_(self.head)


@register_host
class ALICE(Host):
    name = "alice"
    opt: Options  # Host.__init__ makes it from cfg.host_options (adbs/hosts/alice_options.py)
    augmented_batches = False  # the host makes its two views itself

    @property
    def scale(self) -> float:
        return self.opt.s

    @property
    def session_scale(self) -> float:
        return self.cfg.temperature if self.opt.session_scale is None else self.opt.session_scale

    @property
    def ic_rows(self) -> int | None:
        return None if self.opt.pair_boundaries else self.n_base

    @property
    def head_rows(self) -> int:
        """The real classes, the pairs of base classes and, reserved, the pairs of every standard session's
        classes (model_factory.py: total_num_of_cls), without class augmentation the real classes only."""
        spec = self.data.spec
        if not self.opt.mix_times:
            return spec.num_classes
        sessions = spec.novel_classes // spec.default_ways
        return spec.num_classes + pair_classes(self.n_base) + sessions * pair_classes(spec.default_ways)

    # -- 1. parts --------------------------------------------------------------------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        return AliceModel(backbone, self.opt.proj_dim, self.head_rows, self.rt.device)

    # -- 2. views --------------------------------------------------------------------------------------
    def _view(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        mean, std = self.data.spec.mean, self.data.spec.std
        v = augment.hflip(augment.random_resized_crop(x, x.shape[-1], self.opt.crop_scale, g), g)
        return augment.random_grayscale(augment.color_jitter(v, g, mean, std), g, mean, std)

    # -- 3. base loss ----------------------------------------------------------------------------------
    def base_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        o = self.opt
        views = [self._view(x, g) for _ in range(o.views)]
        views, targets = mix_classes(views, y, self.n_base, o.mix_times, o.mix_beta, g)
        loss, first = 0.0, None
        for v in views:
            with self.rt.autocast():
                z = model.projector(model.backbone(self.rt.images(v)))
            if o.pair_boundaries:
                logits = head.logits(z)  # s * |m| * cos over every head row
            else:  # s * |m| * cos over the real base classes; the other rows keep m = 1
                n = self.n_base
                logits = torch.cat([boundary_logits(z.float(), head.weights[:n], head.boundaries[:n], head.scale,
                                                    absolute=head.absolute),
                                    head.scale * cosine(z.float(), head.weights[n:])], 1)
            loss = loss + cosface_loss(logits, targets, o.s * o.angular_margin) / len(views)
            first = logits if first is None else first
        assert first is not None, "ALICE's views (at least one) give the first logits"
        return Step(loss, first[: len(y), : self.n_base].detach(), y)

    def val_classifier(self, model, head: Head, base_features):
        """Nearest class mean, as ALICE validates (validation.py: NCMValidation), with the base m."""
        tf, ty = base_features()
        return copy_means(tf, ty, self.data.sessions[0].classes), head.boundaries[: self.n_base].detach()

    # -- 4. rows of new classes: class means (Host.rows) in the chosen space -----------------------------
    def embed(self, model, x: torch.Tensor) -> torch.Tensor:
        f = model.backbone(x)
        return (model.projector(f) if self.opt.space == "projector" else f).unsqueeze(1)

    def session_state(self, model) -> dict[str, torch.Tensor]:
        if self.opt.space != "projector":
            return {}
        return {f"projector.{k}": v for k, v in model.projector.state_dict().items()}

    # -- 5. incremental step: none; 6. prediction: the nearest class mean (Host.predict) -----------------
