"""Backbone registry: a string picks the feature extractor f of f(x) -> [B, out_dim].

    BACKBONES: dict[str, Callable[..., nn.Module]]      convnet, convnet_signed, resnet12, resnet18, resnet18_cifar,
                                                        resnet20
    register_backbone(name)                             decorator; a duplicate name raises
    create_backbone(name, *, pretrained=None, **kw)     build, then optionally load a local state_dict

Every backbone has `out_dim: int` and maps a float image batch [B, 3, H, W] to pooled
features [B, out_dim] (global average pool, no classifier head), so the cosine
classifier and boundaries of ADBS live outside it. All of them work with
channels_last inputs (the GPU trainer uses them) and never download anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

BACKBONES: dict[str, Callable[..., nn.Module]] = {}

# Checkpoint keys never loaded into a backbone: classifier heads (torchvision's and
# CEC's ResNets keep theirs in `fc`; ours have none).
_IGNORED_PREFIXES = ("fc.",)


def register_backbone(name: str) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    """Register a factory under `name`; registering a name twice raises ValueError."""

    def decorator(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if name in BACKBONES:
            raise ValueError(f"backbone {name!r} is already registered (by {BACKBONES[name]!r})")
        BACKBONES[name] = factory
        return factory

    return decorator


def create_backbone(name: str, *, pretrained: str | os.PathLike | None = None, **kwargs) -> nn.Module:
    """Build backbone `name` with `kwargs`; if `pretrained` is a path, load that local state_dict.

    Loading is strict over the backbone's own keys (classifier `fc.*` keys in the file are
    ignored). A missing file raises FileNotFoundError, mismatching keys or shapes ValueError.
    """
    if name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; valid names: {', '.join(sorted(BACKBONES))}")
    model = BACKBONES[name](**kwargs)
    if not isinstance(getattr(model, "out_dim", None), int):
        raise TypeError(f"backbone {name!r} must set an int attribute out_dim")
    if pretrained is not None:
        load_pretrained(model, pretrained)
    return model


def load_pretrained(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Load a local state_dict file into `model` in place (strict on the model's keys)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"pretrained weights file not found: {path!r}. Backbones never download; save the "
            "weights once yourself, e.g. torch.save(torchvision.models.resnet18("
            "weights='IMAGENET1K_V1').state_dict(), path)"
        )
    obj = torch.load(path, map_location="cpu", weights_only=True)
    state = _unwrap_state_dict(obj, path)
    state = {k: v for k, v in state.items() if not k.startswith(_IGNORED_PREFIXES)}

    expected = set(model.state_dict())
    # BN's num_batches_tracked is absent from old checkpoints (e.g. torchvision's original
    # ImageNet files); BatchNorm fills it in itself, so it may be missing here.
    missing = sorted(k for k in expected - state.keys() if not k.endswith("num_batches_tracked"))
    unexpected = sorted(state.keys() - expected)
    if missing or unexpected:
        raise ValueError(
            f"state_dict in {path!r} does not match backbone {type(model).__name__}: "
            f"{len(missing)} missing keys {_head(missing)}, {len(unexpected)} unexpected keys "
            f"{_head(unexpected)} (ignored prefixes: {', '.join(_IGNORED_PREFIXES)})"
        )
    own = model.state_dict()
    wrong = [
        f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}"
        for k, v in state.items()
        if v.shape != own[k].shape
    ]
    if wrong:
        raise ValueError(
            f"state_dict in {path!r} does not fit backbone {type(model).__name__}: "
            f"{len(wrong)} shape mismatches {_head(wrong)}"
        )
    model.load_state_dict(state, strict=False)  # key sets and shapes checked above
    return model


def _unwrap_state_dict(obj: object, path: str) -> dict[str, Tensor]:
    # Training checkpoints often wrap the weights ({"state_dict": ...}; the CEC/ADBS code
    # saves {"params": ...}) and DataParallel prefixes every key with "module.".
    if isinstance(obj, Mapping):
        for key in ("state_dict", "params", "model"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f"{path!r} does not hold a state_dict (a mapping of names to tensors)")
    return {k.removeprefix("module."): v for k, v in obj.items()}


def _head(keys: list[str], n: int = 8) -> str:
    return "[" + ", ".join(keys[:n]) + (", ...]" if len(keys) > n else "]")


def _global_avg_pool(x: Tensor) -> Tensor:
    # mean over H, W works for any input size and any memory format (channels_last too).
    return x.mean(dim=(2, 3))


# --- convnet -----------------------------------------------------------------------------


class ConvNet(nn.Module):
    """Conv3x3-BN-ReLU-maxpool2 blocks, then global average pooling: a Conv-4 for CPU runs.

    Channels widen with depth (32, 32, 64, 128 by default). Cheap early blocks keep
    CPU throughput close to a width-32 Conv-4, while the 128-d output matters for
    ADBS: with 32-d features, cosines of random-init features are large (~1/sqrt(d)),
    so T=16 logits start far from zero and the boundaries m collapse through zero in
    the first epochs.
    """

    def __init__(self, channels: tuple[int, ...] = (32, 32, 64, 128), last_activation: str = "relu"):
        super().__init__()
        acts = {"relu": lambda: nn.ReLU(inplace=True), "leaky_relu": lambda: nn.LeakyReLU(0.1, inplace=True),
                "none": nn.Identity}
        if last_activation not in acts:
            raise ValueError(f"unknown last_activation {last_activation!r}; valid: {', '.join(acts)}")
        layers: list[nn.Module] = []
        in_ch = 3
        for i, width in enumerate(channels):
            last = i == len(channels) - 1
            layers += [
                nn.Conv2d(in_ch, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                acts[last_activation]() if last else nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ]
            in_ch = width
        self.features = nn.Sequential(*layers)
        self.out_dim: int = in_ch

    def forward(self, x: Tensor) -> Tensor:
        return _global_avg_pool(self.features(x))


@register_backbone("convnet")
def convnet(channels: tuple[int, ...] = (32, 32, 64, 128), last_activation: str = "relu") -> ConvNet:
    return ConvNet(channels=tuple(channels), last_activation=last_activation)


@register_backbone("convnet_signed")
def convnet_signed(channels: tuple[int, ...] = (32, 32, 64, 128)) -> ConvNet:
    """The ConvNet with no ReLU after its last block (Conv-BN-maxpool): signed features.

    The CPU preset's backbone (adbs/config/presets.py). Class means of post-ReLU features all share one positive
    direction: after the CPU preset's 8 epochs the baseline's class separation D_cs is 0.34-0.40, where
    the paper's ResNet-12 reaches 0.88 on CIFAR-100 after 100 epochs (prototypes nearly orthogonal).
    Signed features put the baseline at D_cs ~0.85 in 8 epochs on the embedded benchmark, the geometry
    of the real runs (bench/geometry.py measures it; docs/boundary-dynamics.md, "Class geometry").
    """
    return ConvNet(channels=tuple(channels), last_activation="none")


# --- resnet12 ----------------------------------------------------------------------------


class ResNet12Block(nn.Module):
    """Three conv3x3-BN (LeakyReLU 0.1 between), 1x1 conv-BN shortcut, LeakyReLU, maxpool 2."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv3 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.LeakyReLU(0.1)
        self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch))
        self.maxpool = nn.MaxPool2d(2)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.maxpool(self.relu(out + self.downsample(x)))


class ResNet12(nn.Module):
    """The ResNet-12 of few-shot learning (MetaOptNet/FEAT) used by CEC and ADBS: 640-d features.

    84x84 -> 5x5 and 32x32 -> 2x2 before pooling. DropBlock is left out (off by default there).
    """

    def __init__(self, channels: tuple[int, ...] = (64, 160, 320, 640)):
        super().__init__()
        in_chs = (3, *channels[:-1])
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            ResNet12Block(i, o) for i, o in zip(in_chs, channels, strict=True)
        )
        self.out_dim: int = channels[-1]
        # Init as in the FEAT/CEC ResNet-12.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="leaky_relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return _global_avg_pool(x)


@register_backbone("resnet12")
def resnet12(channels: tuple[int, ...] = (64, 160, 320, 640)) -> ResNet12:
    if len(channels) != 4:
        raise ValueError(f"resnet12 needs 4 stage widths, got {channels}")
    return ResNet12(tuple(channels))


# --- resnet18 ----------------------------------------------------------------------------


# torchvision is imported here, on first use, not with this module: importing it costs seconds (its ops
# import torch._dynamo), paid by every process that trains, though only these two backbones need it.


@register_backbone("resnet18")
def resnet18() -> nn.Module:
    from adbs.resnet18 import ResNet18

    return ResNet18()


@register_backbone("resnet18_cifar")
def resnet18_cifar() -> nn.Module:
    from adbs.resnet18 import ResNet18Cifar

    return ResNet18Cifar()


# --- resnet20 ----------------------------------------------------------------------------


class CifarBasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + shortcut (1x1 conv-BN when the shape changes), ReLU."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet20(nn.Module):
    """CIFAR ResNet-20 as in CEC's resnet20_cifar.py: 3 stages x 3 BasicBlocks, 16/32/64, 64-d."""

    def __init__(self, channels: tuple[int, int, int] = (16, 32, 64), blocks_per_stage: int = 3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels[0], 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels[0])
        self.relu = nn.ReLU(inplace=True)
        stages = []
        in_ch = channels[0]
        for i, ch in enumerate(channels):
            stride = 1 if i == 0 else 2
            blocks = [CifarBasicBlock(in_ch, ch, stride)]
            blocks += [CifarBasicBlock(ch, ch) for _ in range(blocks_per_stage - 1)]
            stages.append(nn.Sequential(*blocks))
            in_ch = ch
        self.layer1, self.layer2, self.layer3 = stages
        self.out_dim: int = channels[-1]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return _global_avg_pool(x)


@register_backbone("resnet20")
def resnet20() -> ResNet20:
    return ResNet20()
