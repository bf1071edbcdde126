"""What absorbs the differences between torch releases and devices (_torch_private), tested
on the torch at hand: each shim's fallback path gives what the native path gives.

- DTensor.from_local with grad_placements (torch >= 2.13) and our autograd Function for
  older torch: the same local gradients for Partial, Shard and Replicate outputs;
- a seeded op handed its forward's generator state (CUDA attention backwards) replays it,
  and so may sit in a backward graph; a draw does not;
- a shard over a mesh dim of one rank is the whole value: pinned inputs accept it.
"""
import pytest
import torch

from torch_localmap._torch_private import dtensor, partition
from torch_localmap.plan import plan_module

from dist_utils import make_mesh, run_distributed


def _rank_from_local(rank, world_size):
    from torch.distributed.tensor import Partial, Replicate, Shard

    mesh = make_mesh((world_size,))
    out = {}
    for name, placements, grad_placements in (("partial", [Partial()], [Partial()]),
                                              ("partial_to_replicate", [Partial()], [Replicate()]),
                                              ("shard", [Shard(0)], [Shard(0)]),
                                              ("replicate", [Replicate()], [Replicate()])):
        grads = []
        for native in (True, False):
            torch.manual_seed(rank)
            local = torch.randn(3, 4, requires_grad=True)
            shape = (3 * world_size, 4) if name == "shard" else (3, 4)
            stride = (4, 1)
            if native:
                dt = dtensor.dtensor_from_local(local, mesh, placements, shape, stride, grad_placements)
            else:
                dt = dtensor._FromLocalWithGrad.apply(local, mesh, placements, shape, stride, grad_placements)
            weight = torch.arange(float(shape[0] * shape[1])).reshape(shape)
            (dt.full_tensor() * weight).sum().backward()
            grads.append(local.grad)
        out[name] = grads
    return out


def test_from_local_fallback_gives_the_native_gradients():
    for res in run_distributed(_rank_from_local, 2, timeout=120):
        for name, (native, ours) in res.items():
            torch.testing.assert_close(ours, native, msg=lambda m: f"{name}: {m}")


def test_seeded_ops_that_replay_forward_rng_are_not_draws():
    aten = torch.ops.aten

    class _Node:  # what _replays_saved_rng reads of an fx node
        def __init__(self, target):
            self.target = target

    for op in (aten._scaled_dot_product_efficient_attention_backward.default,
               aten._scaled_dot_product_cudnn_attention_backward.default):
        assert partition._replays_saved_rng(_Node(op)), op
    for op in (aten.bernoulli.p, aten.native_dropout.default, aten.rand_like.default):
        assert not partition._replays_saved_rng(_Node(op)), op


@pytest.mark.parametrize("mesh", [(1,), (1, 2), (2, 1)])
def test_shard_over_a_one_rank_mesh_dim_is_accepted(mesh):
    model = torch.nn.Linear(16, 8)
    spec = "S(0)" * len(mesh)
    plan = plan_module(model, mesh, (torch.randn(8, 16),), input_specs={"0": spec}, time_limit=1)
    want = "".join("S(0)" if n > 1 else "R" for n in mesh)
    assert plan.placeholder_specs()[2] == want, plan.placeholder_specs()


def test_supported_range_is_pyprojects_and_holds_the_torch_at_hand():
    import pathlib
    import tomllib

    from packaging.specifiers import SpecifierSet

    from torch_localmap._ops_on_import import SUPPORTED_TORCH

    root = pathlib.Path(__file__).resolve().parents[2]
    doc = tomllib.loads((root / "pyproject.toml").read_text())
    declared = {d for d in doc["project"]["dependencies"] + doc["build-system"]["requires"] if d.startswith("torch")}
    assert declared == {f"torch{SUPPORTED_TORCH}"}, declared
    assert torch.__version__.split("+")[0] in SpecifierSet(SUPPORTED_TORCH)


def test_ci_compat_ends_are_the_ends_of_the_supported_range():
    """CI's `make test-compat-ends` runs the oldest and newest release the range admits."""
    import pathlib
    import re

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from torch_localmap._ops_on_import import SUPPORTED_TORCH

    makefile = (pathlib.Path(__file__).resolve().parents[2] / "Makefile").read_text()
    ends = re.search(r"^COMPAT_ENDS = (.+)$", makefile, re.M).group(1).split()
    spec = SpecifierSet(SUPPORTED_TORCH)
    assert len(ends) == 2 and all(e in spec for e in ends), (ends, SUPPORTED_TORCH)
    lowest = Version(next(s.version for s in spec if s.operator == ">="))
    highest = Version(next(s.version for s in spec if s.operator == "<"))
    old, new = map(Version, ends)
    assert (old.major, old.minor) == (lowest.major, lowest.minor), (old, lowest)  # the oldest minor release
    assert (new.major, new.minor + 1) == (highest.major, highest.minor), (new, highest)  # the newest minor release


def test_a_torch_outside_the_range_is_named_at_import():
    """A torch that slipped past pip's range check gets one warning naming the range."""
    from torch_localmap._ops_on_import import SUPPORTED_TORCH, torch_outside_range

    assert torch_outside_range(torch.__version__) is None
    for inside in ("2.11.0", "2.15.1+cu132", "2.13.0+cpu"):
        assert torch_outside_range(inside) is None, inside
    for outside in ("2.10.0", "2.16.0", "3.0.0.dev20270101"):
        msg = torch_outside_range(outside)
        assert msg is not None and SUPPORTED_TORCH in msg and outside in msg, (outside, msg)
