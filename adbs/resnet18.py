"""torchvision's ResNet-18 as backbones `resnet18` and `resnet18_cifar` (registered in adbs/backbones.py, which
imports this module only when one of them is built)."""

from __future__ import annotations

import torchvision
from torch import Tensor, nn


class ResNet18(torchvision.models.ResNet):
    """torchvision's ResNet-18 without its fc head: 512-d features.

    Subclassing (rather than wrapping) keeps torchvision's parameter names, so an
    ImageNet state_dict saved from torchvision loads as is.
    """

    def __init__(self):
        super().__init__(torchvision.models.resnet.BasicBlock, [2, 2, 2, 2])
        del self.fc
        self.out_dim: int = 512

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return x.mean(dim=(2, 3))  # global average pool, as adbs/backbones.py's (any memory format)


class ResNet18Cifar(ResNet18):
    """ResNet-18 for 32x32 inputs: a 3x3 stride-1 stem and no max-pooling (32x32 -> 4x4 before pooling).

    The CIFAR ResNet-18 of ALICE (CanPeng123/FSCIL_ALICE alice/model/resnet_CIFAR.py), which it also
    uses on miniImageNet; torchvision's block names, so its other layers load ImageNet weights as is.
    """

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")  # as torchvision's convs
        self.maxpool = nn.Identity()
