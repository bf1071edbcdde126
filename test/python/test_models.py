"""The reference models: eager loss/backward, tracing to joint graphs, config presets."""
import pytest
import torch

from torch_localmap import models
from torch_localmap.models import inventory


@pytest.mark.parametrize("name", sorted(models.REGISTRY))
def test_tiny_model_traces_with_expected_grads(name):
    module, inputs = models.build(name)
    loss = module(*inputs)
    assert loss.dim() == 0 and torch.isfinite(loss)
    traced = inventory.trace_tiny(name)
    params = [n for n, _ in module.named_parameters()]
    # every parameter gets a gradient output in the joint graph
    assert sorted(traced.joint.param_names) == sorted(params)
    roles = traced.exported.nodes[-1].output_roles
    assert roles.count("grad") == len(params)


def test_build_is_deterministic():
    (m1, x1), (m2, x2) = models.build("moe", seed=3), models.build("moe", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))
    assert torch.equal(m1(*x1), m2(*x2))
    m3, _ = models.build("moe", seed=4)
    assert not torch.equal(m1.layers[0].moe.w1, m3.layers[0].moe.w1)


def test_llama_tied_shares_embedding_and_output():
    tied, _ = models.build("llama_tied")
    untied, _ = models.build("llama")
    assert tied.output is None and untied.output is not None
    counts = inventory.op_counts(inventory.trace_tiny("llama_tied").exported)
    # the tied weight is used by embedding and by the output projection (one mm forward)
    assert counts["aten.embedding.default"] == 1


def test_rotary_is_a_rotation():
    from torch_localmap.models.llama import apply_rotary, rotary_tables

    cos, sin = rotary_tables(8, 5, 10000.0)
    x = torch.randn(1, 5, 2, 8, dtype=torch.float64)
    y = apply_rotary(x, cos.double(), sin.double())
    # pairs (i, i + d/2) are rotated, so their norms are preserved
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1))
    assert torch.allclose(y[:, 0], x[:, 0])  # position 0: angle 0


def test_moe_routes_each_token_to_at_most_top_k_experts():
    cfg = models.moe.MoEConfig.tiny(capacity_factor=100.0)  # no drops
    moe = models.moe.MoE(cfg)
    x = torch.randn(2, cfg.seq_len, cfg.dim)
    out, aux = moe(x)
    # with no capacity drops the result equals a direct per-token top-k evaluation
    tokens = x.reshape(-1, cfg.dim)
    probs = torch.softmax(moe.router(tokens), -1)
    gate, idx = probs.topk(cfg.top_k, -1)
    gate = gate / gate.sum(-1, keepdim=True)
    ref = torch.zeros_like(tokens)
    for t in range(tokens.shape[0]):
        for j in range(cfg.top_k):
            e = idx[t, j]
            h = torch.nn.functional.silu(tokens[t] @ moe.w1[e]) * (tokens[t] @ moe.w3[e])
            ref[t] += gate[t, j] * (h @ moe.w2[e])
    assert torch.allclose(out.reshape(-1, cfg.dim), ref, atol=1e-5)
    assert aux > 0


def test_moe_routing_groups_route_each_group_alone():
    """route_group_size: one group of every token is the ungrouped model; groups of two
    sequences give what each pair of sequences gives alone (capacity 0.75 drops tokens, so
    a group's capacity and ranking really are its own); a size that does not divide the
    batch's tokens is refused."""
    from dataclasses import replace

    base = replace(models.moe.MoEConfig.tiny(), seq_len=8, capacity_factor=0.75)
    m0, (x, y) = models.build("moe", base, batch=8, seed=0)
    m1, _ = models.build("moe", replace(base, route_group_size=64), batch=8, seed=0)
    m1.load_state_dict(m0.state_dict())
    torch.testing.assert_close(m1(x, y), m0(x, y), rtol=0, atol=0)
    m2, _ = models.build("moe", replace(base, route_group_size=16), batch=8, seed=0)
    m2.load_state_dict(m0.state_dict())
    pairs = torch.stack([m2(x[i:i + 2], y[i:i + 2]) for i in range(0, 8, 2)]).mean()
    torch.testing.assert_close(m2(x, y), pairs)
    assert not torch.allclose(m2(x, y), m0(x, y))  # tokens dropped per group differ from the batch's
    with pytest.raises(ValueError, match=r"route_group_size=15: expected a positive size that divides"):
        replace(base, route_group_size=15).routing_groups(64)


def test_full_size_presets():
    c = models.get("llama").full()
    assert (c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.ffn_dim, c.vocab_size, c.seq_len) == \
        (4096, 32, 32, 8, 14336, 128256, 8192)
    for name in models.REGISTRY:
        models.get(name).full()


def test_unknown_model_and_bad_config():
    with pytest.raises(ValueError, match="unknown model"):
        models.get("nope")
    with pytest.raises(ValueError, match="heads"):
        models.llama.LlamaConfig.tiny(n_heads=3)
