"""Tracing a stack of alike layers four layers deep and stamping the rest (_trace_stamp):
the stamped joint graph must be the graph a whole trace gives, node for node, and every
stack the stamp cannot reproduce must be traced whole."""
import dataclasses

import pytest
import torch
import torch.fx as fx
import torch.nn as nn

from torch_localmap import models
from torch_localmap._torch_private import node_meta
from torch_localmap._trace import MODULE_ANNOTATION, trace_joint

import zoo


def _canonical(joint):
    """Everything planning reads from a joint graph, with node references as positions and
    constants by value (a whole trace names each layer's constant apart)."""
    nodes = list(joint.gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    rows = []
    for n in nodes:
        leaves = []
        fx.node.map_aggregate((n.args, n.kwargs),
                              lambda x: leaves.append(("node", index[x]) if isinstance(x, fx.Node) else repr(x)))
        val = n.meta.get("val")
        shape = (tuple(val.shape), val.dtype, val.stride()) if isinstance(val, torch.Tensor) else None
        target = str(n.target)
        if n.op == "get_attr":
            target = getattr(joint.gm, n.target).tolist()
        rows.append((n.op, target, tuple(leaves), shape, node_meta.is_backward_node(n),
                     node_meta.node_annotations(n).get(MODULE_ANNOTATION), repr(n.meta.get("desc"))))
    return (rows, joint.param_names, joint.buffer_names, joint.mutated_buffers, joint.num_fwd_outputs,
            [dataclasses.astuple(c) for c in joint.module_calls])


def _both(monkeypatch, model, args=(), kwargs=None):
    monkeypatch.setenv("TLM_TRACE_STAMP", "1")
    stamped = trace_joint(model, args, kwargs)
    monkeypatch.setenv("TLM_TRACE_STAMP", "0")
    whole = trace_joint(model, args, kwargs)
    assert whole.stamped == ""
    return stamped, whole


def _own_llama(layers):
    cfg = dataclasses.replace(models.llama.LlamaConfig.tiny(), n_layers=layers)
    return models.build("llama", config=cfg, batch=2)


@pytest.mark.parametrize("layers,train", [(6, True), (9, True), (7, False)])
def test_own_llama_stamped_equals_whole_trace(monkeypatch, layers, train):
    module, inputs = _own_llama(layers)
    module.train(train)
    with torch.set_grad_enabled(train):  # eval under no_grad: a forward-only graph
        stamped, whole = _both(monkeypatch, module, inputs)
    assert stamped.backward == train
    assert stamped.stamped == "layers"
    assert _canonical(stamped) == _canonical(whole)
    assert [c.name for c in stamped.module_calls if c.depth == 1][1:1 + layers] == [f"layers.{i}" for i in range(layers)]


def test_mixed_precision_stamps_and_equals_whole_trace(monkeypatch):
    """Through the mixed-precision wrapper (plan_module(mp_policy=...)) each layer's casts are
    its own nodes, so the stack stamps; the graph is the whole trace's, node for node."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    from torch_localmap import _mixed_precision as mp

    module, inputs = _own_llama(7)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    stamped, whole = _both(monkeypatch, mp.CastParameters(module, policy), inputs)
    assert stamped.stamped == "layers"
    assert _canonical(stamped) == _canonical(whole)
    casts = [n for n in stamped.gm.graph.nodes if n.op == "call_function" and "_to_copy" in str(n.target)
             and n.args[0].op == "placeholder" and n.meta["val"].dtype == torch.bfloat16]
    labels = {node_meta.node_annotations(n).get(MODULE_ANNOTATION) for n in casts}
    assert {f"layers.{i}" for i in range(7)} <= labels  # each layer casts its own parameters


def test_hugging_face_llama_stamped_equals_whole_trace(monkeypatch):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=zoo.VOCAB, max_position_embeddings=64,
                      attn_implementation="sdpa")
    ids = zoo._tokens(0)
    stamped, whole = _both(monkeypatch, LlamaForCausalLM(cfg), (), {"input_ids": ids, "labels": ids,
                                                                    "use_cache": False})
    assert stamped.stamped == "model.layers"
    assert _canonical(stamped) == _canonical(whole)


@pytest.mark.parametrize("drop_path,expect", [(0.0, "blocks"), (0.1, "")])
def test_vit_blocks_stamp_unless_their_drop_path_rates_differ(monkeypatch, drop_path, expect):
    timm = zoo._import_timm()
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, num_classes=10, depth=6,
                              drop_path_rate=drop_path)
    stamped, whole = _both(monkeypatch, model, (torch.randn(2, 3, 32, 32),))
    assert stamped.stamped == expect  # stochastic depth: each block's rate is its own Python attribute
    assert _canonical(stamped) == _canonical(whole)


class _Block(nn.Module):
    def __init__(self, dim, index, special):
        super().__init__()
        self.index, self.special = index, special
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, scale=1.0):
        y = torch.tanh(self.lin(x)) * scale
        return y * 2 if self.index == self.special else y


class _Stack(nn.Module):
    """n alike blocks; `skip` adds the block two back (a wiring the stamp cannot repeat),
    `collect` returns every block's output; `every8` ("argument" / "step") treats every
    8th block apart from the parent's loop (the four traced blocks 0, 1, 2, n-1 never show it)."""

    def __init__(self, n=7, dim=8, special=-1, skip=False, collect=False, shared=False, every8=""):
        super().__init__()
        one = _Block(dim, 0, special)
        self.blocks = nn.ModuleList(one if shared else _Block(dim, i, special) for i in range(n))
        self.skip, self.collect, self.every8 = skip, collect, every8

    def forward(self, x):
        seen = [x, x]
        for i, b in enumerate(self.blocks):
            eighth = i % 8 == 7
            x = b(x, scale=0.5) if eighth and self.every8 == "argument" else b(x)
            if self.skip:
                x = x + seen[-2]
            if eighth and self.every8 == "step":
                x = x * 3
            seen.append(x)
        return (x.sum(), seen[2:]) if self.collect else x.sum()


@pytest.mark.parametrize("kind,expect", [
    ("plain", "blocks"),
    ("last layer differs", ""),  # layer N-1 is traced: the stamp sees it differ
    ("skip two back", ""),
    ("every output returned", ""),
    ("one block shared", ""),  # tied weights: not a stack of distinct layers
    ("every 8th block gets another argument", ""),  # seen by the whole-model forward check
    ("the parent acts after every 8th block", ""),
])
def test_stacks_the_stamp_cannot_reproduce_are_traced_whole(monkeypatch, kind, expect):
    torch.manual_seed(0)
    model = _Stack(n=10, special=9 if kind == "last layer differs" else -1, skip=kind == "skip two back",
                   collect=kind == "every output returned", shared=kind == "one block shared",
                   every8={"every 8th block gets another argument": "argument",
                           "the parent acts after every 8th block": "step"}.get(kind, ""))
    stamped, whole = _both(monkeypatch, model, (torch.randn(4, 8, requires_grad=False),))
    assert stamped.stamped == expect
    assert _canonical(stamped) == _canonical(whole)


def test_stamped_graph_computes_what_the_model_computes(monkeypatch):
    # The graph runs: its loss and gradients equal eager autograd on the same weights.
    torch.manual_seed(0)
    model = _Stack(n=8)
    x = torch.randn(4, 8)
    monkeypatch.setenv("TLM_TRACE_STAMP", "1")
    joint = trace_joint(model, (x,))
    assert joint.stamped == "blocks"
    state = dict(model.named_parameters())
    graph_inputs = [state[n] for n in joint.param_names] + [x] + [torch.ones(())]
    outs = joint.gm(*graph_inputs)
    loss = model(x)
    grads = torch.autograd.grad(loss, [state[n] for n in joint.param_names])
    assert torch.allclose(outs[0], loss)
    for got, want in zip(outs[joint.num_fwd_outputs:], grads):
        assert torch.allclose(got, want, atol=1e-6)


def test_the_switch_is_checked(monkeypatch):
    monkeypatch.setenv("TLM_TRACE_STAMP", "sometimes")
    with pytest.raises(ValueError, match="TLM_TRACE_STAMP='sometimes'"):
        trace_joint(_Stack(), (torch.randn(4, 8),))


def _rank_parallelize_stack(rank, world_size):
    from dist_utils import make_mesh
    from torch_localmap import parallelize

    torch.manual_seed(0)
    model = _Stack(n=6, dim=256).double()
    x = torch.randn(128, 256, dtype=torch.float64)
    # A slow fp64 device: at these small shapes a real H100 would rightly keep it replicated.
    pmodel = parallelize(model, make_mesh((world_size,)), (x,), time_limit=3.0,
                         calibration={"device": {"peak_flops_fp64": 1e11}})
    loss = pmodel(x)
    loss.backward()
    grads = {k: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad) for k, p in
             pmodel.named_parameters()}
    specs = sorted({s for n in pmodel.plan.nodes if n.op not in ("placeholder", "output") for s in n.outputs})
    loss = loss.detach()
    return pmodel.plan.joint.stamped, loss.full_tensor() if hasattr(loss, "full_tensor") else loss, grads, specs


def test_a_stamped_model_trains_on_two_ranks_like_one_process():
    from dist_utils import run_distributed

    torch.manual_seed(0)
    model = _Stack(n=6, dim=256).double()
    x = torch.randn(128, 256, dtype=torch.float64)
    loss = model(x)
    loss.backward()
    for stamped, got_loss, grads, specs in run_distributed(_rank_parallelize_stack, 2, timeout=240):
        assert stamped == "blocks"
        assert specs != ["R"], "expected a plan that shards some ops"
        torch.testing.assert_close(got_loss, loss.detach(), rtol=1e-10, atol=1e-12)
        for k, p in model.named_parameters():
            torch.testing.assert_close(grads[k], p.grad, rtol=1e-10, atol=1e-12, msg=lambda m: f"{k}: {m}")
