"""The plan's recompute choices in the rank program (core/recompute.h decides them).

A plan node the solver chose to recompute is traced into the rank program as a few local
ops (its inputs' collectives, their local chunks or views, then the op), each tagged with
the plan node's index (node_meta.tag_plan_node). Tagging those ops MUST_RECOMPUTE makes the
partitioner (default_partition) leave the value out of what forward saves and compute it
again in backward from its inputs, which the plan keeps (or recomputes in turn).

An activation's collective is tagged with its reader: the plan prices that move a second
time (backward issues it again), and saving its output instead would keep bytes the plan
freed. A parameter's gather is left to reshard-after-forward (reshard.py), which decides
whether backward gathers it again or reads the one forward kept: the plan prices it free.
"""
from __future__ import annotations

import torch.fx as fx

from .._torch_private import node_meta
from .reshard import parameter_derived
from .schedule import is_collective


def mark_planned_recompute(joint: fx.GraphModule, plan_nodes, param_placeholders=()) -> int:
    """Tags the forward ops of `plan_nodes` (plan node indices) for recompute in backward,
    their activations' collectives included; returns how many ops were tagged."""
    wanted = set(plan_nodes)
    if not wanted:
        return 0
    of_parameters = parameter_derived(joint, set(param_placeholders))
    count = 0
    for n in joint.graph.nodes:
        if n.op != "call_function" or not node_meta.is_forward_node(n):
            continue
        if is_collective(n) and n in of_parameters:  # a parameter's gather: reshard.py's call
            continue
        if node_meta.plan_node_of(n) in wanted:
            node_meta.mark_must_recompute(n)
            count += 1
    return count
