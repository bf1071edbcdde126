"""A region's backward reuses its forward's values in the rank program instead of
recomputing them.

A region's backward graph recomputes the part of the region's forward it needs from the
region's saved inputs (hop.py): only global tensors with declared placements cross the
region's boundary. Both graphs are cut from one joint trace, so on a rank the recomputed
ops are node for node the forward region's ops on the same local inputs. This pass makes
each such backward op read its forward twin, so the partitioner saves what backward needs
instead of recomputing it. That matters for ops torch tags as random: SDPA (a dropout_p
argument, drawing nothing at 0) or dropout itself -- recomputed, a random op would draw
again and backward would see another mask; shared, forward and backward use one draw.

Twins are found by key (target, arguments) among the rank-graph nodes that the paired
forward region node produced: a backward region node and its forward node share the
region and the autograd sequence number that aot_autograd records on both.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .._torch_private import node_meta
from .nodes import region_of
from .region import BACKWARD, FORWARD

__all__ = ["region_pairs", "share_region_recompute"]


def region_pairs(fx_nodes) -> dict[int, int]:
    """{backward region node index: its forward region node index} over a joint graph's
    nodes (in plan order). A backward node whose forward cannot be told apart (no sequence
    number, or two forward calls with the same one) is left out: it keeps recomputing."""
    forward: dict[tuple, list[int]] = {}
    backward: list[tuple[int, tuple]] = []
    for i, node in enumerate(fx_nodes):
        region = region_of(node) if node is not None else None
        seq = node.meta.get("seq_nr") if region is not None else None
        if seq is None:
            continue
        key = (region.name, seq)
        if region.role == FORWARD:
            forward.setdefault(key, []).append(i)
        elif region.role == BACKWARD:
            backward.append((i, key))
    return {i: forward[key][0] for i, key in backward if len(forward.get(key, ())) == 1}


def share_region_recompute(gm: fx.GraphModule, pairs: dict[int, int]) -> int:
    """Replaces each rank-graph op of a paired backward region node that equals an op of
    its forward region node (same target, same arguments after earlier replacements) by
    that op; returns how many were replaced. Forward nodes come first in the graph."""
    if not pairs:
        return 0
    tables: dict[int, dict] = {f: {} for f in pairs.values()}
    replaced = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        index = node_meta.plan_node_of(node)
        if index in tables:
            tables[index].setdefault(_key(node), node)
        elif index in pairs:
            twin = tables[pairs[index]].get(_key(node))
            if twin is not None:
                node.replace_all_uses_with(twin)
                gm.graph.erase_node(node)
                replaced += 1
    return replaced


def _key(node: fx.Node):
    return node.target, _frozen(node.args), _frozen(node.kwargs)


def _frozen(value):
    """A hashable stand-in for an FX argument (nodes by identity)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (fx.Node, int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format)):
        return value
    return ("repr", type(value).__name__, repr(value))
