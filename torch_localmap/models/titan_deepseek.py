"""A DeepSeek-V3-style decoder of the structure torchtitan's deepseek_v3 model has, written
from the architecture's description:

- multi-head latent attention (MLA): queries through a low-rank projection with a norm
  (q_lora_rank; 0 means one full projection), keys and values through one shared low-rank
  latent with a norm plus a single rotary key head; every query/key head is split into a
  part without position (qk_nope_head_dim) and a rotary part (qk_rope_head_dim), and values
  have their own head dim;
- flex_attention with a causal BlockMask built by a torch.compile'd create_block_mask (or,
  with `document_ids`, a block-causal document mask whose mask_mod reads those ids);
- MoE feed-forward layers after the first `n_dense_layers` dense ones: sigmoid router
  scores, top-k experts chosen on scores plus a load-balancing bias buffer (DeepSeek-V3's
  auxiliary-loss-free balancing), the chosen scores normalised and scaled, a shared expert
  every token goes through. Dispatch is moe.py's capacity routing (static shapes, traces
  without data-dependent sizes);
- `compile_layers`: every block wrapped in torch.compile, as torchtitan's apply_compile.

Rotary embeddings are titan_llama's complex ones (torchtitan adds YaRN scaling for long
contexts, which changes only the frequencies buffer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn

from .llama import FeedForward  # SwiGLU: the dense layers and the shared expert
from .moe import _one_hot, add_expert_weights, capacity_dispatch, routed_experts
from .titan_llama import _compiled, apply_rotary_emb, causal_mask, precompute_freqs_cis


@dataclass(frozen=True)
class DeepSeekConfig:
    dim: int = 2048
    n_layers: int = 27
    n_dense_layers: int = 1
    n_heads: int = 16
    vocab_size: int = 102400
    seq_len: int = 4096
    # MLA
    q_lora_rank: int = 0
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    # feed-forward
    inter_dim: int = 10944  # dense layers
    moe_inter_dim: int = 1408  # each routed expert and the shared expert (times n_shared_experts)
    n_routed_experts: int = 64
    n_shared_experts: int = 2
    top_k: int = 6
    route_scale: float = 1.0
    capacity_factor: float = 1.25
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    use_flex_attn: bool = True
    compile_layers: bool = False

    @classmethod
    def deepseek_v2_lite(cls) -> "DeepSeekConfig":
        """torchtitan's 16B flavour (DeepSeek-V2-Lite dims)."""
        return cls()

    @classmethod
    def debug(cls, **overrides) -> "DeepSeekConfig":
        """torchtitan's "debugmodel" structure, smaller: low-rank q, one dense layer then two MoE layers."""
        return replace(cls(dim=64, n_layers=3, n_dense_layers=1, n_heads=4, vocab_size=64, seq_len=32,
                           q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                           v_head_dim=12, inter_dim=96, moe_inter_dim=24, n_routed_experts=8,
                           n_shared_experts=1, top_k=2, route_scale=1.0), **overrides)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class MLAttention(nn.Module):
    """Multi-head latent attention; x (b, s, dim) -> (b, s, dim)."""

    def __init__(self, cfg: DeepSeekConfig):
        super().__init__()
        self.cfg = cfg
        h = cfg.n_heads
        if cfg.q_lora_rank == 0:
            self.wq = nn.Linear(cfg.dim, h * cfg.qk_head_dim, bias=False)
        else:
            self.wq_a = nn.Linear(cfg.dim, cfg.q_lora_rank, bias=False)
            self.q_norm = nn.RMSNorm(cfg.q_lora_rank, eps=cfg.norm_eps)
            self.wq_b = nn.Linear(cfg.q_lora_rank, h * cfg.qk_head_dim, bias=False)
        # One projection to the kv latent and the single rotary key head (shared by all heads).
        self.wkv_a = nn.Linear(cfg.dim, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False)
        self.kv_norm = nn.RMSNorm(cfg.kv_lora_rank, eps=cfg.norm_eps)
        self.wkv_b = nn.Linear(cfg.kv_lora_rank, h * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
        self.wo = nn.Linear(h * cfg.v_head_dim, cfg.dim, bias=False)
        self.scale = cfg.qk_head_dim ** -0.5

    def forward(self, x, freqs_cis, block_mask):
        cfg, (b, s, _) = self.cfg, x.shape
        h = cfg.n_heads
        q = self.wq(x) if cfg.q_lora_rank == 0 else self.wq_b(self.q_norm(self.wq_a(x)))
        q_nope, q_pe = q.view(b, s, h, cfg.qk_head_dim).split([cfg.qk_nope_head_dim, cfg.qk_rope_head_dim], dim=-1)
        kv, k_pe = self.wkv_a(x).split([cfg.kv_lora_rank, cfg.qk_rope_head_dim], dim=-1)
        q_pe, k_pe = apply_rotary_emb(q_pe, k_pe.unsqueeze(2), freqs_cis)  # k_pe: one head, (b, s, 1, rope)
        kv = self.wkv_b(self.kv_norm(kv)).view(b, s, h, cfg.qk_nope_head_dim + cfg.v_head_dim)
        k_nope, v = kv.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=-1)
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(b, s, h, cfg.qk_rope_head_dim)], dim=-1)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = _compiled("flex_attention")(q, k, v, block_mask=block_mask, scale=self.scale)
        return self.wo(out.transpose(1, 2).reshape(b, s, h * cfg.v_head_dim))


class DeepSeekMoE(nn.Module):
    """Sigmoid-scored top-k routed experts (stacked SwiGLU weights) plus a shared expert."""

    def __init__(self, cfg: DeepSeekConfig):
        super().__init__()
        self.cfg = cfg
        e, d, hd = cfg.n_routed_experts, cfg.dim, cfg.moe_inter_dim
        self.router = nn.Linear(d, e, bias=False)
        add_expert_weights(self, e, d, hd)
        self.shared = FeedForward(d, hd * cfg.n_shared_experts)
        # Auxiliary-loss-free balancing: a per-expert bias the trainer nudges between steps;
        # it moves which experts are chosen, not the chosen experts' weights.
        self.register_buffer("expert_bias", torch.zeros(e))

    def forward(self, x):
        cfg, (b, s, d) = self.cfg, x.shape
        tokens = x.reshape(b * s, d)
        n = b * s
        cap = max(1, math.ceil(cfg.capacity_factor * cfg.top_k * n / cfg.n_routed_experts))
        scores = torch.sigmoid(self.router(tokens).float())  # (n, e)
        _, idx = torch.topk(scores + self.expert_bias, cfg.top_k, dim=-1)  # (n, k)
        gate = scores.gather(-1, idx)
        gate = (gate / gate.sum(-1, keepdim=True) * cfg.route_scale).to(x.dtype)
        dispatch, combine = capacity_dispatch(_one_hot(idx, cfg.n_routed_experts, x.dtype), gate, cap)  # (n, e, cap)
        routed = routed_experts(tokens, dispatch, combine, self.w1, self.w3, self.w2)
        return (routed + self.shared(tokens)).reshape(b, s, d)


class TransformerBlock(nn.Module):
    def __init__(self, cfg: DeepSeekConfig, layer_id: int):
        super().__init__()
        self.attention = MLAttention(cfg)
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.moe_enabled = layer_id >= cfg.n_dense_layers
        if self.moe_enabled:
            self.moe = DeepSeekMoE(cfg)
        else:
            self.feed_forward = FeedForward(cfg.dim, cfg.inter_dim)

    def forward(self, x, freqs_cis, block_mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, block_mask)
        ffn = self.moe if self.moe_enabled else self.feed_forward
        return h + ffn(self.ffn_norm(h))


class TitanDeepSeek(nn.Module):
    """tokens (batch, seq) -> logits (batch, seq, vocab); the loss is computed by the caller."""

    def __init__(self, cfg: DeepSeekConfig):
        super().__init__()
        if not cfg.use_flex_attn:
            raise ValueError("TitanDeepSeek attends with flex_attention only (DeepSeekConfig(use_flex_attn=True)): "
                             "MLA's value head dim differs from the query's")
        if cfg.n_dense_layers > cfg.n_layers:
            raise ValueError(f"n_dense_layers ({cfg.n_dense_layers}) exceeds n_layers ({cfg.n_layers})")
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleDict({str(i): torch.compile(TransformerBlock(cfg, i)) if cfg.compile_layers
                                     else TransformerBlock(cfg, i) for i in range(cfg.n_layers)})
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        _compiled("flex_attention"), _compiled("create_block_mask")  # compiled once, as torchtitan does
        self.register_buffer("freqs_cis", precompute_freqs_cis(cfg.qk_rope_head_dim, cfg.seq_len * 2,
                                                               cfg.rope_theta), persistent=False)

    def forward(self, tokens, document_ids=None):
        """`document_ids` (batch, seq), optional: which document each token belongs to (as
        torchtitan derives from the EOS positions); attention is then causal within a
        document. Without it, causal over the whole sequence."""
        b, s = tokens.shape
        if document_ids is None:
            mask = _compiled("create_block_mask")(causal_mask, 1, None, s, s, device=tokens.device)
        else:
            if document_ids.shape != tokens.shape:
                raise ValueError(f"document_ids must have the tokens' shape {tuple(tokens.shape)}, "
                                 f"got {tuple(document_ids.shape)}")
            mask = _compiled("create_block_mask")(document_causal_mask(document_ids), b, None, s, s,
                                                  device=tokens.device)
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis, mask)
        return self.output(self.norm(h))


def document_causal_mask(document_ids: torch.Tensor):
    """mask_mod of block-causal document attention: a query sees earlier keys of its own
    document. Reads the captured `document_ids` (batch, seq) by the batch index."""

    def mask_mod(b, h, q_idx, kv_idx):
        return (document_ids[b, q_idx] == document_ids[b, kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


def example_inputs(cfg: DeepSeekConfig, batch: int, generator: torch.Generator | None = None):
    return (torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=generator),)
