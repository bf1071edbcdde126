"""Reshard after forward: gathered parameters are freed after their last forward use
and gathered again in backward (FSDP2's reshard_after_forward), instead of being
saved for backward.

Marks, in a rank's joint graph, the forward nodes computed from parameters alone
through a collective (the shard's padding, the gather, its fold, a mixed-precision
cast, a transpose) as must-recompute; aot_autograd's partitioner then saves the
parameter shards (which live anyway) and copies those nodes into the backward
graph. The overlap schedule prefetches the copies there like in forward.
"""
from __future__ import annotations

import torch.fx as fx

from .._torch_private import node_meta, partition
from .schedule import is_collective


def parameter_derived(joint: fx.GraphModule, param_placeholders: set) -> set:
    """Forward nodes computed from parameters alone (their gathers, casts, transposes),
    the parameter placeholders included; random ops never (a redraw changes the values)."""
    derived = set()
    for n in joint.graph.nodes:
        if n.op == "placeholder":
            if n.name in param_placeholders:
                derived.add(n)
        elif (n.op == "call_function" and node_meta.is_forward_node(n) and n.all_input_nodes
              and all(a in derived for a in n.all_input_nodes) and not partition.is_random_node(n)):
            derived.add(n)
    return derived


def parameter_gathers(joint: fx.GraphModule, param_placeholders: set) -> list:
    """Forward nodes computed from parameters alone, in the cone of a collective
    (upstream of one, or downstream of one), in graph order."""
    derived = parameter_derived(joint, param_placeholders)
    below = set()  # downstream of a collective (the collective included)
    for n in joint.graph.nodes:
        if n in derived and (is_collective(n) or any(a in below for a in n.all_input_nodes)):
            below.add(n)
    above = set()  # upstream of a collective
    for n in reversed(list(joint.graph.nodes)):
        if n in derived and any(u in derived and (is_collective(u) or u in above) for u in n.users):
            above.add(n)
    return [n for n in joint.graph.nodes if n.op != "placeholder" and (n in below or n in above)]


def kept_gather_bytes(joint: fx.GraphModule, param_placeholders: set) -> int:
    """Bytes of gathered parameter values backward reads: what the forward saves for
    backward when they are not resharded."""
    total = 0
    for n in parameter_gathers(joint, param_placeholders):
        if any(not node_meta.is_forward_node(u) for u in n.users):
            val = n.meta.get("val")
            total += val.numel() * val.element_size() if hasattr(val, "numel") else 0
    return total


def mark_reshard_after_forward(joint: fx.GraphModule, param_placeholders: set) -> int:
    """Marks the parameter gathers for recomputation in backward; returns how many nodes."""
    nodes = parameter_gathers(joint, param_placeholders)
    for n in nodes:
        node_meta.mark_must_recompute(n)
    return len(nodes)
