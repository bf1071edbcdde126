"""Hugging Face cache objects in model outputs (issue 29): every `Cache` subclass, found by
walking the class's subclasses, flattens to its tensors and rebuilds from new ones, so
encoder-decoder models (EncoderDecoderCache) trace as their users call them. The models
themselves train in test_zoo.py (t5)."""
import pytest
import torch
from torch.utils import _pytree as pytree

pytest.importorskip("transformers")
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache  # noqa: E402

from torch_localmap._integrations import tracing_context  # noqa: E402


def _registered():
    with tracing_context():
        pass


def test_encoder_decoder_cache_flattens_to_its_tensors_and_rebuilds():
    _registered()
    k, v, ck, cv = (torch.randn(2, 4, 3, 8) for _ in range(4))
    self_attn, cross = DynamicCache(), DynamicCache()
    self_attn.update(k, v, 0)
    cross.update(ck, cv, 0)
    cache = EncoderDecoderCache(self_attn, cross)
    leaves, spec = pytree.tree_flatten(cache)
    assert len(leaves) == 4  # attributes in name order: cross-attention first
    assert all(torch.equal(x, y) for x, y in zip(leaves, (ck, cv, k, v)))
    rebuilt = pytree.tree_unflatten([x * 2 for x in leaves], spec)
    assert type(rebuilt) is EncoderDecoderCache
    torch.testing.assert_close(rebuilt.self_attention_cache.layers[0].keys, k * 2)
    torch.testing.assert_close(rebuilt.cross_attention_cache.layers[0].values, cv * 2)
    assert rebuilt.is_updated == cache.is_updated and rebuilt.is_updated is not cache.is_updated
    assert rebuilt.get_seq_length() == cache.get_seq_length() == 3


def test_a_cache_subclass_defined_later_and_its_layers_are_found_without_a_list():
    class Slot:  # a layer type no registry knows
        def __init__(self, t):
            self.t, self.label = t, "slot"

    class ScratchCache(Cache):
        def __init__(self, a, b):  # never called by unflatten: attributes are set directly
            self.layers = [Slot(a), Slot(b)]
            self.window = 4

    a, b = torch.randn(3), torch.randn(2, 2)
    _registered()  # after ScratchCache exists: the walk over Cache's subclasses finds it
    leaves, spec = pytree.tree_flatten({"past": ScratchCache(a, b)})
    assert len(leaves) == 2 and leaves[0] is a and leaves[1] is b
    rebuilt = pytree.tree_unflatten([torch.zeros(3), torch.ones(2, 2)], spec)["past"]
    assert type(rebuilt) is ScratchCache and rebuilt.window == 4
    assert [type(s) for s in rebuilt.layers] == [Slot, Slot] and rebuilt.layers[1].label == "slot"
    torch.testing.assert_close(rebuilt.layers[1].t, torch.ones(2, 2))


def test_a_hybrid_models_dynamic_cache_flattens_its_state_layers_too():
    # Jamba's DynamicCache (transformers 5) holds Mamba state layers beside attention ones;
    # transformers' export registration refuses such a cache, ours flattens every tensor.
    from transformers import JambaConfig

    cfg = JambaConfig(vocab_size=32, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=32, attn_layer_period=2, attn_layer_offset=1,
                      expert_layer_period=2, num_experts=2, mamba_d_state=4, mamba_dt_rank=4,
                      use_mamba_kernels=False)
    _registered()
    cache = DynamicCache(config=cfg)
    k, v = torch.randn(2, 1, 3, 8), torch.randn(2, 1, 3, 8)
    cache.update(k, v, 1)  # the attention layer
    kinds = {type(layer).__name__ for layer in cache.layers}
    assert len(kinds) == 2, kinds  # a state layer and an attention layer
    leaves, spec = pytree.tree_flatten({"past_key_values": cache})
    stored = cache.layers[1].keys
    assert any(leaf is stored for leaf in leaves) and any(leaf is cache.layers[1].values for leaf in leaves)
    rebuilt = pytree.tree_unflatten([x + 1 if x is stored else x for x in leaves], spec)["past_key_values"]
    assert [type(layer) for layer in rebuilt.layers] == [type(layer) for layer in cache.layers]
    torch.testing.assert_close(rebuilt.layers[1].keys, k + 1)
    assert rebuilt.get_seq_length(1) == cache.get_seq_length(1) == 3
