"""One reduction over several mesh dims instead of one per dim.

A value that is Partial on mesh dims a and b and needed Replicate on both (a data-parallel
gradient on a 2-D mesh, above all) is redistributed one mesh dim at a time, as DTensor
does: an all-reduce over dim a's group, then one over dim b's. One all-reduce over the
ranks of both dims gives the same sum (or mean, max, min) in one collective -- what DDP
does over all its ranks -- and moves about half the data. This pass finds such chains in a
rank program (an all-reduce whose input is, through views only, the waited result of
another all-reduce with the same reduce op and no other user) and merges them onto the
runtime's combined group (groups.combined_group_name). Runs before bucketing, so the
merged reductions are bucketed together.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .groups import combined_group_name
from .schedule import SAME_VALUES, is_wait

_all_reduce = torch.ops._c10d_functional.all_reduce.default
_aten = torch.ops.aten


def _chained_reduction(ar: fx.Node):
    """The all-reduce whose waited result, through value-keeping ops with one user each,
    is `ar`'s input; None if there is none. Returns (that all-reduce, the nodes between,
    nearest to `ar` first, its wait last)."""
    between, x = [], ar.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target in SAME_VALUES and len(x.users) == 1:
        between.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and is_wait(x) and len(x.users) == 1):
        return None
    first = x.args[0]
    if first.target is not _all_reduce or len(first.users) != 1 or first.args[1] != ar.args[1]:
        return None
    return first, between + [x]  # in erasing order: the node next to `ar` first


def fuse_mesh_dim_reductions(gm: fx.GraphModule) -> int:
    """Merges chained per-mesh-dim all-reduces of `gm` (in place; recompiles). Returns how
    many reductions were saved."""
    saved = 0
    for ar in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_reduce]:
        found = _chained_reduction(ar)
        if found is None:
            continue
        first, between = found
        group = combined_group_name([first.args[2], ar.args[2]])
        if group is None:
            continue
        val = ar.args[0].meta.get("val")
        x = first.args[0]
        if val is not None and tuple(x.meta["val"].shape) != tuple(val.shape):
            with gm.graph.inserting_before(ar):
                x = gm.graph.call_function(_aten.view.default, (x, list(val.shape)))
                x.meta["val"] = val
        ar.args = (x, ar.args[1], group)
        for n in between:
            gm.graph.erase_node(n)
        gm.graph.erase_node(first)
        saved += 1
    if saved:
        gm.graph.lint()
        gm.recompile()
    return saved
