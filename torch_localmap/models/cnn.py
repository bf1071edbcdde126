"""A small CNN: conv -> batch norm (training mode) -> ReLU -> max pool stages, then
adaptive average pooling, a linear classifier and cross-entropy loss."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class CNNConfig:
    image_size: int = 224
    in_channels: int = 3
    widths: tuple = (64, 128, 256, 512)
    n_classes: int = 1000

    @classmethod
    def imagenet(cls) -> "CNNConfig":
        """VGG-like widths on ImageNet-sized inputs."""
        return cls()

    @classmethod
    def tiny(cls, **overrides) -> "CNNConfig":
        # 10x10 images: max pool gives 5x5 then 2x2 (floor), uneven on 2- and 3-way meshes.
        return replace(cls(image_size=10, in_channels=3, widths=(6, 10), n_classes=5), **overrides)


class CNN(nn.Module):
    def __init__(self, cfg: CNNConfig):
        super().__init__()
        layers, c_in = [], cfg.in_channels
        for w in cfg.widths:
            layers += [nn.Conv2d(c_in, w, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(w),
                       nn.ReLU(), nn.MaxPool2d(2)]
            c_in = w
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, cfg.n_classes)

    def forward(self, images, labels):
        x = self.pool(self.features(images)).flatten(1)
        return F.cross_entropy(self.fc(x), labels)


def example_inputs(cfg: CNNConfig, batch: int, generator: torch.Generator | None = None):
    images = torch.randn(batch, cfg.in_channels, cfg.image_size, cfg.image_size, generator=generator)
    labels = torch.randint(0, cfg.n_classes, (batch,), generator=generator)
    return images, labels
