"""Executes C++ redistribution plans on one rank's local tensor.

    redistribute_local(local, global_shape, device_mesh, src_spec, dst_spec) -> Tensor
    shard_local(global_tensor, device_mesh, spec, coord=None) -> Tensor

The plan (which collectives, on which mesh dims, in which order, with which
padding) comes from `_C.plan_redistribute`, cached per (shape, mesh shape, specs,
coordinate). Collectives are `torch.ops._c10d_functional` ops followed by
`wait_tensor`, so the same code runs eagerly and under make_fx tracing (the
traced graph then holds this rank's sizes: uneven shards differ per rank).

Results equal DTensor's `redistribute` (torch 2.13): the same steps, the same
torch.chunk-style uneven shards, zero padding for the collectives.
"""
from __future__ import annotations

import functools
from typing import Sequence

import torch

from .. import _C, _torch_private
from ..placements import SpecLike, as_spec

__all__ = ["redistribute_local", "shard_local", "plan_for"]

_funcol = _torch_private.functional_collectives()


@functools.lru_cache(maxsize=4096)
def plan_for(global_shape: tuple[int, ...], mesh_shape: tuple[int, ...], src: str, dst: str,
             coord: tuple[int, ...]) -> tuple[dict, ...]:
    """The steps one mesh coordinate runs (see _C.plan_redistribute for the dict keys)."""
    return tuple(_C.plan_redistribute(list(global_shape), list(mesh_shape), src, dst, list(coord)))


def _pad_end(t: torch.Tensor, dim: int, new_size: int) -> torch.Tensor:
    """Zero-pads `t` at the end of `dim` up to `new_size` (collectives need equal sizes)."""
    extra = new_size - t.size(dim)
    if extra == 0:
        return t
    pad = [0, 0] * (t.dim() - 1 - dim) + [0, extra]
    return torch.nn.functional.pad(t, pad)


def _all_gather(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    dim, full = step["src_dim"], step["src_full"]
    logical = step["logical_shape"][dim]
    x = _pad_end(local, dim, full).contiguous()
    # Gather along a new leading dim, then fold it into `dim` (rank-major).
    out = _funcol.wait_tensor(_funcol.all_gather_into_tensor(x.unsqueeze(0), n, group))
    out = out.movedim(0, dim).flatten(dim, dim + 1)
    if out.size(dim) != logical:
        out = out.narrow(dim, 0, logical)
    return out.contiguous()


def _reduce_scatter(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    dim, full = step["dst_dim"], step["dst_full"]
    _, size = step["dst_chunk"]
    # torch.chunk pieces are all full-sized except the tail, so padding each
    # piece to `full` equals padding the whole dim at its end to n * full.
    x = _pad_end(local, dim, n * full)
    x = x.unflatten(dim, (n, full)).movedim(dim, 0).contiguous()
    out = _funcol.wait_tensor(_funcol.reduce_scatter_tensor(x, step["reduce"], n, group))
    out = out.squeeze(0)  # (1, ...) -> this rank's padded piece
    if size != full:
        out = out.narrow(dim, 0, size)
    return out


def _all_reduce(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    return _funcol.wait_tensor(_funcol.all_reduce(local.contiguous(), step["reduce"], group))


def _all_to_all(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    a, b = step["src_dim"], step["dst_dim"]
    a_full, b_full = step["src_full"], step["dst_full"]
    a_logical = step["logical_shape"][a]
    _, b_size = step["dst_chunk"]
    x = _pad_end(local, a, a_full)
    x = _pad_end(x, b, n * b_full)
    # Piece j of dim b goes to rank j; pieces travel as rows of a leading dim.
    x = x.unflatten(b, (n, b_full)).movedim(b, 0).contiguous()
    rows = [1] * n
    out = _funcol.wait_tensor(_funcol.all_to_all_single(x, rows, rows, group))
    # Row j came from rank j: its piece of dim a. Concatenate them along a.
    out = out.movedim(0, a).flatten(a, a + 1)
    if out.size(a) != a_logical:
        out = out.narrow(a, 0, a_logical)
    if b_size != b_full:
        out = out.narrow(b, 0, b_size)
    return out.contiguous()


def _local_chunk(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    start, size = step["dst_chunk"]
    return local.narrow(step["dst_dim"], start, size).clone()


def _local_partition(local: torch.Tensor, step: dict, n: int, group: str) -> torch.Tensor:
    # Replicate -> Partial: the n equal partial values must reduce back to the
    # value; only sum needs rewriting (avg/max/min of equal values are exact).
    if step["reduce"] == "sum":
        return local / n
    return local


_RUN_STEP = {
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_reduce": _all_reduce,
    "all_to_all": _all_to_all,
    "local_chunk": _local_chunk,
    "local_partition": _local_partition,
}


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
    for step in plan_for(shape, mesh_shape, src, dst, coord):
        mesh_dim = step["mesh_dim"]
        group = device_mesh.get_group(mesh_dim).group_name
        run = _RUN_STEP[step["kind"]]
        if local.is_complex() and not step["kind"].startswith("local_"):
            # Collective backends (gloo, NCCL) move no complex dtypes: the (real, imag) view
            # travels instead; its extra trailing dim is untouched by the step's dims, and
            # sums of pairs are sums of complex numbers (complex values have no max/min kinds).
            local = torch.view_as_complex(run(torch.view_as_real(local), step, device_mesh.size(mesh_dim),
                                              group).contiguous())
        else:
            local = run(local, step, device_mesh.size(mesh_dim), group)
    return local


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
