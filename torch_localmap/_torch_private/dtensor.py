"""DTensor pieces the runtime and placements use beyond DTensor's public surface.

Written for torch 2.13; dtensor_from_local also serves torches whose from_local has no
grad_placements (2.11, 2.12).
"""
from __future__ import annotations

import copy
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


def mesh_in_layout(mesh, shape):
    """A DeviceMesh over `mesh`'s ranks in row-major order, laid out as `shape` (4 ranks of a
    1-D mesh as 2x2), with no process groups of its own: runtime_mesh gives it the runtime's
    (_runtime/groups.py). DeviceMesh(..., _init_backend=False) as in mesh_from_groups."""
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh(mesh.device_type, mesh.mesh.reshape(tuple(shape)), _init_backend=False)


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


class _LocalTensors(torch.autograd.Function):
    """The local tensors of many DTensors as one autograd node. DTensor.to_local is a node per
    tensor, and its backward builds each gradient through DTensor.from_local: with a model's
    parameters passed in every step, those were milliseconds of Python per step per rank."""

    @staticmethod
    def forward(ctx, *dtensors):
        ctx.specs = [d._spec for d in dtensors]
        ctx.local_strides = [d._local_tensor.stride() for d in dtensors]
        ctx.set_materialize_grads(False)
        # Fresh tensor objects: autograd writes its metadata into the outputs, and a DTensor's
        # own _local_tensor must stay a plain leaf (torch's _ToTorchTensor does the same).
        return tuple(d._local_tensor.view_as(d._local_tensor) for d in dtensors)

    @staticmethod
    def backward(ctx, *grads):
        return tuple(None if g is None else _gradient_dtensor(g, spec, stride)
                     for g, spec, stride in zip(grads, ctx.specs, ctx.local_strides))


def _gradient_dtensor(grad, spec, local_stride):
    """The DTensor gradient of a DTensor with `spec` from its local gradient `grad`, in the
    DTensor's placements (what DTensor.to_local's backward gives for Shard and Replicate)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor._utils import compute_global_tensor_info

    if grad.stride() == local_stride:  # a copy, as torch's own backward makes: specs are not shared
        grad_spec = copy.copy(spec)
    else:
        _, stride = compute_global_tensor_info(grad, spec.mesh, spec.placements)
        meta = spec.tensor_meta
        grad_spec = DTensorSpec(spec.mesh, spec.placements,
                                tensor_meta=TensorMeta(shape=meta.shape, stride=tuple(stride), dtype=meta.dtype))
    return DTensor(grad, grad_spec, requires_grad=grad.requires_grad)


def local_tensors(dtensors) -> list:
    """[d.to_local() for d in dtensors], with one autograd node for all of them (a list with a
    Partial placement goes through to_local): DTensor's private _spec and _local_tensor and its
    (local_tensor, spec, requires_grad=) constructor (2.13; 2.11 and 2.15 have them too)."""
    from torch.distributed.tensor import Partial

    dtensors = list(dtensors)
    if any(isinstance(p, Partial) for d in dtensors for p in d.placements):
        return [d.to_local() for d in dtensors]  # torch's own rule for a Partial's gradient
    recording = torch.is_grad_enabled()
    # A view, never the DTensor's own _local_tensor (which 2.11's to_local returns without grad);
    # None where the autograd node below gives the local tensor.
    out = [None if recording and d.requires_grad else d._local_tensor.view_as(d._local_tensor) for d in dtensors]
    grad = [i for i, local in enumerate(out) if local is None]
    if grad:
        for i, local in zip(grad, _LocalTensors.apply(*[dtensors[i] for i in grad])):
            out[i] = local
    return out
