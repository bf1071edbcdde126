"""A Llama-3 decoder written the way torchtitan writes its llama3 model: complex rotary
embeddings (torch.view_as_complex / view_as_real on a complex `freqs_cis` buffer), fused QKV
projection, RMSNorm, SwiGLU, SDPA with causal masking -- or, with `use_flex_attn` and
`compile_layers`, torchtitan's flex_attention with a causal BlockMask and its
torch.compile'd pieces (mask builder, attention function, every block). torchtitan itself cannot be imported
with CPU torch 2.13 (it imports triton and needs newer torch APIs), so the zoo uses this
model of the same structure; `debug()` mirrors torchtitan's "debugmodel" shape ratios.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class TitanConfig:
    dim: int = 256
    n_layers: int = 6
    n_heads: int = 16
    n_kv_heads: int = 4
    vocab_size: int = 2048
    ffn_dim: int = 768
    seq_len: int = 2048
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    # torchtitan's use_flex_attn: flex_attention with a causal BlockMask built by a
    # torch.compile'd create_block_mask, attention by a torch.compile'd flex_attention.
    use_flex_attn: bool = False
    # torchtitan's apply_compile: every TransformerBlock wrapped in torch.compile.
    compile_layers: bool = False

    @classmethod
    def debug(cls, **overrides) -> "TitanConfig":
        return replace(cls(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=64, ffn_dim=48, seq_len=16),
                       **overrides)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def precompute_freqs_cis(head_dim: int, end: int, theta: float) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    t = torch.arange(end, dtype=torch.float32)
    return torch.polar(torch.ones(end, head_dim // 2), torch.outer(t, freqs))  # complex64


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs = freqs_cis[: xq.shape[1]].view(1, xq.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, cfg: TitanConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim, bias=False)  # fused QKV
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x, freqs_cis, block_mask=None):
        b, s, _ = x.shape
        q, k, v = self.wqkv(x).split([self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim,
                                      self.n_kv_heads * self.head_dim], dim=-1)
        q = q.view(b, s, self.n_heads, self.head_dim)
        k = k.view(b, s, self.n_kv_heads, self.head_dim)
        v = v.view(b, s, self.n_kv_heads, self.head_dim)
        q, k = apply_rotary_emb(q, k, freqs_cis)
        rep = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if block_mask is not None:
            out = _compiled("flex_attention")(q, k, v, block_mask=block_mask)
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: TitanConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: TitanConfig):
        super().__init__()
        self.attention = Attention(cfg)
        self.feed_forward = FeedForward(cfg)
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)

    def forward(self, x, freqs_cis, block_mask=None):
        h = x + self.attention(self.attention_norm(x), freqs_cis, block_mask)
        return h + self.feed_forward(self.ffn_norm(h))


class TitanLlama(nn.Module):
    """tokens (batch, seq) -> logits (batch, seq, vocab); the loss is computed by the caller."""

    def __init__(self, cfg: TitanConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): torch.compile(TransformerBlock(cfg)) if cfg.compile_layers
                                     else TransformerBlock(cfg) for i in range(cfg.n_layers)})
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.use_flex_attn:  # compiled once, when the model is built (as torchtitan does at import)
            _compiled("flex_attention"), _compiled("create_block_mask")
        self.register_buffer("freqs_cis", precompute_freqs_cis(cfg.head_dim, cfg.seq_len * 2, cfg.rope_theta),
                             persistent=False)

    def forward(self, tokens, attention_masks=None):
        """`attention_masks`: a BlockMask (flex attention only), as torchtitan's trainer passes
        the masks it built; by default a causal one, broadcast over batch and heads."""
        if attention_masks is not None and not self.cfg.use_flex_attn:
            raise ValueError("attention_masks (a BlockMask) needs TitanConfig(use_flex_attn=True); this model "
                             "uses SDPA with causal masking")
        if self.cfg.use_flex_attn and attention_masks is None:
            s = tokens.shape[1]
            attention_masks = _compiled("create_block_mask")(causal_mask, 1, None, s, s, device=tokens.device)
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis, attention_masks)
        return self.output(self.norm(h))


def causal_mask(b, h, q_idx, kv_idx):
    """mask_mod of causal attention."""
    return q_idx >= kv_idx


_COMPILED: dict = {}


def _compiled(name: str):
    """torch.compile(flex_attention) / torch.compile(create_block_mask), made on first use
    (torchtitan compiles both once, at module level)."""
    if name not in _COMPILED:
        from torch.nn.attention import flex_attention as fa

        _COMPILED[name] = torch.compile(getattr(fa, name))
    return _COMPILED[name]
