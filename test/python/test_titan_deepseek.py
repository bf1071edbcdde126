"""The DeepSeek-V3-style model (MLA, flex_attention with a compiled create_block_mask, MoE
with sigmoid top-k routing and a shared expert, compiled blocks) and tensors captured by a
mask_mod closure (a block-causal document mask's ids): planned on a simulated 8x8 mesh with
no fallback op, and its forward on 4 gloo ranks equal to one process. torch has no CPU
backward for flex_attention, so on CPU the model is planned and run forward-only."""
import pytest
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from dist_utils import make_mesh, run_distributed
from test_flex_attention import FORCE_SHARDING, _flex_nodes, assert_every_flex_strategy_assembles


def _deepseek(batch=8, heads=8, documents=False):
    from torch_localmap.models.titan_deepseek import DeepSeekConfig, TitanDeepSeek

    cfg = DeepSeekConfig.debug(n_heads=heads, compile_layers=True)
    torch.manual_seed(0)
    model = TitanDeepSeek(cfg).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=g)
    if not documents:
        return model, (tokens,)
    # Documents of random lengths (a new one after each of ~4 boundaries), as torchtitan derives from EOS.
    ids = (torch.rand(batch, cfg.seq_len, generator=g) < 0.15).long().cumsum(1)
    return model, (tokens, ids)


@pytest.mark.parametrize("documents", [False, True], ids=["causal", "document_mask"])
def test_deepseek_plans_on_8x8_with_no_fallback_and_flex_sharded_on_batch_and_heads(documents):
    from torch_localmap.plan import plan_module

    model, args = _deepseek(documents=documents)
    with torch.no_grad():
        plan = plan_module(model, (8, 8), args, time_limit=5, calibration=FORCE_SHARDING)
    assert list(plan.summary.fallback_ops) == []
    ops = {n.op for n in plan.graph.nodes}
    # MLA's norms and rotary split, the router's sigmoid top-k and the expert matmuls are all there.
    assert {"aten.sigmoid.default", "aten.topk.default", "aten.bmm.default", "aten.view_as_complex.default"} <= ops
    assert not any("inductor" in op or "compiled" in op for op in ops), ops
    flex = _flex_nodes(plan)
    assert len(flex) == 3  # one per layer (1 dense, 2 MoE)
    for node, chosen in flex:
        q_spec = chosen.inputs[0]
        assert "S(0)" in q_spec and "S(1)" in q_spec, q_spec  # batch on one mesh dim, heads on the other
        assert chosen.outputs[0] == q_spec
        if documents:
            # The captured document ids are the op's last input, split with the batch.
            ids_spec = chosen.inputs[-1]
            assert ids_spec == q_spec.replace("S(1)", "R"), (ids_spec, q_spec)


def test_deepseek_moe_routes_by_biased_sigmoid_scores_and_weights_by_the_unbiased_ones():
    """Against a per-token loop: top-k experts chosen on sigmoid(router) + expert_bias, their
    unbiased scores normalised and scaled, plus the shared expert (no capacity drops)."""
    from torch_localmap.models.titan_deepseek import DeepSeekConfig, DeepSeekMoE

    cfg = DeepSeekConfig.debug(capacity_factor=100.0, route_scale=2.5)
    torch.manual_seed(0)
    moe = DeepSeekMoE(cfg)
    moe.expert_bias[3] = 10.0  # every token picks expert 3, at its own (small) weight
    x = torch.randn(2, 5, cfg.dim)
    out = moe(x)
    tokens = x.reshape(-1, cfg.dim)
    scores = torch.sigmoid(moe.router(tokens))
    ref = moe.shared(tokens)
    for t in range(tokens.shape[0]):
        chosen = torch.topk(scores[t] + moe.expert_bias, cfg.top_k).indices
        assert 3 in chosen.tolist()
        weights = scores[t, chosen] / scores[t, chosen].sum() * cfg.route_scale
        for w, e in zip(weights, chosen):
            h = torch.nn.functional.silu(tokens[t] @ moe.w1[e]) * (tokens[t] @ moe.w3[e])
            ref[t] = ref[t] + w * (h @ moe.w2[e])
    torch.testing.assert_close(out.reshape(-1, cfg.dim), ref, rtol=1e-5, atol=1e-5)


# ---- tensors captured by a mask_mod closure ------------------------------------------------

def _doc_mask(ids):
    def mask_mod(b, h, q_idx, kv_idx):
        return (ids[b, q_idx] == ids[b, kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


def _shifted_doc_mask(ids):
    """Reads the ids of the *next* sequence in the batch: the batch index used as a number,
    so a rank's local index would read another row than the global one."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (ids[(b + 1) % ids.shape[0], q_idx] == ids[b, kv_idx]) & (q_idx >= kv_idx)

    return mask_mod


class _DocAttention(nn.Module):
    def __init__(self, make_mask_mod, heads=4, dim=16):
        super().__init__()
        self.heads, self.dim, self.make_mask_mod = heads, dim, make_mask_mod
        self.qkv = nn.Linear(heads * dim, 3 * heads * dim, bias=False)

    def forward(self, x, ids):
        b, s, _ = x.shape
        mask = create_block_mask(self.make_mask_mod(ids), b, None, s, s, device="cpu")
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4).unbind(0)
        return flex_attention(q, k, v, block_mask=mask).sum(1)


def _doc_inputs(batch=4):
    g = torch.Generator().manual_seed(2)
    return torch.randn(batch, 32, 64, generator=g), (torch.rand(batch, 32, generator=g) < 0.2).long().cumsum(1)


def test_captured_document_ids_become_a_buffer_sharded_with_the_batch_and_every_strategy_is_exact():
    strategies = assert_every_flex_strategy_assembles(_DocAttention(_doc_mask), _doc_inputs())
    ids_specs = {s["inputs"][-1] for s in strategies}
    # Batch sharded (ids with it, on either mesh dim or both) and heads sharded (ids whole).
    assert {"S(0)R", "RS(0)", "S(0)S(0)", "RR"} <= ids_specs, ids_specs
    assert any("S(1)" in s["inputs"][0] for s in strategies)


def test_a_mask_mod_using_the_batch_index_as_a_number_keeps_the_batch_whole():
    strategies = assert_every_flex_strategy_assembles(_DocAttention(_shifted_doc_mask), _doc_inputs())
    assert all("S(0)" not in s["inputs"][0] for s in strategies), [s["inputs"][0] for s in strategies]
    assert all(s["inputs"][-1] == "RR" for s in strategies)
    assert any("S(1)" in s["inputs"][0] for s in strategies)  # heads are still free


def test_a_block_mask_input_whose_mask_mod_captures_ids_plans_with_the_ids_following_the_batch():
    """torchtitan builds the document mask outside the model and passes the BlockMask in:
    its closure's ids are flattened with it as an input, then lifted into the flex op."""
    from test_flex_attention import _titan
    from torch_localmap.plan import plan_module

    model, tokens = _titan()
    ids = (torch.rand(8, 32, generator=torch.Generator().manual_seed(3)) < 0.2).long().cumsum(1)
    mask = create_block_mask(_doc_mask(ids), 8, None, 32, 32, device="cpu")
    with torch.no_grad():
        plan = plan_module(model, (8, 8), (tokens, mask), time_limit=5, calibration=FORCE_SHARDING)
    assert list(plan.summary.fallback_ops) == []
    flex = _flex_nodes(plan)
    assert len(flex) == 2
    for _, chosen in flex:
        assert "S(0)" in chosen.inputs[0] and "S(1)" in chosen.inputs[0], chosen.inputs[0]
        assert chosen.inputs[-1] == chosen.inputs[0].replace("S(1)", "R"), chosen.inputs


class _SlopeAttention(nn.Module):
    """ALiBi with per-head slopes from a tensor the score_mod closure captures: `slopes[h]`
    reads the head index only to index the slopes, so heads may be split with them."""

    def __init__(self, heads=4, dim=16):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.qkv = nn.Linear(heads * dim, 3 * heads * dim, bias=False)
        self.register_buffer("slopes", torch.linspace(0.02, 0.2, heads))

    def forward(self, x):
        b, s, _ = x.shape
        slopes = self.slopes

        def score_mod(score, b_, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)

        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.dim).permute(2, 0, 3, 1, 4).unbind(0)
        return flex_attention(q, k, v, score_mod=score_mod).sum(1)


def test_a_score_mod_indexing_captured_slopes_by_head_shards_heads_with_the_slopes():
    x, _ = _doc_inputs()
    strategies = assert_every_flex_strategy_assembles(_SlopeAttention(), (x,))
    heads_split = [s for s in strategies if "S(1)" in s["inputs"][0]]
    assert heads_split and all("S(0)" in s["inputs"][-1] for s in heads_split), strategies


# ---- the forward on 4 gloo ranks -----------------------------------------------------------

def _rank_forward(rank, world_size):
    import torch_localmap
    from torch.distributed.tensor import DTensor

    mesh = make_mesh((2, 2))
    out = {}
    for documents in (False, True):
        model, args = _deepseek(batch=4, heads=4, documents=documents)
        with torch.no_grad():
            pm = torch_localmap.parallelize(model, mesh, args, time_limit=5, calibration=FORCE_SHARDING)
            logits = pm(*args)
        out[documents] = {"logits": logits.full_tensor() if isinstance(logits, DTensor) else logits,
                          "flex_specs": [p.inputs[0] for _, p in _flex_nodes(pm.plan)],
                          "fallback": list(pm.plan.summary.fallback_ops)}
    return out


@pytest.mark.timeout(900)
def test_deepseek_forward_on_4_ranks_equals_one_process():
    refs = {}
    for documents in (False, True):
        model, args = _deepseek(batch=4, heads=4, documents=documents)
        with torch.no_grad(), torch.compiler.set_stance("force_eager"):
            refs[documents] = model(*args)
    assert not torch.allclose(refs[False], refs[True])  # the document mask changes the result
    results = run_distributed(_rank_forward, 4, timeout=800)
    for rank, res in enumerate(results):
        for documents, ref in refs.items():
            got = res[documents]
            assert got["fallback"] == []
            assert got["flex_specs"] and all(s != "RR" for s in got["flex_specs"]), got["flex_specs"]
            torch.testing.assert_close(got["logits"], ref, rtol=2e-4, atol=2e-5,
                                       msg=lambda m: f"rank {rank}, documents={documents}: {m}")
