"""Views that change nothing, removed from an eager rank program.

The partitioned graphs keep every view aten's decompositions wrote, and some return their
input unchanged: `view` / `_unsafe_view` / `reshape` to the shape the value already has
(a gradient flattened and unflattened to the same shape, a reshape a decomposition writes
for any rank). Each is one more Python line and dispatch per step: the MoE's backward on
DDP's plan had 32 such views among its 381 ops. The cost model prices views at nothing.
`alias` and the `detach` the partitioner puts on saved values stay: the cost model prices
each at one dispatch (csrc/core/strategies/pointwise.cpp says why), and a plan that
recomputes one has backward run it again.

A node is removed when its value has its input's shape, strides and dtype (the same
elements at the same addresses: the same tensor in every way a later op can see). Forward's
outputs stay (they become autograd's results and saved values, where an input returned as an
output, or one tensor returned twice, means something else). Backward's outputs are
gradients: an alias there is removed when its input is an op's value that no other output
holds, so no two parameters are handed one tensor as their `.grad` (accumulation into one
would reach the other) -- backward's flattened-and-unflattened 1-D gradients out of a bucket.
Run before reduce_in_place, which then sees the readers of the value itself rather than of
an alias. For eager programs only: Inductor removes them itself.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .recompile import recompile

aten = torch.ops.aten
_VIEW_OPS = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default})


def _unchanged(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target not in _VIEW_OPS or not node.args:
        return False
    src = node.args[0]
    if not isinstance(src, fx.Node):
        return False
    out, val = node.meta.get("val"), src.meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(val, torch.Tensor):
        return False
    return (out.dtype == val.dtype and tuple(out.shape) == tuple(val.shape)
            and tuple(out.stride()) == tuple(val.stride()) and out.storage_offset() == val.storage_offset())


def _is_output(node: fx.Node) -> bool:
    return any(user.op == "output" for user in node.users)


def drop_unchanged_aliases(gm: fx.GraphModule, outputs_are_gradients: bool = False) -> int:
    """Removes the views of `gm` that return their input unchanged; returns how many.
    `outputs_are_gradients`: `gm` is a backward graph (see the module's note)."""
    dropped = 0
    for node in list(gm.graph.nodes):
        if not _unchanged(node):
            continue
        src = node.args[0]
        if _is_output(node) and not (outputs_are_gradients and src.op == "call_function" and not _is_output(src)):
            continue
        node.replace_all_uses_with(src)
        gm.graph.erase_node(node)
        dropped += 1
    if dropped:
        recompile(gm)
    return dropped
