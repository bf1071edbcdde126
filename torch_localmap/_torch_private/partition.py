"""Splitting a joint graph into forward and backward graphs as aot_autograd does, and which
nodes draw random numbers.

Written for torch 2.13 (torch._functorch.partitioners.default_partition).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .op_types import OpOverload


def partition_joint(joint: fx.GraphModule, num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Split a joint graph into forward and backward graphs the way aot_autograd does.

    torch._functorch.partitioners.default_partition (2.13): placeholders named
    "primals_*" / "tangents_*"; the forward graph returns its outputs followed by the
    values saved for backward; the backward takes the saved values then the tangents.
    """
    from torch._functorch.partitioners import default_partition

    fw, bw = default_partition(joint, None, num_fwd_outputs=num_fwd_outputs)
    # The partitioner copies into the backward every forward node it can compute there (a
    # chain from saved values, collectives and random ops on fresh tensors included), read
    # or not, and keeps collectives as side effects. Dead code goes: functional collectives
    # are values (every rank drops the same ones: the graphs come from one plan). Forward
    # keeps its dead random draws (the RNG advances as in eager); backward must not draw.
    fw.graph.eliminate_dead_code(is_impure_node=lambda n: _is_side_effect(n, keep_random=True))
    bw.graph.eliminate_dead_code(is_impure_node=lambda n: _is_side_effect(n, keep_random=False))
    redrawn = [n for n in bw.graph.nodes if _is_random(n) and not _replays_saved_rng(n)]
    if redrawn:
        raise RuntimeError(f"internal error: the backward graph would draw random numbers again "
                           f"({', '.join(str(n.target) for n in redrawn)}); its masks would differ from forward's")
    from .._runtime.recompile import recompile

    for gm in (fw, bw):
        recompile(gm)
    return fw, bw


def is_random_node(node: fx.Node) -> bool:
    return _is_random(node)


def _is_side_effect(node: fx.Node, keep_random: bool) -> bool:
    if getattr(node.target, "namespace", None) == "_c10d_functional":
        return False
    return node.is_impure(impure_random=keep_random)


def _is_random(node: fx.Node) -> bool:
    return isinstance(node.target, OpOverload) and torch.Tag.nondeterministic_seeded in node.target.tags


def _replays_saved_rng(node: fx.Node) -> bool:
    """A seeded op handed the generator state its forward drew (CUDA attention backwards:
    philox_seed and philox_offset) replays those numbers; it draws none of its own."""
    names = {a.name for a in node.target._schema.arguments}
    return {"philox_seed", "philox_offset"} <= names
