"""Reference local_map model: three regions on a 3-D (dp, tp, cp) mesh.

- `pointwise`: a sharded pointwise region, in/out S(0)S(0)R (batch split over dp and tp).
- `replicated_linear`: x @ w with everything replicated.
- `cp_attention`: context-parallel attention. q is split by batch (dp), heads (tp) and
  sequence (cp); k and v hold the whole sequence on every cp rank. Each cp rank attends
  its query chunk to all keys, so the output is sequence-split like q; the gradients of
  k and v are partial sums over the cp ranks (each rank only sees its queries' share),
  hence in_grad_placements S(0)S(1)P(sum) for k and v.

The regions omit device_mesh: they run on the mesh in use (`torch_localmap.use_mesh`,
entered by parallelize), or on whole tensors when there is none. `PlainModel` is the
same computation without regions, for numeric comparisons.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .._local_map import local_map

MESH_DIM_NAMES = ("dp", "tp", "cp")


@local_map(out_placements="S(0)S(0)R", in_placements=("S(0)S(0)R",))
def pointwise(x):
    return torch.nn.functional.gelu(x) * 1.5


@local_map(out_placements="RRR", in_placements=("RRR", "RRR"))
def replicated_linear(x, w):
    return x @ w


@local_map(
    out_placements="S(0)S(1)S(2)",
    in_placements=("S(0)S(1)S(2)", "S(0)S(1)R", "S(0)S(1)R"),
    in_grad_placements=("S(0)S(1)S(2)", "S(0)S(1)P(sum)", "S(0)S(1)P(sum)"),
)
def cp_attention(q, k, v):
    # q: [B, H, S_local, hd]; k, v: [B, H, S, hd]. Non-causal, so a query chunk needs no offsets.
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


class CPAttentionModel(nn.Module):
    """x [B, S, D] -> scalar loss-ready output [B, S, D]."""

    def __init__(self, dim: int = 16, heads: int = 4, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.heads = heads
        self.wq = nn.Parameter(torch.randn(dim, dim, generator=g) / math.sqrt(dim))
        self.wk = nn.Parameter(torch.randn(dim, dim, generator=g) / math.sqrt(dim))
        self.wv = nn.Parameter(torch.randn(dim, dim, generator=g) / math.sqrt(dim))
        self.wo = nn.Parameter(torch.randn(dim, dim, generator=g) / math.sqrt(dim))
        self.regions = (pointwise, replicated_linear, cp_attention)

    def _split_heads(self, t):
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x):
        pw, lin, attn = self.regions
        h = pw(x)
        q, k, v = (self._split_heads(h @ w) for w in (self.wq, self.wk, self.wv))
        a = attn(q, k, v)  # q, k, v are transposed views: regions take any strides
        b, nh, s, hd = a.shape
        a = a.transpose(1, 2).reshape(b, s, nh * hd)
        return lin(a, self.wo)


class PlainModel(CPAttentionModel):
    """The same model with the undecorated region functions (no local_map)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.regions = tuple(f.__wrapped__ for f in (pointwise, replicated_linear, cp_attention))


def example_inputs(batch: int = 4, seq: int = 8, dim: int = 16, seed: int = 1):
    return (torch.randn(batch, seq, dim, generator=torch.Generator().manual_seed(seed)),)
