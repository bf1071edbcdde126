"""Local shard shapes/offsets from C++ equal torch's own computation, and spec conversion.

torch.distributed.tensor._utils._compute_local_shape_and_global_offset is a pure function of
(global shape, mesh shape, coordinate, placements): no process group is needed.
"""
import itertools
import random

import pytest
import torch
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset  # private, torch 2.13
from torch.distributed.tensor.placement_types import _StridedShard

from torch_localmap import _C
from torch_localmap.placements import as_spec, placements_to_spec, spec_to_placements
from torch_localmap._runtime.redistribute import shard_local


def _random_case(rng: random.Random):
    mesh_shape = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 4)))
    ndim = rng.randint(1, 4)
    # Small sizes make uneven and empty shards frequent; 0 exercises empty dims.
    global_shape = tuple(rng.choice([0, 1, 2, 3, 5, 7, 8, 12, 13]) for _ in range(ndim))
    placements = []
    for _ in mesh_shape:
        kind = rng.random()
        if kind < 0.6:
            placements.append(Shard(rng.randrange(ndim)))
        elif kind < 0.8:
            placements.append(Replicate())
        else:
            placements.append(Partial(rng.choice(["sum", "avg", "max", "min"])))
    return global_shape, mesh_shape, placements


def _torch_layouts(global_shape, mesh_shape, placements):
    out = []
    for coord in itertools.product(*(range(s) for s in mesh_shape)):  # row-major = rank order
        shape, offset = _compute_local_shape_and_global_offset(global_shape, mesh_shape, list(coord), placements)
        out.append((tuple(shape), tuple(offset)))
    return out


def test_random_layouts_match_torch():
    rng = random.Random(20240613)
    cases = 0
    empty_shards = uneven = nested = 0
    for _ in range(400):
        global_shape, mesh_shape, placements = _random_case(rng)
        spec = placements_to_spec(placements, len(mesh_shape), len(global_shape))
        ours = _C.local_layouts(list(global_shape), list(mesh_shape), spec)
        expected = _torch_layouts(global_shape, mesh_shape, placements)
        assert ours == expected, (global_shape, mesh_shape, spec)
        for r, coord in enumerate(itertools.product(*(range(s) for s in mesh_shape))):
            assert _C.local_layout(list(global_shape), list(mesh_shape), spec, list(coord)) == ours[r]
        assert _C.max_local_shape(list(global_shape), list(mesh_shape), spec) == tuple(
            max(s[d] for s, _ in ours) for d in range(len(global_shape)))
        cases += 1
        empty_shards += any(0 in s and 0 not in global_shape for s, _ in ours)
        uneven += len({s for s, _ in ours}) > 1
        dims = [p.dim for p in placements if isinstance(p, Shard)]
        nested += len(dims) != len(set(dims))
    # The generator must actually exercise the hard cases.
    assert cases == 400 and empty_shards > 20 and uneven > 100 and nested > 50, (empty_shards, uneven, nested)


def test_shard_local_cuts_torch_offsets():
    rng = random.Random(7)
    for _ in range(60):
        global_shape, mesh_shape, placements = _random_case(rng)
        if len({p.reduce_op for p in placements if isinstance(p, Partial)} - {"sum", "avg"}) > 0 and len(
                {p.reduce_op for p in placements if isinstance(p, Partial)}) > 1:
            continue  # mixed Partial kinds: refused, as in DTensor (tested below)
        full = torch.randn(global_shape, dtype=torch.float64)
        spec = placements_to_spec(placements)
        for coord in itertools.product(*(range(s) for s in mesh_shape)):
            shape, offset = _compute_local_shape_and_global_offset(global_shape, mesh_shape, list(coord), placements)
            local = shard_local(full, mesh_shape, spec, coord=coord)
            expected = full[tuple(slice(o, o + s) for o, s in zip(offset, shape))]
            for md, p in enumerate(placements):
                if isinstance(p, Partial) and p.reduce_op == "sum":
                    expected = expected / mesh_shape[md]
            assert local.shape == torch.Size(shape)
            torch.testing.assert_close(local, expected, rtol=0, atol=0)


def test_spec_round_trip():
    placements = (Shard(1), Replicate(), Partial("avg"), Partial("max"), Partial("min"), Partial())
    spec = placements_to_spec(placements)
    assert spec == "S(1)RP(avg)P(max)P(min)P(sum)"
    assert spec_to_placements(spec) == placements
    assert spec_to_placements("S(-1), R", mesh_ndim=2, tensor_ndim=3) == (Shard(2), Replicate())
    assert as_spec([Shard(-1)], 1, 2) == "S(1)"
    assert as_spec("[S(0), P]", 2) == "S(0)P(sum)"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: placements_to_spec([Shard(0)], mesh_ndim=2), "got 1 placements but the mesh has 2 dims"),
        (lambda: placements_to_spec([Shard(3), Replicate()], 2, 2), r"Shard\(3\) is out of range for a tensor with 2"),
        (lambda: placements_to_spec([Shard(-3)], 1, 2), r"Shard\(-3\) is out of range"),
        (lambda: placements_to_spec(["S(0)"]), r"placements\[0\]: expected Replicate\(\), Shard\(dim\) or Partial\(reduce_op\) .*; got str"),
        (lambda: placements_to_spec([Partial("product")]), r"Partial\('product'\) is not supported"),
        (lambda: placements_to_spec([_StridedShard(0, split_factor=2)]), "_StridedShard"),
        (lambda: placements_to_spec([]), "empty placement list"),
        (lambda: placements_to_spec("S(0)"), "expected a sequence of placements, got str"),
        (lambda: spec_to_placements("S(0)R", mesh_ndim=3), r"got 2 placements \(S\(0\)R\) but the mesh has 3 dims"),
        (lambda: spec_to_placements("S(0)X"), "cannot parse placement 'X'"),
        (lambda: shard_local(torch.zeros(4), (2, 2), "P(max)P(sum)", coord=(0, 0)), "mixes Partial reduce kinds"),
        (lambda: _C.local_layout([4], [2], "S(0)", [2]), "outside mesh"),
        (lambda: _C.local_layouts([4, 4], [2, 2], "S(2)R"), r"Shard\(2\) is out of range"),
        (lambda: shard_local(torch.zeros(4), (2,), "S(0)"), "coord is required"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
