"""Conversion between torch's DTensor placements and our placement spec strings.

A spec string lists one placement per mesh dim: "S(0)RP(sum)" is
(Shard(0), Replicate(), Partial("sum")). Parsing and validation live in C++
(`_C.normalize_spec`); this module only maps torch's placement objects to and
from that spelling.
"""
from __future__ import annotations

import re
from typing import Sequence, Union

from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import Placement

from . import _C
from ._torch_private.dtensor import strided_shard_type

__all__ = ["REDUCE_OPS", "placements_to_spec", "spec_to_placements", "normalize_spec", "as_spec"]

REDUCE_OPS = ("sum", "avg", "max", "min")

SpecLike = Union[str, Sequence[Placement]]

# Tokens of the canonical spelling _C.normalize_spec returns.
_TOKEN = re.compile(r"S\((-?\d+)\)|R|P\((sum|avg|max|min)\)")


def _tokens(canonical: str) -> list[re.Match]:
    return list(_TOKEN.finditer(canonical))


def normalize_spec(spec: str, tensor_ndim: int | None = None, mesh_ndim: int | None = None,
                   what: str = "placements") -> str:
    """Canonical spelling of `spec`, validated against a tensor rank and/or mesh ndim when given.

    Raises ValueError naming `what` for bad spellings, a placement count different from the
    mesh ndim, or Shard dims out of range (negative dims are normalized when tensor_ndim is known).
    """
    if not isinstance(spec, str):
        raise ValueError(f"{what}: expected a placement spec string like 'S(0)R', got {type(spec).__name__}")
    if tensor_ndim is not None:
        if mesh_ndim is None:
            mesh_ndim = len(_tokens(_C.normalize_spec(spec)))
        return _C.normalize_spec(spec, int(tensor_ndim), int(mesh_ndim), what)
    canonical = _C.normalize_spec(spec)
    if mesh_ndim is not None and len(_tokens(canonical)) != mesh_ndim:
        raise ValueError(f"{what}: got {len(_tokens(canonical))} placements ({canonical}) but the mesh has "
                         f"{mesh_ndim} dims (one placement per mesh dim expected)")
    return canonical


def _placement_token(p: object, index: int, what: str) -> str:
    if isinstance(p, strided_shard_type()):
        raise ValueError(f"{what}[{index}]: {p!r} (_StridedShard) is not supported; use Shard/Replicate/Partial")
    if isinstance(p, Shard):
        return f"S({p.dim})"
    if isinstance(p, Replicate):
        return "R"
    if isinstance(p, Partial):
        if type(p) is not Partial:
            # _MaskPartial and friends carry extra state (masks) a spec cannot express.
            raise ValueError(f"{what}[{index}]: {type(p).__name__} is not supported; only plain "
                             f"Partial(reduce_op) with reduce_op in {REDUCE_OPS}")
        if p.reduce_op not in REDUCE_OPS:
            raise ValueError(f"{what}[{index}]: Partial({p.reduce_op!r}) is not supported; "
                             f"reduce_op must be one of {REDUCE_OPS}")
        return f"P({p.reduce_op})"
    raise ValueError(f"{what}[{index}]: expected Shard, Replicate or Partial, got {type(p).__name__} ({p!r})")


def placements_to_spec(placements: Sequence[Placement], mesh_ndim: int | None = None,
                       tensor_ndim: int | None = None, what: str = "placements") -> str:
    """(Shard(0), Replicate(), Partial("sum")) -> "S(0)RP(sum)", validated when sizes are given."""
    if isinstance(placements, (str, bytes)) or not isinstance(placements, Sequence):
        raise ValueError(f"{what}: expected a sequence of placements, got {type(placements).__name__}")
    if mesh_ndim is not None and len(placements) != mesh_ndim:
        raise ValueError(f"{what}: got {len(placements)} placements but the mesh has {mesh_ndim} dims "
                         f"(one placement per mesh dim expected)")
    spec = "".join(_placement_token(p, i, what) for i, p in enumerate(placements))
    if not spec:
        raise ValueError(f"{what}: empty placement list (one placement per mesh dim expected)")
    return normalize_spec(spec, tensor_ndim, len(placements), what)


def spec_to_placements(spec: str, mesh_ndim: int | None = None, tensor_ndim: int | None = None,
                       what: str = "placements") -> tuple[Placement, ...]:
    """"S(0)RP(sum)" -> (Shard(0), Replicate(), Partial("sum")), validated when sizes are given."""
    out: list[Placement] = []
    for m in _tokens(normalize_spec(spec, tensor_ndim, mesh_ndim, what)):
        if m.group(1) is not None:
            out.append(Shard(int(m.group(1))))
        elif m.group(2) is not None:
            out.append(Partial(m.group(2)))
        else:
            out.append(Replicate())
    return tuple(out)


def as_spec(spec: SpecLike, mesh_ndim: int | None = None, tensor_ndim: int | None = None,
            what: str = "placements") -> str:
    """Canonical spec string from either a spec string or a sequence of torch placements."""
    if isinstance(spec, str):
        return normalize_spec(spec, tensor_ndim, mesh_ndim, what)
    return placements_to_spec(spec, mesh_ndim, tensor_ndim, what)
