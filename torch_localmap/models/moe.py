"""A small transformer with Mixture-of-Experts MLP blocks (router top-k, expert MLPs, combine).

Dispatch formulation (static shapes, so it traces without data-dependent sizes):
GShard-style capacity routing with one_hot masks. Each token picks top-k experts;
its slot inside an expert's buffer is a cumsum over the one_hot mask; tokens past
the expert capacity are dropped. The (tokens, experts, capacity) dispatch and
combine tensors turn routing into two einsums, and the experts run as batched
matmuls over stacked weights (experts, ...). Expert compute is experts * capacity
tokens, as in a real MoE, not experts * all tokens.

`route_group_size` routes tokens in groups of that many (GShard's groups, Switch's per-core
capacity): each group has its own capacity and its own slot ranking, so routing is
independent per group and a plan may keep each group on one rank. None: one group of every
token in the batch (the capacity and the ranking span the whole batch, so no batch shard
routes on its own).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class MoEConfig:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_experts: int = 8
    top_k: int = 2
    expert_ffn_dim: int = 14336
    capacity_factor: float = 1.25
    vocab_size: int = 32000
    seq_len: int = 4096
    aux_loss_weight: float = 0.01
    route_group_size: int | None = None  # tokens per routing group; None: the whole batch is one group

    @classmethod
    def mixtral_8x7b(cls) -> "MoEConfig":
        """Mixtral-8x7B dims (attention here is plain MHA; the MoE block is the point)."""
        return cls()

    @classmethod
    def tiny(cls, **overrides) -> "MoEConfig":
        return replace(cls(dim=24, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_ffn_dim=40,
                           vocab_size=80, seq_len=10), **overrides)

    def capacity(self, n_tokens: int) -> int:
        return max(1, math.ceil(self.capacity_factor * self.top_k * n_tokens / self.n_experts))

    def routing_groups(self, n_tokens: int) -> tuple[int, int]:
        """(groups, tokens per group) for a batch of n_tokens."""
        g = self.route_group_size
        if g is None:
            return 1, n_tokens
        if g < 1 or n_tokens % g:
            raise ValueError(f"MoEConfig.route_group_size={g}: expected a positive size that divides the batch's "
                             f"{n_tokens} tokens (batch x seq), or None for one group of every token")
        return n_tokens // g, g


def _one_hot(idx, n: int, dtype):
    # Comparison with arange instead of F.one_hot: F.one_hot traces runtime range checks
    # (_assert_async on data) into the graph; this is the same mask with plain ops.
    return (idx.unsqueeze(-1) == torch.arange(n, device=idx.device)).to(dtype)


def capacity_dispatch(mask, gate, cap: int):
    """GShard capacity routing of n tokens' top-k choices, one-hot `mask` (..., n, k, experts),
    with weights `gate` (..., n, k): the (..., n, experts, cap) 0/1 dispatch tensor and the
    gate-weighted combine tensor. Tokens past an expert's capacity are dropped. Leading
    dims are routing groups, each ranked and filled on its own."""
    *lead, n, k, n_experts = mask.shape
    dtype = mask.dtype
    # Slot of each (token, choice) in its expert: choices ranked k-major so every
    # token's first choice is placed before any second choice.
    mask_km = mask.transpose(-3, -2).reshape(*lead, k * n, n_experts)
    slot = (torch.cumsum(mask_km, dim=-2) - 1.0) * mask_km
    slot = slot.reshape(*lead, k, n, n_experts).transpose(-3, -2)  # (..., n, k, e)
    keep = mask * (slot < cap).to(dtype)
    slot_onehot = _one_hot(slot.sum(-1).long().clamp(max=cap - 1), cap, dtype)  # (..., n, k, cap)
    dispatch = torch.einsum("...nke,...nkc->...nec", keep, slot_onehot)  # (..., n, e, cap) 0/1
    combine = torch.einsum("...nke,...nkc,...nk->...nec", keep, slot_onehot, gate)
    return dispatch, combine


def add_expert_weights(module: nn.Module, e: int, d: int, h: int) -> None:
    """Registers the stacked SwiGLU weights of `e` experts on `module`: w1, w3 (e, d, h) and
    w2 (e, h, d), scaled by 1/sqrt(fan-in) (what routed_experts multiplies by)."""
    module.w1 = nn.Parameter(torch.randn(e, d, h) / math.sqrt(d))
    module.w3 = nn.Parameter(torch.randn(e, d, h) / math.sqrt(d))
    module.w2 = nn.Parameter(torch.randn(e, h, d) / math.sqrt(h))


def routed_experts(tokens, dispatch, combine, w1, w3, w2):
    """Tokens (..., n, d) through their experts' SwiGLU MLPs (stacked weights w1, w3 (e, d, h)
    and w2 (e, h, d)) by the capacity_dispatch tensors: the combined (..., n, d) output.
    Leading dims are routing groups: each expert runs every group's slots in one matmul."""
    expert_in = torch.einsum("...nec,...nd->...ecd", dispatch, tokens)  # (..., e, cap, d)
    grouped = expert_in.dim() > 3
    if grouped:  # (e, groups * cap, d): one batched matmul per expert over every group
        lead, (e, cap, d) = expert_in.shape[:-3], expert_in.shape[-3:]
        expert_in = expert_in.movedim(-3, 0).reshape(e, -1, d)
    hidden = F.silu(torch.bmm(expert_in, w1)) * torch.bmm(expert_in, w3)
    expert_out = torch.bmm(hidden, w2)  # (e, [groups *] cap, d)
    if grouped:
        expert_out = expert_out.reshape(e, *lead, cap, d).movedim(0, -3)
    return torch.einsum("...nec,...ecd->...nd", combine, expert_out)


class MoE(nn.Module):
    """Router linear -> softmax -> top-k -> expert SwiGLU MLPs -> weighted combine."""

    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        e, d, h = cfg.n_experts, cfg.dim, cfg.expert_ffn_dim
        self.router = nn.Linear(d, e, bias=False)
        add_expert_weights(self, e, d, h)

    def forward(self, x):
        """x: (batch, seq, dim) -> (output, load-balancing aux loss)."""
        b, s, d = x.shape
        cfg = self.cfg
        groups, n = cfg.routing_groups(b * s)
        tokens = x.reshape(b * s, d) if cfg.route_group_size is None else x.reshape(groups, n, d)
        e, cap = cfg.n_experts, cfg.capacity(n)

        probs = F.softmax(self.router(tokens), dim=-1)  # ([groups,] n, e)
        gate, idx = torch.topk(probs, cfg.top_k, dim=-1)  # ([groups,] n, k)
        gate = gate / gate.sum(-1, keepdim=True)
        mask = _one_hot(idx, e, x.dtype)  # ([groups,] n, k, e)
        dispatch, combine = capacity_dispatch(mask, gate, cap)

        out = routed_experts(tokens, dispatch, combine, self.w1, self.w3, self.w2).reshape(b, s, d)

        # Switch-Transformer load-balancing loss: fraction routed x mean router prob, per
        # routing group (averaged over the groups).
        frac = mask[..., 0, :].mean(-2)
        aux = e * (frac * probs.mean(-2)).sum(-1)
        return out, aux if cfg.route_group_size is None else aux.mean()


class MoEBlock(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.moe = MoE(cfg)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.n_heads, d // self.n_heads).unbind(2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        y, aux = self.moe(self.norm2(x))
        return x + y, aux


class MoETransformer(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos = nn.Parameter(torch.randn(cfg.seq_len, cfg.dim) * 0.02)
        self.layers = nn.ModuleList(MoEBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

    def forward(self, tokens, targets):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        aux_total = 0.0
        for layer in self.layers:
            h, aux = layer(h)
            aux_total = aux_total + aux
        logits = self.head(self.norm(h))
        loss = F.cross_entropy(logits.reshape(-1, self.cfg.vocab_size), targets.reshape(-1))
        return loss + self.cfg.aux_loss_weight * aux_total


def example_inputs(cfg: MoEConfig, batch: int, generator: torch.Generator | None = None):
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=generator)
    targets = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=generator)
    return tokens, targets
