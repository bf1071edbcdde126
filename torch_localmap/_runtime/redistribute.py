"""Executes C++ redistribution plans on one rank's local tensor.

    redistribute_local(local, global_shape, device_mesh, src_spec, dst_spec) -> Tensor
    shard_local(global_tensor, device_mesh, spec, coord=None) -> Tensor

redistribute_local is `torch.ops.localmap.redistribute` (csrc/torch/ops): C++ runs
core's per-rank steps with `_c10d_functional` collectives through the dispatcher
(gloo or NCCL, whatever the mesh's groups are); eagerly it communicates, under
make_fx it is one node (its Meta kernel gives this rank's local shape) and its C++
Autograd kernel is the transposed redistribution.

Results equal DTensor's `redistribute` (torch 2.13): the same steps, the same
torch.chunk-style uneven shards, zero padding for the collectives.
"""
from __future__ import annotations

import functools
from typing import Sequence

import torch

from .. import _C
from .._device import check_tensor_device
from ..placements import SpecLike, as_spec

__all__ = ["redistribute_local", "shard_local", "plan_for", "group_names"]


@functools.lru_cache(maxsize=4096)
def plan_for(global_shape: tuple[int, ...], mesh_shape: tuple[int, ...], src: str, dst: str,
             coord: tuple[int, ...]) -> tuple[dict, ...]:
    """The steps one mesh coordinate runs (see _C.plan_redistribute for the dict keys)."""
    return tuple(_C.plan_redistribute(list(global_shape), list(mesh_shape), src, dst, list(coord)))


def _local_partition(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    # Replicate -> Partial: the n equal partial values must reduce back to the
    # value; only sum needs rewriting (avg/max/min of equal values are exact).
    if step["reduce"] == "sum":
        return local / n
    return local


def _mesh_coord(device_mesh, coord: Sequence[int] | None) -> tuple[int, ...] | None:
    if coord is not None:
        return tuple(int(c) for c in coord)
    c = device_mesh.get_coordinate()
    return None if c is None else tuple(int(x) for x in c)


def redistribute_local(local: torch.Tensor, global_shape: Sequence[int], device_mesh, src_spec: SpecLike,
                       dst_spec: SpecLike) -> torch.Tensor:
    """This rank's local tensor of a `global_shape` tensor moved from `src_spec` to `dst_spec`.

    Specs are strings ("S(0)R") or sequences of torch placements. Raises ValueError for bad
    specs and for transitions DTensor refuses (Shard -> Partial, between Partial kinds, ...).
    """
    shape = tuple(int(s) for s in global_shape)
    mesh_shape = tuple(int(s) for s in device_mesh.shape)
    src = as_spec(src_spec, len(mesh_shape), len(shape), "source placements")
    dst = as_spec(dst_spec, len(mesh_shape), len(shape), "target placements")
    coord = _mesh_coord(device_mesh, None)
    if coord is None:  # this rank is not in the mesh: nothing to hold, as in DTensor
        return local
    check_tensor_device(local, torch.device(device_mesh.device_type), "redistribute_local: the local tensor")
    return torch.ops.localmap.redistribute(local, list(shape), src, dst, list(mesh_shape), list(coord),
                                           group_names(device_mesh))


def group_names(device_mesh) -> list[str]:
    """The registered process-group name of each mesh dim (what functional collectives take)."""
    return [device_mesh.get_group(d).group_name for d in range(device_mesh.ndim)]


def shard_local(global_tensor: torch.Tensor, device_mesh, spec: SpecLike,
                coord: Sequence[int] | None = None) -> torch.Tensor:
    """The local tensor a rank at `coord` (default: this rank) holds of `global_tensor` under `spec`.

    Same as redistributing a replicated tensor: Shard dims are cut torch.chunk-style, Partial(sum)
    dims divide by the mesh dim size, Partial(avg|max|min) keep the value. No communication.
    `device_mesh` may be a DeviceMesh or a mesh shape (then `coord` is required).
    """
    mesh_shape = tuple(int(s) for s in (device_mesh if isinstance(device_mesh, (tuple, list))
                                        else device_mesh.shape))
    shape = tuple(int(s) for s in global_tensor.shape)
    canonical = as_spec(spec, len(mesh_shape), len(shape), "placements")
    if coord is None and isinstance(device_mesh, (tuple, list)):
        raise ValueError("shard_local: coord is required when device_mesh is given as a shape")
    c = _mesh_coord(device_mesh, coord)
    if c is None:
        raise ValueError("shard_local: this rank is not part of the device mesh; pass coord explicitly")
    local_shape, offset = _C.local_layout(list(shape), list(mesh_shape), canonical, list(c))
    out = global_tensor
    for d, (size, start) in enumerate(zip(local_shape, offset)):
        if size != shape[d]:
            out = out.narrow(d, start, size)
    out = out.clone()
    # Partial(sum) dims divide once per mesh dim, in mesh-dim order, as the
    # Replicate -> Partial steps of a redistribution would.
    for step in plan_for(shape, mesh_shape, "R" * len(mesh_shape), canonical, c):
        if step["kind"] == "local_partition":
            out = _local_partition(out, step, mesh_shape[step["mesh_dim"]], "")
    return out
