"""Baseline: the cosine-prototype method of the released ADBS code (docs/hosts.md, "Baseline").

Released code: Yongzhang-Tan/ADBS models/adbs/Network.py, helper.py, fscil_trainer.py; step by step
with our modules in docs/method.md. With variant=baseline it is the fixed-boundary baseline of the
paper's tables (m = 1); with adb / adb+ic it is ADBS as the authors released it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from adbs.hosts import register_host
from adbs.hosts.interface import Head, Host, Step


class CosineModel(torch.nn.Module):
    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Parameter):
        super().__init__()
        self.backbone = backbone
        self.head = head


@register_host
class Baseline(Host):
    name = "baseline"

    # -- parts: the backbone and a cosine classifier, one row per base class ----------------------------
    def build(self, backbone: torch.nn.Module) -> torch.nn.Module:
        # nn.Linear(d, n, bias=False) init, as the official cosine classifier.
        head = torch.nn.Parameter(torch.empty(self.n_base, backbone.out_dim, device=self.rt.device))
        torch.nn.init.kaiming_uniform_(head, a=math.sqrt(5))
        return CosineModel(backbone, head)

    # -- views and base loss: the dataset's train augmentation, CE on T * |m| * cos ---------------------
    def base_step(self, model, head: Head, x: torch.Tensor, y: torch.Tensor, g: torch.Generator) -> Step:
        with self.rt.autocast():
            feats = model.backbone(x)
        logits = head.logits(feats)
        return Step(F.cross_entropy(logits, y), logits, y)

    # -- new-class rows: the mean backbone feature of the class's images (Host.rows, Host.embed) ----------
    # -- incremental step: none; prediction: the row with the largest logit (Host.predict) ---------------
