"""The eager rank program's most frequent aten ops called through torch's Python bindings.

A traced graph calls each op as an OpOverload (`torch.ops.aten.view.default(x, size)`). That
call goes through the boxed path: its Python arguments are matched against the op's schema and
converted to IValues one by one, then the op is called boxed. `torch.Tensor.view(x, size)` and
`torch.bmm(a, b)` are the generated bindings, parsed once and called unboxed: about 1 us less
per call on CPU (2.2 against 1.3 us for a view, a permute, a mul and a clone in a row). A
planned MoE step runs about 600 ops, most of them views, transposes and products, and with 4
ranks on 2 cores every microsecond of a rank's CPU shows twice in the step
(docs/benchmarks_log.md). DDP's model runs those same ops through the bindings.

Only ops whose binding takes the overload's arguments as the graph passes them (positionally,
the same keyword names) and resolves to that same overload are listed; the rest keep their
OpOverload. The graph is otherwise unchanged: node metadata, order and names stay, so the
passes and reports that read the program still see their nodes. Inductor (ExecutionOptions
.compile) is given the OpOverload graph, so this runs only for eager programs.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .recompile import recompile

aten = torch.ops.aten

# OpOverload -> the binding that runs the same kernel with the same arguments.
DIRECT = {
    aten.view.default: torch.Tensor.view,
    aten.expand.default: torch.Tensor.expand,
    aten.permute.default: torch.permute,
    aten.transpose.int: torch.transpose,
    aten.t.default: torch.t,
    aten.unsqueeze.default: torch.unsqueeze,
    aten.squeeze.dim: torch.squeeze,
    aten.select.int: torch.select,
    aten.detach.default: torch.detach,
    aten.clone.default: torch.clone,
    aten.mm.default: torch.mm,
    aten.bmm.default: torch.bmm,
    aten.addmm.default: torch.addmm,
    aten.mul.Tensor: torch.mul,
    aten.add.Tensor: torch.add,
    aten.sub.Tensor: torch.sub,
    aten.div.Tensor: torch.div,
    aten.neg.default: torch.neg,
    aten.sum.dim_IntList: torch.sum,
    aten.mean.dim: torch.mean,
    aten.cat.default: torch.cat,
    aten.split_with_sizes.default: torch.split_with_sizes,
    aten.stack.default: torch.stack,
    aten.unbind.int: torch.unbind,
    aten.div.Scalar: torch.div,
    aten.mean.default: torch.mean,
    aten.pow.Tensor_Scalar: torch.pow,
    aten.rsqrt.default: torch.rsqrt,
    aten.exp.default: torch.exp,
    aten.eq.Tensor: torch.eq,
    aten.lt.Scalar: torch.lt,
    aten.where.self: torch.where,
    aten.cumsum.default: torch.cumsum,
    aten.silu.default: torch._C._nn.silu,
    aten.embedding.default: torch.embedding,
    aten._softmax.default: torch._softmax,
    aten._log_softmax.default: torch._log_softmax,
    aten.native_layer_norm.default: torch.native_layer_norm,
}


def call_directly(gm: fx.GraphModule) -> int:
    """Points the listed ops' nodes of `gm` at their bindings; returns how many."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op == "call_function":
            direct = DIRECT.get(node.target)
            if direct is not None:
                node.target = direct
                changed += 1
    if changed:
        recompile(gm)
    return changed
