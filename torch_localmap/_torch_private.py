"""Every private torch API we use, wrapped in one place.

Written against torch 2.13. If an upgrade breaks one of these, this is the only
file to change.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx


def export_joint(stack: contextlib.ExitStack, module: torch.nn.Module, args: tuple):
    """Joint forward+backward aten graph of `module(*args)` with input/output descriptors.

    torch._functorch.aot_autograd.aot_export_joint_with_descriptors (2.13). The graph's
    placeholders carry meta["desc"] (ParamAOTInput / BufferAOTInput / PlainAOTInput /
    TangentAOTInput) and the output node's meta["desc"] lists PlainAOTOutput / GradAOTOutput.
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    return aot_export_joint_with_descriptors(stack, module, args)


def describe_input(desc) -> tuple[str, str]:
    """(role, name) of a joint-graph placeholder descriptor."""
    from torch._functorch._aot_autograd import descriptors as d

    if isinstance(desc, d.ParamAOTInput):
        return "param", desc.target
    if isinstance(desc, d.BufferAOTInput):
        return "buffer", desc.target
    if isinstance(desc, d.TangentAOTInput):
        return "tangent", ""
    if isinstance(desc, d.PlainAOTInput):
        return "input", str(desc.idx)
    return "input", ""


def describe_output(desc) -> tuple[str, str]:
    """(role, name) of a joint-graph output descriptor: ("output", idx) or ("grad", param fqn)."""
    from torch._functorch._aot_autograd import descriptors as d

    if desc is None:
        return "none", ""
    if isinstance(desc, d.GradAOTOutput):
        role, name = describe_input(desc.grad_of)
        return ("grad", name) if role == "param" else ("input_grad", name)
    if isinstance(desc, d.PlainAOTOutput):
        return "output", str(desc.idx)
    return "output", ""


def partition_joint(joint: fx.GraphModule, num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Split a joint graph into forward and backward graphs the way aot_autograd does.

    torch._functorch.partitioners.default_partition (2.13): placeholders named
    "primals_*" / "tangents_*"; the forward graph returns its outputs followed by the
    values saved for backward; the backward takes the saved values then the tangents.
    """
    from torch._functorch.partitioners import default_partition

    fw, bw = default_partition(joint, None, num_fwd_outputs=num_fwd_outputs)
    for gm in (fw, bw):  # the partitioner can leave recomputed values nobody reads
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return fw, bw


def strided_shard_type() -> type:
    """torch.distributed.tensor.placement_types._StridedShard (2.13).

    DTensor's placement for non-default shard orders; our spec strings cannot express it, so
    placements.py must recognize it to refuse it clearly (it is not a Shard subclass).
    """
    from torch.distributed.tensor.placement_types import _StridedShard

    return _StridedShard


def outside_fake_mode():
    """Context that suspends an active FakeTensorMode (torch._subclasses.fake_tensor, 2.13).

    aot_autograd calls our partition function with fake mode active; sending the plan
    between ranks must move real bytes.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()
