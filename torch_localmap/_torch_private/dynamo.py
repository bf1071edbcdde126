"""Dynamo: the backend we register, what its graphs record about their inputs and outputs,
and keeping its compilation out of our way.

Written for torch 2.13 (torch._dynamo, node.meta["grapharg"] / ["example_value"]).
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx

from .pytrees import pytree


def aot_autograd_backend(**kwargs):
    """torch._dynamo.backends.common.aot_autograd (2.13): a Dynamo backend from forward/
    backward compilers and a partition function."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(**kwargs)


def dynamo_input_sources(gm: fx.GraphModule) -> list:
    """Per placeholder of a Dynamo graph, the name of the Python value it was read from
    (node.meta["grapharg"].source, 2.13: "L['self']._modules['fc']._parameters['weight']",
    "L['x']"), or None."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            arg = n.meta.get("grapharg")
            source = getattr(arg, "source", None)
            out.append(source.name if source is not None else None)
    return out


def dynamo_scalar_inputs(gm: fx.GraphModule) -> list:
    """Per placeholder of a Dynamo graph, whether it is a Python number Dynamo passes as a
    0-d tensor (node.meta["grapharg"].pass_arg_as_tensor, 2.13: unspecialized floats such
    as BatchNorm's momentum under dynamic=True, read back with .item())."""
    return [bool(getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False))
            for n in gm.graph.nodes if n.op == "placeholder"]


def graph_output_examples(gm: fx.GraphModule) -> list:
    """The example value Dynamo recorded for each output of its graph (node.meta
    ["example_value"], 2.13), None where absent; flattened like the graph's output."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    nodes = pytree.tree_leaves(out.args[0], is_leaf=lambda x: isinstance(x, fx.Node))
    return [n.meta.get("example_value") if isinstance(n, fx.Node) else None for n in nodes]


def opaque_to_dynamo(fn):
    """torch._dynamo.allow_in_graph (2.13): Dynamo records a call to `fn` as one graph node
    (running it on fake tensors for shapes) instead of tracing into it; aot_autograd then
    traces through it, where the local_map HOP takes over."""
    return torch._dynamo.allow_in_graph(fn)


@contextlib.contextmanager
def compiled_code_runs_eagerly():
    """Context in which every torch.compile'd function and module (OptimizedModule) runs its
    original Python code, not a compiled graph (torch.compiler.set_stance("force_eager"),
    2.13: the Dynamo frame callback is off). flex_attention's own eager path then calls its
    higher-order op directly (torch.nn.attention.flex_attention, 2.13), which make_fx traces
    into one `flex_attention` node with its score_mod / mask_mod subgraphs; its warning that
    it runs "without torch.compile()" is about eager execution, not a trace, and is silenced."""
    import warnings

    with torch.compiler.set_stance("force_eager"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield
