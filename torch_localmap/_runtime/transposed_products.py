"""Transposed matrix products computed in the layout they are used in.

A linear layer's weight gradient comes out of the traced backward as `t(mm(a, b))`: the
gradient of the `t(w)` the forward multiplied by, transposed back. Its result is a
transposed view, so every later step that needs the gradient's memory in order copies it:
the gradient bucket's flatten (bucketing.py: a clone, then the concatenation) and
AccumulateGrad, which gives `param.grad` the parameter's strides. `mm(t(b), t(a))` is the
same matrix, made contiguous by the product itself (BLAS reads transposed operands in
place), so those copies go. Inductor does this on its own; the eager runtime needs it.

Only where the layout cannot matter: the transposed value's readers are the backward's
output (the gradients) and collectives, whose results are contiguous whatever their input's
layout. A view of it could fail on the other layout, and a saved forward value is read by
backward code traced against its strides.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .._torch_private import fake_tensors
from .schedule import REGION_META
from .recompile import recompile

aten = torch.ops.aten
_TRANSPOSES = (aten.t.default,)


def _layout_free_reader(node: fx.Node) -> bool:
    return node.op == "output" or getattr(node.target, "namespace", None) == "_c10d_functional"


def _transposed_product(node: fx.Node):
    """`node`'s mm if `node` is `t(mm(a, b))`, nothing else reads that mm and only
    layout-free readers read `node`; else None."""
    if node.op != "call_function" or node.target not in _TRANSPOSES:
        return None
    if not all(_layout_free_reader(u) for u in node.users):
        return None
    mm = node.args[0]
    if not (isinstance(mm, fx.Node) and mm.op == "call_function" and mm.target is aten.mm.default
            and len(mm.users) == 1):
        return None
    return mm


def contiguous_transposed_products(gm: fx.GraphModule) -> int:
    """Rewrites each `t(mm(a, b))` of the backward graph `gm` whose mm has no other reader and
    whose readers are layout-free as `mm(t(b), t(a))` (in place; recompiles). Returns how
    many were rewritten."""
    found = [(n, mm) for n in gm.graph.nodes if (mm := _transposed_product(n)) is not None]
    if not found:
        return 0
    mode = fake_tensors.fake_mode_of([mm.meta["val"] for _, mm in found if "val" in mm.meta])
    for node, mm in found:
        a, b = mm.args
        with gm.graph.inserting_before(node):
            tb = gm.graph.call_function(aten.t.default, (b,))
            ta = gm.graph.call_function(aten.t.default, (a,))
            product = gm.graph.call_function(aten.mm.default, (tb, ta))
        for new in (tb, ta, product):
            new.meta.update({k: mm.meta[k] for k in REGION_META if k in mm.meta})  # the mm's region
        if all(isinstance(x.meta.get("val"), torch.Tensor) for x in (a, b)):
            with mode:
                tb.meta["val"] = b.meta["val"].t()
                ta.meta["val"] = a.meta["val"].t()
                product.meta["val"] = torch.mm(tb.meta["val"], ta.meta["val"])
        node.replace_all_uses_with(product)
        gm.graph.erase_node(node)
        gm.graph.erase_node(mm)
    gm.graph.lint()
    recompile(gm)
    return len(found)
