"""Which of the backward's gradients exist when some forward outputs get no gradient.

Eager autograd leaves `.grad` None on a parameter that no differentiated output depends on:
a model that returns a pooled output beside its loss, whose caller backpropagates the loss
alone, keeps its pooler's gradients None, and AdamW skips those parameters (no weight decay,
no moment update). The rank program's backward is one graph over every tangent; the ones
autograd does not give (outputs nobody differentiated) are fed as zeros, which would hand
those parameters zero gradients, and AdamW then decays and moves them. So each gradient
records which tangents it is computed from; one whose tangents were all absent is returned
as None. Which tangents are absent follows from the caller's loss, the same on every rank,
and the backward graph still runs whole (its collectives stay matched across ranks).
"""
from __future__ import annotations

import torch.fx as fx


def tangent_dependencies(bw: fx.GraphModule, num_tangents: int) -> list:
    """Per output of backward graph `bw` (inputs: saved values, then `num_tangents` tangents):
    the tangents (positions among them) it depends on, as a bit mask (None for an output that
    is not a node)."""
    placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    first_tangent = len(placeholders) - num_tangents
    mask = {n: 1 << (k - first_tangent) if k >= first_tangent else 0 for k, n in enumerate(placeholders)}
    out = None
    for n in bw.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            out = n
            break
        m = 0
        for dep in n.all_input_nodes:
            m |= mask.get(dep, 0)
        mask[n] = m
    if out is None:
        return []
    results = out.args[0]
    results = results if isinstance(results, (list, tuple)) else [results]
    return [mask.get(r) if isinstance(r, fx.Node) else None for r in results]


def drop_gradients_of_absent_tangents(grads, dependencies: list, absent: int) -> list:
    """`grads` with None where an output's tangents (bit mask) are all in `absent` (bit mask of
    the tangents autograd did not give). Outputs that depend on no tangent stay as they are."""
    if not absent:
        return list(grads)
    return [None if d and (d & ~absent) == 0 else g for g, d in zip(grads, dependencies)]
