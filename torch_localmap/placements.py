"""The one converter between torch's DTensor placements, placement spec strings and the core's kinds.

A spec string lists one placement per mesh dim: "S(0)RP(sum)" is
(Shard(0), Replicate(), Partial("sum")). Parsing, spelling and validation live in
C++ (`_C.normalize_spec`, `_C.spec_parts`) and every kind's meaning lives in the C++
kind table (csrc/core/placement_kinds.cpp, read here as `KINDS`). This module adds
only what C++ cannot know: which torch class stands for each kind. Everything else
in torch_localmap (local_map, the HOP, parallelize, the runtime, verify-strategies)
converts through the functions below, so a placement is read the same way everywhere.

Placements a spec cannot express are refused with a ValueError naming the placement:
subclasses of the torch classes (`_MaskPartial` carries an index mask, `_StridedShard`
a split factor), Partial reduce ops outside `REDUCE_OPS`, and other Placement types.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence, Union

from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.placement_types import Placement

from . import _C

__all__ = ["KINDS", "REDUCE_OPS", "Kind", "Part", "as_spec", "normalize_spec", "placements_of",
           "placements_to_spec", "spec_of", "spec_parts", "spec_to_placements"]

SpecLike = Union[str, Sequence[Placement]]


class Kind(NamedTuple):
    """One row of the C++ placement-kind table."""
    name: str              # torch's class name: Replicate, Shard, Partial
    letter: str            # the spelling's first letter
    takes_dim: bool        # spelled with a tensor dim: S(d)
    takes_reduce_op: bool  # spelled with a reduce op: P(sum)
    splits_dim: bool       # a rank holds a chunk of one tensor dim; else the whole tensor
    pending: bool          # each rank holds a contribution to a reduction
    gradient: str          # the name of its gradient's kind


class Part(NamedTuple):
    """One mesh dim's placement: its kind and its argument (dim, reduce op or None)."""
    kind: Kind
    arg: int | str | None

    @property
    def dim(self) -> int | None:
        return self.arg if self.kind.takes_dim else None

    @property
    def reduce_op(self) -> str | None:
        return self.arg if self.kind.takes_reduce_op else None

    def spelling(self) -> str:
        """"S(0)", "R", "P(sum)": the C++ spelling (Placement::to_string)."""
        return self.kind.letter + ("" if self.arg is None else f"({self.arg})")


KINDS: tuple[Kind, ...] = tuple(Kind(**row) for row in _C.placement_kinds())
REDUCE_OPS: tuple[str, ...] = tuple(_C.reduce_ops())
_KIND_BY_NAME = {k.name: k for k in KINDS}

# torch's class for each kind of the C++ table, and the attribute holding the kind's
# argument: the only Python knowledge of torch's placement classes. test_placements
# checks that it covers every kind the table lists.
_TORCH_CLASS = {"Replicate": (Replicate, None), "Shard": (Shard, "dim"), "Partial": (Partial, "reduce_op")}


def _supported() -> str:
    def one(kind: Kind) -> str:
        cls, attr = _TORCH_CLASS[kind.name]
        return f"{cls.__name__}({attr or ''})"
    names = [one(k) for k in KINDS]
    return f"{', '.join(names[:-1])} or {names[-1]} with reduce_op in {REDUCE_OPS}"


# ---- spec strings <-> the core's kinds --------------------------------------------------

def spec_parts(spec: str) -> tuple[Part, ...]:
    """"S(0)RP(sum)" -> (Part(Shard, 0), Part(Replicate, None), Part(Partial, "sum")), parsed by C++."""
    return tuple(Part(_KIND_BY_NAME[name], arg) for name, arg in _C.spec_parts(spec))


def normalize_spec(spec: str, tensor_ndim: int | None = None, mesh_ndim: int | None = None,
                   what: str = "placements") -> str:
    """Canonical spelling of `spec`, validated against a tensor rank and/or mesh ndim when given.

    Raises ValueError naming `what` for bad spellings, a placement count different from the
    mesh ndim, or Shard dims out of range (negative dims are normalized when tensor_ndim is known).
    """
    if not isinstance(spec, str):
        raise ValueError(f"{what}: expected a placement spec string like 'S(0)R', got {type(spec).__name__}")
    try:
        canonical = _C.normalize_spec(spec)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    count = len(spec_parts(canonical))
    if tensor_ndim is not None:
        return _C.normalize_spec(canonical, int(tensor_ndim), int(count if mesh_ndim is None else mesh_ndim), what)
    if mesh_ndim is not None and count != mesh_ndim:
        raise ValueError(f"{what}: got {count} placements ({canonical}) but the mesh has "
                         f"{mesh_ndim} dims (one placement per mesh dim expected)")
    return canonical


# ---- torch placements <-> the core's kinds ----------------------------------------------

def placement_part(p: object, what: str = "placement") -> Part:
    """The core's kind and argument of one torch placement; ValueError naming `what` when a
    spec cannot express it (a subclass with extra state, an unknown reduce op, another type)."""
    for kind in KINDS:
        cls, attr = _TORCH_CLASS[kind.name]
        if not isinstance(p, cls):
            continue
        if type(p) is not cls:
            # _MaskPartial and friends carry state (masks, split factors) a spec cannot
            # express; reading them as the base kind would give wrong numbers.
            raise ValueError(f"{what}: {p!r} ({type(p).__name__}, a subclass of {cls.__name__}) is not "
                             f"supported; supported placements: {_supported()}")
        arg = getattr(p, attr) if attr else None
        if kind.takes_reduce_op and arg not in REDUCE_OPS:
            raise ValueError(f"{what}: {cls.__name__}({arg!r}) is not supported; "
                             f"reduce_op must be one of {REDUCE_OPS}")
        return Part(kind, int(arg) if kind.takes_dim else arg)
    raise ValueError(f"{what}: expected {_supported()}; got {type(p).__name__} ({p!r})")


def part_placement(part: Part) -> Placement:
    """The torch placement of one parsed part."""
    cls, attr = _TORCH_CLASS[part.kind.name]
    return cls(part.arg) if attr else cls()


# ---- torch placements <-> spec strings --------------------------------------------------

def placements_to_spec(placements: Sequence[Placement], mesh_ndim: int | None = None,
                       tensor_ndim: int | None = None, what: str = "placements") -> str:
    """(Shard(0), Replicate(), Partial("sum")) -> "S(0)RP(sum)", validated when sizes are given."""
    if isinstance(placements, (str, bytes)) or not isinstance(placements, Sequence):
        raise ValueError(f"{what}: expected a sequence of placements, got {type(placements).__name__}")
    if mesh_ndim is not None and len(placements) != mesh_ndim:
        raise ValueError(f"{what}: got {len(placements)} placements but the mesh has {mesh_ndim} dims "
                         f"(one placement per mesh dim expected)")
    spec = "".join(placement_part(p, f"{what}[{i}]").spelling() for i, p in enumerate(placements))
    if not spec:
        raise ValueError(f"{what}: empty placement list (one placement per mesh dim expected)")
    return normalize_spec(spec, tensor_ndim, len(placements), what)


def spec_to_placements(spec: str, mesh_ndim: int | None = None, tensor_ndim: int | None = None,
                       what: str = "placements") -> tuple[Placement, ...]:
    """"S(0)RP(sum)" -> (Shard(0), Replicate(), Partial("sum")), validated when sizes are given."""
    return tuple(part_placement(p) for p in spec_parts(normalize_spec(spec, tensor_ndim, mesh_ndim, what)))


def as_spec(spec: SpecLike, mesh_ndim: int | None = None, tensor_ndim: int | None = None,
            what: str = "placements") -> str:
    """Canonical spec string from either a spec string or a sequence of torch placements."""
    if isinstance(spec, str):
        return normalize_spec(spec, tensor_ndim, mesh_ndim, what)
    return placements_to_spec(spec, mesh_ndim, tensor_ndim, what)


def spec_of(placements: SpecLike | None, what: str = "placements") -> str | None:
    """as_spec without sizes, None staying None (a non-tensor value has no placements)."""
    return None if placements is None else as_spec(placements, what=what)


def placements_of(spec: str, what: str = "placements") -> tuple[Placement, ...]:
    """spec_to_placements without sizes."""
    return spec_to_placements(spec, what=what)
