"""`with_sharding_constraint(x, placements, grad_placements=None)`: pin a value's placements.

On DTensors it redistributes now (and the gradient to `grad_placements` on the way
back), as DTensor's own `redistribute` does. On plain (global) tensors it records
`torch.ops.localmap.sharding_constraint` -- a C++ op whose Autograd kernel puts the
same op on the gradient -- so the constraint is a node of every traced graph
(make_fx, AOTAutograd joint graphs, torch.export) and the planner pins it.
local_map region boundaries are made of the same op (decorator.py).
"""
from __future__ import annotations

import torch

from .._mesh import MeshSpec
from ..placements import as_spec, placements_of, spec_parts
from .decorator import current_mesh
from .ops import constrain

__all__ = ["with_sharding_constraint"]


def _mesh_ndim(device_mesh) -> int | None:
    mesh = device_mesh if device_mesh is not None else current_mesh()
    if mesh is None:
        return None
    if isinstance(mesh, MeshSpec):
        return len(mesh.shape)
    if isinstance(mesh, (tuple, list)):
        return len(mesh)
    return mesh.ndim


def with_sharding_constraint(x: torch.Tensor, placements, grad_placements=None, *, device_mesh=None):
    """`x` placed as `placements` (a spec string such as "S(0)R" or a sequence of torch
    placements, one per mesh dim); its gradient placed as `grad_placements` (default: the
    gradient of `placements`, Partial -> Replicate).

    The mesh is x's (DTensor), `device_mesh`, or the mesh in use (parallelize, the
    backend); a plain tensor outside any mesh is checked against the spec's own length.
    """
    from torch.distributed.tensor import DTensor

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"with_sharding_constraint: x must be a torch.Tensor or DTensor, got {type(x).__name__}")
    if isinstance(x, DTensor):
        if device_mesh is not None and device_mesh != x.device_mesh:
            raise ValueError(f"with_sharding_constraint: device_mesh {device_mesh} differs from x's mesh "
                             f"{x.device_mesh}")
        return _constrain_dtensor(x, placements, grad_placements)
    mesh_ndim = _mesh_ndim(device_mesh)
    spec = as_spec(placements, mesh_ndim, x.dim(), "with_sharding_constraint: placements")
    grad = None if grad_placements is None else as_spec(grad_placements, mesh_ndim if mesh_ndim is not None
                                                        else len(spec_parts(spec)), x.dim(),
                                                        "with_sharding_constraint: grad_placements")
    return constrain(x, spec, grad)


class _GradTo(torch.autograd.Function):
    """Identity on a DTensor whose gradient is redistributed to `placements`."""

    @staticmethod
    def forward(ctx, x, placements):
        ctx.placements = placements
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g.redistribute(placements=list(ctx.placements)), None


def _constrain_dtensor(x, placements, grad_placements):
    mesh = x.device_mesh
    spec = as_spec(placements, mesh.ndim, x.dim(), "with_sharding_constraint: placements")
    y = x.redistribute(placements=list(placements_of(spec)))
    if grad_placements is None:
        return y
    gspec = as_spec(grad_placements, mesh.ndim, x.dim(), "with_sharding_constraint: grad_placements")
    return _GradTo.apply(y, placements_of(gspec))
