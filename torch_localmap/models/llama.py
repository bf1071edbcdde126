"""Llama-3-style decoder: RMSNorm, rotary embeddings, GQA attention via SDPA, SwiGLU MLP.

forward(tokens, targets) returns the mean next-token cross-entropy loss, so the
module traces into a training joint graph (see torch_localmap.trace.trace_joint).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class LlamaConfig:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    ffn_dim: int = 14336
    vocab_size: int = 128256
    seq_len: int = 8192
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    tie_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @classmethod
    def llama3_8b(cls) -> "LlamaConfig":
        return cls()

    @classmethod
    def llama3_70b(cls) -> "LlamaConfig":
        return cls(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28672)

    @classmethod
    def llama3_405b(cls) -> "LlamaConfig":
        return cls(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, ffn_dim=53248)

    @classmethod
    def tiny(cls, **overrides) -> "LlamaConfig":
        # Odd-ish sizes on purpose (vocab 96, seq 12): exercises uneven shards on small meshes.
        return replace(cls(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48, vocab_size=96, seq_len=12),
                       **overrides)

    def __post_init__(self):
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads or self.head_dim % 2:
            raise ValueError(f"LlamaConfig: dim {self.dim} must split into {self.n_heads} heads of even size "
                             f"and n_heads must be a multiple of n_kv_heads {self.n_kv_heads}")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Written out (not F.rms_norm) the way Llama reference code does it: the joint
        # graph then holds the pow/mean/rsqrt chain real checkpoints trace into.
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape (seq_len, head_dim), real-valued (no complex tensors in the graph)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x, cos, sin):
    """x: (batch, seq, heads, head_dim); cos/sin: (seq, head_dim)."""
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    # The tables stay float32 (buffers are not cast by a mixed-precision policy): rotate in
    # float32 and return x's dtype, so q and k match v (SDPA requires one dtype).
    return (x * cos + _rotate_half(x) * sin).to(x.dtype)


def repeat_kv(x, n_rep: int):
    """(b, s, kv_heads, d) -> (b, s, kv_heads * n_rep, d) by expand + reshape (no copy until reshape)."""
    if n_rep == 1:
        return x
    b, s, h, d = x.shape
    return x[:, :, :, None, :].expand(b, s, h, n_rep, d).reshape(b, s, h * n_rep, d)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.hd)
        k = self.wk(x).view(b, s, self.n_kv, self.hd)
        v = self.wv(x).view(b, s, self.n_kv, self.hd)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        rep = self.n_heads // self.n_kv
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, heads, s, hd)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, self.n_heads * self.hd))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg.dim, cfg.ffn_dim)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = None if cfg.tie_embeddings else nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg.head_dim, cfg.seq_len, cfg.rope_theta)
        # Non-persistent buffers: derived data, traced as buffer inputs of the joint graph.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        cos, sin = self.rope_cos[:s], self.rope_sin[:s]
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        h = self.norm(h)
        logits = F.linear(h, self.tok_embeddings.weight) if self.output is None else self.output(h)
        return F.cross_entropy(logits.reshape(-1, self.cfg.vocab_size), targets.reshape(-1))


def example_inputs(cfg: LlamaConfig, batch: int, generator: torch.Generator | None = None):
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=generator)
    targets = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=generator)
    return tokens, targets
