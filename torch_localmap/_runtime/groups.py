"""The runtime's own process groups, with a timeout of their own.

A collective waits for every rank of its group. If one rank fails inside the
planned program and stays alive (it caught its error), the others would wait for
torch's default process-group timeout (30 minutes for gloo). The runtime therefore
runs its collectives on groups it creates itself, over the same ranks as the
user's mesh, with `timeout` (parallelize's and the backend's option, default
DEFAULT_TIMEOUT): a rank left waiting gets an error within that time, and
runtime/failures.py turns it into one naming the rank that failed.

Creating groups is collective: every rank calls `runtime_mesh` for the same mesh
and timeout in the same order (parallelize and the backend do, on every rank).
"""
from __future__ import annotations

import datetime
import numbers

import torch.distributed as dist

from .._torch_private import dtensor

__all__ = ["DEFAULT_TIMEOUT", "as_timeout", "runtime_mesh", "world_group", "combined_group_name", "nested_group_name",
           "group_size"]

# Long enough for a first step that compiles or plans on every rank, short enough that a
# failure ends a run in minutes, not half an hour.
DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)

_cache: dict = {}
# Groups over several mesh dims at once (runtime_mesh makes them for meshes of 2-4 dims):
# the frozenset of this rank's per-dim group names -> the name of the group over their
# ranks, and that name -> the set, so combined names combine further.
_combined: dict = {}
_members: dict = {}
# A per-mesh-dim group's name -> its mesh dim: a combined group lists its ranks row-major
# over its dims in ascending order, which fixes the order a merged all-gather fills.
_dim_of: dict = {}
# Every runtime group's name -> its number of ranks (an average over a group is its sum
# divided by this: bucketing.py reduces averages in a sum bucket).
_size_of: dict = {}


def as_timeout(value, what: str = "timeout") -> datetime.timedelta:
    """A positive timedelta from seconds or a timedelta."""
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{what}: expected seconds or a datetime.timedelta, got {type(value).__name__}")
    if not (0 < seconds < float("inf")):
        raise ValueError(f"{what}: expected a positive, finite duration, got {seconds} s")
    return datetime.timedelta(seconds=seconds)


def group_size(name: str) -> int | None:
    """The number of ranks of the runtime group `name`, or None for a group the runtime did
    not make."""
    return _size_of.get(name)


def _subgroup_ranks(mesh, dims) -> list:
    """Rank lists of the groups along mesh dims `dims` (an int or a tuple; every group, not
    only this rank's)."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    t = mesh.mesh
    size = 1
    for d in dims:
        size *= t.shape[d]
    return t.movedim(dims, tuple(range(t.ndim - len(dims), t.ndim))).reshape(-1, size).tolist()


def combined_group_name(names) -> str | None:
    """The runtime group over the ranks of the given groups of one runtime mesh (per mesh
    dim, or combined ones) taken together, or None where the runtime made none: a reduction
    over mesh dim a followed by one over mesh dim b is one reduction over it."""
    dims = frozenset()
    for n in names:
        dims |= _members.get(n, frozenset((n,)))
    return _combined.get(dims)


def nested_group_name(outer: str, inner: str) -> str | None:
    """The combined group over per-mesh-dim groups `outer` and `inner` when its rank order
    nests them -- row-major over ascending mesh dims, so `outer`'s mesh dim comes first --
    else None. A collective over the outer dim's group, then one over the inner's, on
    pieces of one dim (an all-gather's or a reduce-scatter's), is then one collective
    over that group."""
    a, b = _dim_of.get(outer), _dim_of.get(inner)
    if a is None or b is None or not a < b:
        return None
    return combined_group_name([outer, inner])


def _make_combined_groups(mesh, groups, timeout) -> None:
    """One group per set of 2+ mesh dims of more than one rank each (2-D: one, 3-D: four,
    4-D: eleven). Collective: every rank makes them in the same order."""
    import itertools

    dims = [d for d in range(mesh.ndim) if mesh.size(d) > 1]
    if not 2 <= len(dims) <= 4:
        return
    for k in range(2, len(dims) + 1):
        for subset in itertools.combinations(dims, k):
            mine, _ = dist.new_subgroups_by_enumeration(_subgroup_ranks(mesh, subset), timeout=timeout,
                                                        group_desc="torch_localmap_dims" + "".join(map(str, subset)))
            key = frozenset(groups[d].group_name for d in subset)
            _combined[key] = mine.group_name
            _members[mine.group_name] = key
            _size_of[mine.group_name] = mine.size()


def runtime_mesh(mesh, timeout: datetime.timedelta):
    """A DeviceMesh equal to `mesh` (same ranks, layout, names) whose dim groups time out
    after `timeout`. Without a process group (single process) it is `mesh` itself."""
    if not dist.is_initialized() or mesh.size() == 1:
        return mesh
    key = (tuple(mesh.mesh.flatten().tolist()), tuple(mesh.shape), mesh.mesh_dim_names, mesh.device_type, timeout)
    if key not in _cache:
        groups = []
        for d in range(mesh.ndim):
            mine, _ = dist.new_subgroups_by_enumeration(_subgroup_ranks(mesh, d), timeout=timeout,
                                                        group_desc=f"torch_localmap_dim{d}")
            groups.append(mine)
            _dim_of[mine.group_name] = d
            _size_of[mine.group_name] = mine.size()
        _make_combined_groups(mesh, groups, timeout)
        _cache[key] = dtensor.mesh_from_groups(mesh, groups)
    return _cache[key]


def world_group(timeout: datetime.timedelta):
    """A group of every rank with `timeout` (plan broadcast, failure checks); None without one."""
    if not dist.is_initialized():
        return None
    key = ("world", dist.get_world_size(), timeout)
    if key not in _cache:
        _cache[key] = dist.new_group(list(range(dist.get_world_size())), timeout=timeout,
                                     group_desc="torch_localmap_world")
    return _cache[key]


def is_collective_failure(exc: BaseException) -> bool:
    """Whether `exc` is a collective that timed out or lost a peer (not this rank's own fault)."""
    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(s in text for s in _COLLECTIVE_FAILURES)


# How gloo (torch 2.13) words a collective that cannot complete. "Application timeout caused
# pair closure": a connection closed by an earlier timeout, seen by a collective issued
# before that timeout surfaced (the overlap schedule keeps several in flight).
_COLLECTIVE_FAILURES = ("Timed out waiting", "Connection closed by peer", "Connection reset by peer",
                        "Socket Timeout", "Broken pipe", "NCCL communicator was aborted", "Watchdog caught",
                        "Application timeout caused pair closure")
