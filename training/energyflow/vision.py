"""ResNet-18 image encoder with GroupNorm in place of BatchNorm (as Diffusion Policy does).

Randomly initialised (no pretrained weights can be downloaded here); pass
``--vision-weights FILE`` (a torchvision-style ResNet-18 ``state_dict``; BN
entries are skipped) to start from your own weights. Output: global average
pool of the last stage: 8 × width features (512 at the standard width 64).
``width`` < 64 gives a narrower trunk (``--vision-width``): 16 costs about
1/16 of the compute, for CPU training and test fixtures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import torch
import torch.nn as nn


def _gn(c: int) -> nn.GroupNorm:
    return nn.GroupNorm(max(1, c // 16), c)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = _gn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = _gn(cout)
        self.relu = nn.ReLU(inplace=False)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), _gn(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        r = x if self.downsample is None else self.downsample(x)
        return self.relu(y + r)


class ResNet18GN(nn.Module):
    """ResNet-18 trunk (GroupNorm), image [B,3,H,W] -> features [B, 8·width] (512 at width 64)."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"vision width {width}: expected ≥ 1 (standard ResNet-18: 64)")
        self.features = 8 * width
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = _gn(width)
        self.relu = nn.ReLU(inplace=False)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        chans = [width, 2 * width, 4 * width, 8 * width]
        layers: List[nn.Module] = []
        cin = width
        for i, c in enumerate(chans):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, c, stride), BasicBlock(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return x.mean(dim=(2, 3))


def load_vision_weights(enc: ResNet18GN, path: str | Path) -> Tuple[List[str], List[str]]:
    """Load conv / GroupNorm weights from a state_dict file; returns (loaded, skipped) keys."""
    sd = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(sd, dict) and "state_dict" in sd:
        sd = sd["state_dict"]
    own = enc.state_dict()
    loaded, skipped = [], []
    new: Dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        k2 = k[len("module."):] if k.startswith("module.") else k
        if k2 in own and own[k2].shape == v.shape:
            new[k2] = v
            loaded.append(k2)
        else:
            skipped.append(k)
    if not loaded:
        raise ValueError(f"{path}: no matching ResNet-18 weights found")
    enc.load_state_dict(new, strict=False)
    return loaded, skipped
