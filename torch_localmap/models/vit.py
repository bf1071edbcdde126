"""ViT encoder: conv patch embedding, cls token, position embedding, pre-LN blocks
(LayerNorm, MHA via SDPA, GELU MLP), classification head and cross-entropy loss."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 224
    patch_size: int = 16
    channels: int = 3
    dim: int = 768
    n_layers: int = 12
    n_heads: int = 12
    mlp_dim: int = 3072
    n_classes: int = 1000

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @classmethod
    def vit_b16(cls) -> "ViTConfig":
        return cls()

    @classmethod
    def tiny(cls, **overrides) -> "ViTConfig":
        # 3x3 patches + cls token = 10 tokens, 10 classes: uneven on 2- and 3-way meshes.
        return replace(cls(image_size=12, patch_size=4, channels=3, dim=24, n_layers=2, n_heads=2, mlp_dim=40,
                           n_classes=10), **overrides)


class EncoderBlock(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.ln2 = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.fc1 = nn.Linear(cfg.dim, cfg.mlp_dim)
        self.fc2 = nn.Linear(cfg.mlp_dim, cfg.dim)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, s, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.cfg = cfg
        self.patch_embed = nn.Conv2d(cfg.channels, cfg.dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.randn(1, cfg.n_patches + 1, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.dim, eps=1e-6)
        self.head = nn.Linear(cfg.dim, cfg.n_classes)

    def forward(self, images, labels):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (b, patches, dim)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x)[:, 0])
        return F.cross_entropy(logits, labels)


def example_inputs(cfg: ViTConfig, batch: int, generator: torch.Generator | None = None):
    images = torch.randn(batch, cfg.channels, cfg.image_size, cfg.image_size, generator=generator)
    labels = torch.randint(0, cfg.n_classes, (batch,), generator=generator)
    return images, labels
