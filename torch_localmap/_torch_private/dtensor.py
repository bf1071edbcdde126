"""DTensor pieces the runtime and placements use beyond DTensor's public surface.

Written for torch 2.13; dtensor_from_local also serves torches whose from_local has no
grad_placements (2.11, 2.12).
"""
from __future__ import annotations

import functools

import torch


def implicit_replication():
    """torch.distributed.tensor.experimental.implicit_replication (2.13, experimental):
    plain tensors mixed into DTensor ops count as replicated."""
    from torch.distributed.tensor.experimental import implicit_replication as ctx

    return ctx()


def async_collective_tensor_type() -> type:
    """torch.distributed._functional_collectives.AsyncCollectiveTensor (2.13): what a
    DTensor's to_local() may return before its collective finished."""
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    return AsyncCollectiveTensor


def strided_shard_type() -> type:
    """torch.distributed.tensor.placement_types._StridedShard (2.13).

    DTensor's placement for non-default shard orders; our spec strings cannot express it, so
    placements.py must recognize it to refuse it clearly (it is not a Shard subclass).
    """
    from torch.distributed.tensor.placement_types import _StridedShard

    return _StridedShard


def mesh_from_groups(mesh, groups):
    """A DeviceMesh with `mesh`'s ranks, layout, device type and dim names whose dim i
    communicates over `groups[i]` (this rank's group along that dim).

    What torch.distributed.device_mesh.DeviceMesh.from_group does (2.13), without its
    requirement that an N-D mesh have dim names: DeviceMesh(..., _init_backend=False),
    then `_dim_group_names` and `_pg_registry`. Equal (==) to `mesh`, so DTensors on
    either mesh mix."""
    from torch.distributed.device_mesh import DeviceMesh

    out = DeviceMesh(mesh.device_type, mesh.mesh, mesh_dim_names=mesh.mesh_dim_names, _init_backend=False)
    out._dim_group_names = [g.group_name for g in groups]
    for g in groups:
        out._pg_registry[g.group_name] = g
    return out


@functools.cache
def _from_local_takes_grad_placements() -> bool:
    import inspect

    from torch.distributed.tensor import DTensor

    return "grad_placements" in inspect.signature(DTensor.from_local).parameters


class _FromLocalWithGrad(torch.autograd.Function):
    """DTensor.from_local whose gradient arrives in `grad_placements` (torch before 2.13
    lacks the argument: its from_local sends a Partial output's gradient back Replicate)."""

    @staticmethod
    def forward(ctx, local, mesh, placements, shape, stride, grad_placements):
        from torch.distributed.tensor import DTensor

        ctx.mesh, ctx.grad_placements = mesh, tuple(grad_placements)
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        local = grad.to_local()
        if grad.placements != ctx.grad_placements:  # as 2.13's from_local does (Partial allowed)
            from torch.distributed.tensor._dtensor_spec import DTensorSpec
            from torch.distributed.tensor._redistribute import redistribute_local_tensor

            target = DTensorSpec(ctx.mesh, ctx.grad_placements, tensor_meta=grad._spec.tensor_meta)
            local = redistribute_local_tensor(local, grad._spec, target)
        return local, None, None, None, None, None


def dtensor_from_local(local, mesh, placements, shape, stride, grad_placements):
    """DTensor.from_local(local, ..., run_check=False, shape=, stride=, grad_placements=) on
    every supported torch."""
    from torch.distributed.tensor import DTensor

    if _from_local_takes_grad_placements():
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape, stride=stride,
                                  grad_placements=grad_placements)
    return _FromLocalWithGrad.apply(local, mesh, placements, shape, stride, grad_placements)
