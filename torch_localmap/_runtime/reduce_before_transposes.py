"""All-reduce a value in the layout it was computed in, where the plan transposes it there and back.

A plan may reduce a weight gradient between two transposes (the solver sees a view as free,
so it is indifferent to which side of one the reduction sits). A collective needs a
contiguous input, so the runtime copies the transposed view first, and the transpose back
after the reduction hands the gradient's consumer a strided view: llama's planned 2x2
program made 20 such copies a step, where the same plan with its reductions next to the
matmuls made none. An all-reduce is taken element by element over the ranks, so it commutes
with any op that only moves elements (the same way on every rank), and a copy changes only
the layout. Two rewrites, where x is contiguous -- only there, so every reader sees the
layout it saw before or a contiguous one:
- P^-1(all_reduce(clone(P(x)))) is all_reduce(x);
- all_reduce(clone(M(x))), where the moves and copies M leave every element where it was, is
  all_reduce(x). fuse_reductions.py leaves these: a gradient reduced over one mesh dim
  between two transposes, then over the other, becomes t(clone(t(x))) before one
  reduction over both (llama's planned 2x2 program: 24 strided copies a step).
Runs after fuse_reductions.py (whose merged reductions keep the transposes before them) and
before bucketing.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .schedule import MOVES_ELEMENTS, is_wait
from .recompile import recompile

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


def _is_copy(node) -> bool:
    return (isinstance(node, fx.Node) and node.op == "call_function" and node.target is _aten.clone.default
            and len(node.args) == 1)


def _moved_copy(ar: fx.Node):
    """(x, the ops from x to `ar`'s input, the element-moving ones among them, in order) when
    `ar`'s input is a copy (clone) of contiguous x through such ops and copies, each read by
    nothing else; else None."""
    copy = ar.args[0]
    if not (_is_copy(copy) and len(copy.users) == 1):
        return None
    chain, x = [copy], copy.args[0]
    while isinstance(x, fx.Node) and len(x.users) == 1 and (_is_copy(x) or (
            x.op == "call_function" and x.target in MOVES_ELEMENTS)):
        chain.append(x)
        x = x.args[0]
    val = x.meta.get("val") if isinstance(x, fx.Node) else None
    if not isinstance(val, torch.Tensor) or not val.is_contiguous():
        return None
    chain.reverse()
    return x, chain, [n for n in chain if n.target in MOVES_ELEMENTS]


def _reduce_source(ar: fx.Node, x: fx.Node, chain) -> None:
    """Makes all-reduce `ar` (and its wait) reduce x, and erases the ops `chain` that led from x to it."""
    ar.args = (x,) + tuple(ar.args[1:])
    for n in [ar] + [u for u in ar.users if is_wait(u)]:
        n.meta["val"] = x.meta["val"]
    for n in reversed(chain):
        n.graph.erase_node(n)


def reduce_before_transposes(gm: fx.GraphModule) -> int:
    """Rewrites P^-1(all_reduce(clone(P(x)))) and all_reduce(clone(M(x))) with M moving no
    element into all_reduce(x) in `gm` (in place; recompiles). Returns how many were
    rewritten (each saves one or more strided copies)."""
    saved = 0
    for ar in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_reduce]:
        found = _moved_copy(ar)
        if found is None or len(ar.users) != 1:
            continue
        x, chain, moves = found
        ndim = x.meta["val"].dim()
        if _undone(moves, ndim):  # the copies and moves before the reduction are a copy of x
            _reduce_source(ar, x, chain)
            saved += 1
            continue
        (wait,) = ar.users
        if not is_wait(wait) or len(wait.users) != 1:
            continue
        (back,) = wait.users
        if back.op != "call_function" or back.target not in MOVES_ELEMENTS or not _undone(moves + [back], ndim):
            continue
        back.replace_all_uses_with(wait)
        gm.graph.erase_node(back)
        _reduce_source(ar, x, chain)
        saved += 1
    if saved:
        gm.graph.lint()
        recompile(gm)
    return saved
