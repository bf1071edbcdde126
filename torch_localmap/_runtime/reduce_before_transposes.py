"""All-reduce a value in the layout it was computed in, where the plan transposes it there and back.

A plan may reduce a weight gradient between two transposes (the solver sees a view as free,
so it is indifferent to which side of one the reduction sits). A collective needs a
contiguous input, so the runtime copies the transposed view first, and the transpose back
after the reduction hands the gradient's consumer a strided view: llama's planned 2x2
program made 20 such copies a step, where the same plan with its reductions next to the
matmuls made none. An all-reduce is taken element by element over the ranks, so it commutes
with any op that only moves elements (the same way on every rank):
P^-1(all_reduce(clone(P(x)))) is all_reduce(x). This pass rewrites the first into the
second where x is contiguous -- only there, so every reader sees the layout it saw before or
a contiguous one. Runs after fuse_reductions.py (whose merged reductions keep the transposes
before them) and before bucketing.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .schedule import MOVES_ELEMENTS, is_wait

_all_reduce = torch.ops._c10d_functional.all_reduce.default
_aten = torch.ops.aten


def _permutation(node: fx.Node, ndim: int):
    """Which input dim each output dim of element-moving op `node` takes, or None."""
    dims = list(range(ndim))
    if node.target is _aten.t.default:
        return dims[::-1] if ndim == 2 else dims
    if node.target is _aten.transpose.int:
        a, b = (int(d) % ndim for d in node.args[1:3])
        dims[a], dims[b] = dims[b], dims[a]
        return dims
    if node.target is _aten.permute.default:
        return [int(d) % ndim for d in node.args[1]]
    return None


def _undone(moves, ndim: int) -> bool:
    """Whether `moves`, applied in order, leave every dim where it was."""
    total = list(range(ndim))
    for m in moves:
        q = _permutation(m, ndim)
        if q is None or len(q) != ndim:
            return False
        total = [total[i] for i in q]
    return total == list(range(ndim))


def _moved_copy(ar: fx.Node):
    """(x, its copy, the element-moving ops from x to the copy, in order) when `ar`'s input
    is a copy (clone) of contiguous x through such ops, each read by nothing else; else None."""
    copy = ar.args[0]
    if not (isinstance(copy, fx.Node) and copy.op == "call_function" and copy.target is _aten.clone.default
            and len(copy.users) == 1 and len(copy.args) == 1):
        return None
    moves, x = [], copy.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target in MOVES_ELEMENTS and len(x.users) == 1:
        moves.append(x)
        x = x.args[0]
    val = x.meta.get("val") if isinstance(x, fx.Node) else None
    if not moves or not isinstance(val, torch.Tensor) or not val.is_contiguous():
        return None
    return x, copy, moves[::-1]


def reduce_before_transposes(gm: fx.GraphModule) -> int:
    """Rewrites P^-1(all_reduce(clone(P(x)))) into all_reduce(x) in `gm` (in place;
    recompiles). Returns how many were rewritten (two strided copies saved each)."""
    saved = 0
    for ar in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_reduce]:
        found = _moved_copy(ar)
        if found is None or len(ar.users) != 1:
            continue
        x, copy, moves = found
        (wait,) = ar.users
        if not is_wait(wait) or len(wait.users) != 1:
            continue
        (back,) = wait.users
        if back.op != "call_function" or back.target not in MOVES_ELEMENTS or not _undone(moves + [back], x.meta["val"].dim()):
            continue
        ar.args = (x,) + tuple(ar.args[1:])
        for n in (ar, wait):
            n.meta["val"] = x.meta["val"]
        back.replace_all_uses_with(wait)
        gm.graph.erase_node(back)
        gm.graph.erase_node(copy)
        for m in reversed(moves):
            gm.graph.erase_node(m)
        saved += 1
    if saved:
        gm.graph.lint()
        gm.recompile()
    return saved
