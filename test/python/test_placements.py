"""placements.py is the one converter: local_map's paths (decorator arguments, DTensor
arguments, torch's upstream local_map nodes), placements.py and the spec strings agree on
every kind the C++ kind table lists, refusals included.

The kinds come from `_C.placement_kinds()` (csrc/core/placement_kinds.cpp), never from a
hand-written list: a new row of the table shows up here and fails until it is converted.
"""
from __future__ import annotations

import types

import pytest
from torch.distributed.tensor import Partial
from torch.distributed.tensor.placement_types import _MaskPartial, _StridedShard

from torch_localmap import _C, placements
from torch_localmap._local_map import decorator, nodes

TABLE = _C.placement_kinds()
REDUCE_OPS = _C.reduce_ops()


def _args(row) -> list:
    """Every argument worth converting for a kind: a few dims, or every reduce op."""
    if row["takes_dim"]:
        return [0, 1, -1]
    if row["takes_reduce_op"]:
        return list(REDUCE_OPS)
    return [None]


def _torch_placement(row, arg):
    cls, attr = placements._TORCH_CLASS[row["name"]]
    return cls(arg) if attr else cls()


def _spelling(row, arg) -> str:
    return row["letter"] + ("" if arg is None else f"({arg})")


CASES = [(row, arg) for row in TABLE for arg in _args(row)]
IDS = [_spelling(row, arg) for row, arg in CASES]


def _via_local_map_args(p) -> str:
    """How local_map reads an in_placements / out_placements entry."""
    (spec,) = decorator._in_specs(([p],), "in_placements")
    assert decorator._out_specs([p]) == (spec,)
    return spec


def _via_upstream_node(p) -> str:
    """How a torch local_map_hop node's kwargs become a Region."""
    node = types.SimpleNamespace(name="n", args=(), meta={"local_map_kwargs": {
        "device_mesh": None, "in_placements": ([p],), "out_placements": ([p],), "in_grad_placements": None}})
    region = nodes._upstream_region(node)
    assert region.out_placements == region.in_placements
    return region.in_placements[0]


PATHS = {
    "placements.placements_to_spec": lambda p: placements.placements_to_spec([p]),
    "placements.spec_of": lambda p: placements.spec_of([p]),
    "local_map arguments": _via_local_map_args,
    "upstream local_map node": _via_upstream_node,
}


def test_the_python_converter_covers_exactly_the_kinds_of_the_cpp_table():
    assert [k.name for k in placements.KINDS] == [row["name"] for row in TABLE]
    assert set(placements._TORCH_CLASS) == {row["name"] for row in TABLE}
    assert placements.REDUCE_OPS == REDUCE_OPS
    for row in TABLE:
        assert row["gradient"] in {r["name"] for r in TABLE}, row


@pytest.mark.parametrize("row,arg", CASES, ids=IDS)
def test_every_path_converts_every_kind_alike(row, arg):
    p = _torch_placement(row, arg)
    canonical = _C.normalize_spec(_spelling(row, arg))  # the C++ spelling
    for name, convert in PATHS.items():
        assert convert(p) == canonical, name
    # spec string -> kinds -> torch placements, and back
    (part,) = placements.spec_parts(canonical)
    assert part.kind.name == row["name"] and part.arg == arg
    assert part.kind == placements.placement_part(p)[0]
    assert placements.spec_to_placements(canonical) == (p,)
    assert placements.placements_of(canonical) == (p,)
    assert placements.as_spec(canonical) == placements.as_spec([p]) == canonical


def _subclass_of(row, arg):
    cls, _ = placements._TORCH_CLASS[row["name"]]
    sub = type(f"Masked{cls.__name__}", (cls,), {})
    return sub(arg) if row["takes_dim"] or row["takes_reduce_op"] else sub()


REFUSED = ([(f"subclass of {row['name']}", _subclass_of(row, _args(row)[0]), f"Masked{row['name']}")
            for row in TABLE]
           + [("torch _MaskPartial", _MaskPartial(), "_MaskPartial"),
              ("torch _StridedShard", _StridedShard(0, split_factor=2), "_StridedShard"),
              ("unknown reduce op", Partial("product"), r"Partial\('product'\) is not supported"),
              ("not a placement", object(), "got object")])


@pytest.mark.parametrize("what,p,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_every_path_refuses_what_a_spec_cannot_express(what, p, message):
    if what == "not a placement":
        paths = {k: v for k, v in PATHS.items() if k.startswith("placements.")}
    else:
        paths = PATHS
    for name, convert in paths.items():
        with pytest.raises(ValueError, match=message) as e:
            convert(p)
        if "subclass" in what or "torch" in what:
            # the refusal names what is supported, not only what is wrong
            assert "supported placements" in str(e.value) or "expected" in str(e.value), (name, str(e.value))


def test_a_mask_partial_is_refused_not_read_as_a_plain_sum():
    # local_map used to turn any Partial subclass into P(sum): wrong numbers for a masked partial.
    with pytest.raises(ValueError, match=r"in_placements\[0\]\[0\]: .*_MaskPartial.* a subclass of Partial"):
        decorator._in_specs(([_MaskPartial()],), "in_placements")


def test_spec_strings_refuse_unknown_kinds_and_reduce_ops():
    letters = {row["letter"] for row in TABLE}
    unknown = next(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in letters)
    for bad in (unknown, "P(product)"):
        with pytest.raises(ValueError, match="in_placements"):
            placements.normalize_spec(bad, what="in_placements")
        with pytest.raises(ValueError):
            placements.spec_parts(bad)
        with pytest.raises(ValueError, match=r"in_placements\[0\]"):
            decorator._in_specs((bad,), "in_placements")
