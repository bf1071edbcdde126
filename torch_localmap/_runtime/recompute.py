"""The plan's recompute choices in the rank program (core/recompute.h decides them).

A plan node the solver chose to recompute is traced into the rank program as a few local
ops (its input's local chunk or view, then the op), each tagged with the plan node's
index (node_meta.tag_plan_node). Tagging those ops MUST_RECOMPUTE makes the partitioner
(default_partition) leave the value out of what forward saves and compute it again in
backward from its inputs, which the plan keeps (or recomputes in turn). Collectives are
never tagged: the plan only recomputes values whose inputs arrive without one.
"""
from __future__ import annotations

import torch.fx as fx

from .._torch_private import node_meta
from .schedule import is_collective


def mark_planned_recompute(joint: fx.GraphModule, plan_nodes) -> int:
    """Tags the forward ops of `plan_nodes` (plan node indices) for recompute in backward;
    returns how many ops were tagged."""
    wanted = set(plan_nodes)
    if not wanted:
        return 0
    count = 0
    for n in joint.graph.nodes:
        if n.op != "call_function" or is_collective(n) or not node_meta.is_forward_node(n):
            continue
        if node_meta.plan_node_of(n) in wanted:
            node_meta.mark_must_recompute(n)
            count += 1
    return count
