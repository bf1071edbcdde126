"""torch.ops.localmap: the C++ ops, their dispatch-key kernels and what the planner makes of them.

- sharding_constraint: opcheck, its C++ backward puts the gradient placements in joint graphs,
  the planner pins it (forward and backward), bad input is a ValueError.
- redistribute: opcheck and gradcheck on gloo ranks for every placement pair on a 1-D mesh of 4
  and a 2x2 mesh (each pair's refusals as ValueError), its forward equal to cutting the global
  tensor, the all-gather <-> reduce-scatter transpose when the gradient arrives Partial.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.library import opcheck

import torch_localmap as tlm
from torch_localmap import _C
from torch_localmap.placements import spec_parts
from torch_localmap.plan import plan_module

from dist_utils import run_distributed

SC = torch.ops.localmap.sharding_constraint
RD = torch.ops.localmap.redistribute


def test_ops_are_registered_with_the_dispatcher():
    assert sorted(torch.ops.localmap) == ["redistribute", "sharding_constraint"]
    for op in (SC.default, RD.default):
        for key in ("CompositeExplicitAutograd", "Autograd"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key), (op, key)
    assert torch._C._dispatch_has_kernel_for_dispatch_key(RD.default.name(), "Meta")


_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible"))


@pytest.mark.parametrize("device", ["cpu", _CUDA])
@pytest.mark.parametrize("spec,grad", [("S(0)R", None), ("RS(1)", "RS(1)"), ("P(sum)", None), ("R", "P(sum)")])
def test_sharding_constraint_opcheck(spec, grad, device):
    x = torch.randn(4, 6, requires_grad=True, device=device)
    opcheck(SC.default, (x, spec, grad))


def test_extension_calls_the_dispatcher():
    """The extension links libtorch's dispatcher (not only the torch-free core)."""
    import shutil
    import subprocess

    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    out = subprocess.run(["nm", "-D", "--undefined-only", "-C", _C.__file__], capture_output=True, text=True,
                         check=True).stdout
    assert "c10::Dispatcher::findSchemaOrThrow" in out


def test_sharding_constraint_backward_is_the_constraint_with_grad_placements():
    def step(x):
        y = tlm.with_sharding_constraint(x, "S(0)R", "S(1)R")
        return torch.autograd.grad(y.sin().sum(), x)[0]

    gm = make_fx(step)(torch.randn(4, 6, requires_grad=True))
    calls = [n.args[1:] for n in gm.graph.nodes if n.target is SC.default]
    # forward pins the value; the backward, written by the C++ Autograd kernel, pins the gradient
    # (and records the value's placements as the gradient's own gradient placements).
    assert calls == [("S(0)R", "S(1)R"), ("S(1)R", "S(0)R")]
    # default gradient placements: Partial -> Replicate, others unchanged
    gm = make_fx(lambda x: torch.autograd.grad(SC(x, "P(sum)S(0)").sum(), x)[0])(torch.randn(4, 6, requires_grad=True))
    assert [n.args[1] for n in gm.graph.nodes if n.target is SC.default] == ["P(sum)S(0)", "RS(0)"]


def test_sharding_constraint_eager_is_identity_with_gradient():
    x = torch.randn(3, 5, requires_grad=True)
    y = tlm.with_sharding_constraint(x, "S(1)")
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()
    (y * 2).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0))


@pytest.mark.parametrize("call,match", [
    (lambda x: SC(x, "S(0"), "not valid"),
    (lambda x: SC(x, "S(2)R"), "out of range"),
    (lambda x: SC(x, "S(0)R", "R"), "grad_placements"),
    (lambda x: tlm.with_sharding_constraint(x, "S(0)", device_mesh=tlm.MeshSpec((2, 2))), "mesh"),
    (lambda x: RD(x, [4, 6], "S(0)", "R", [2], [0], ["0"]), "shape"),
    (lambda x: RD(x, [4, 6], "R", "R", [2], [0, 0], ["0"]), "coordinate"),
    (lambda x: RD(x, [4, 6], "R", "R", [2], [0], ["0", "1"]), "group_names"),
    (lambda x: RD(x, [4, 6], "S(0)", "P(sum)", [2], [0], ["0"]), "shape|Partial"),
    (lambda x: RD(x, [4, 6], "Q", "R", [2], [0], ["0"]), "src_placements"),
])
def test_bad_arguments_are_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call(torch.randn(4, 6))


class _Constrained(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(32, 64))
        self.w2 = torch.nn.Parameter(torch.randn(64, 32))

    def forward(self, x):
        h = torch.relu(x @ self.w1)
        h = tlm.with_sharding_constraint(h, "RS(1)", "RS(1)")
        return (h @ self.w2).sum()


def test_planner_pins_constraint_nodes_forward_and_backward():
    plan = plan_module(_Constrained(), (2, 2), (torch.randn(16, 32),), time_limit=5)
    pinned = [(plan.graph.fx_nodes[i].args[1], p.inputs[0], p.outputs[0]) for i, p in enumerate(plan.nodes)
              if p.family == "sharding_constraint"]
    assert sorted(pinned) == [("RS(1)", "RS(1)", "RS(1)")] * 2  # the value and its gradient


def test_constraint_that_does_not_fit_the_mesh_is_a_value_error():
    with pytest.raises(ValueError, match="one placement per mesh dim|2 dims"):
        plan_module(_Constrained(), (2, 2, 2), (torch.randn(16, 32),), time_limit=5)


@tlm.local_map(out_placements="S(0)R", in_placements=("S(0)R", "RR"), in_grad_placements=("S(0)R", "P(sum)R"))
def _region(x, w):
    return torch.relu(x @ w)


class _WithRegion(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 16))
        self.v = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        h = tlm.with_sharding_constraint(_region(x, self.w), "S(0)R")
        return h @ self.v


def test_exported_program_round_trips_and_plans_the_same():
    import io

    x = torch.randn(8, 16)
    with tlm.use_mesh((2, 2)):
        ep = torch.export.export(_WithRegion(), (x,), strict=False)
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    sc = "torch.ops.localmap.sharding_constraint.default"
    assert loaded.graph_module.code.count(sc) == ep.graph_module.code.count(sc) == 4
    assert "tlm_local_map" in loaded.graph_module.code
    torch.testing.assert_close(loaded.module()(x), ep.module()(x))

    def plan_of(program):
        plan = plan_module(program.module(), (2, 2), (x,), time_limit=5)
        return [(n.family, n.inputs, n.outputs) for n in plan.nodes], plan.summary.estimated_step_s

    before, after = plan_of(ep), plan_of(loaded)
    assert before == after
    families = [f for f, _, _ in before[0]]
    assert families.count("local_map") == 2 and families.count("sharding_constraint") == 7


# ---- multi-rank: opcheck and gradcheck of redistribute -------------------------------------

_DIM_CHOICES = ("S(0)", "S(1)", "R", "P(sum)")
_SHAPE = (5, 6)  # uneven on dim 0 for 2 and 4 ranks


def _specs(ndim):
    return ["".join(p) for p in itertools.product(_DIM_CHOICES, repeat=ndim)]


def _loss(x, mesh_shape, coord, groups, src, dst, w_global, grad=None):
    """<redistribute(x), w> as the global scalar on every rank; x and w are global tensors."""
    shape, n = list(x.shape), len(mesh_shape)
    xs = RD(x, shape, "R" * n, src, mesh_shape, coord, groups)
    y = RD(xs, shape, src, dst, mesh_shape, coord, groups, grad)
    w_spec = _C.grad_specs([grad or dst])[0]  # the gradient's placement: w is laid out the same way
    w = RD(w_global, shape, "R" * n, w_spec, mesh_shape, coord, groups).detach()
    s = (y * w).sum().reshape(1)
    # the per-rank sums are pending sums over every mesh dim the value is split or pending on
    s_spec = "".join("R" if k == "R" and not (grad and "P" in g) else "P(sum)"
                     for k, g in zip(_split(dst), _split(grad or dst)))
    return RD(s, [1], s_spec, "R" * n, mesh_shape, coord, groups)


def _split(spec):
    return [part.kind.letter for part in spec_parts(spec)]


def _check_mesh(mesh, ranks_seed):
    from torch_localmap._runtime.redistribute import group_names, shard_local

    mesh_shape = list(mesh.shape)
    coord = list(mesh.get_coordinate())
    groups = group_names(mesh)
    checked = refused = 0
    for src, dst in itertools.product(_specs(mesh.ndim), repeat=2):
        torch.manual_seed(ranks_seed)  # every rank draws the same inputs and gradcheck vectors
        x = torch.randn(_SHAPE, dtype=torch.float64)
        w = torch.randn(_SHAPE, dtype=torch.float64)
        xs = shard_local(x, tuple(mesh_shape), src, coord)
        if not _C.can_redistribute(src, dst, mesh_shape):
            with pytest.raises(ValueError, match="localmap.redistribute"):
                RD(xs, list(_SHAPE), src, dst, mesh_shape, coord, groups)
            refused += 1
            continue
        # forward: equal to cutting the global tensor for dst
        out = RD(xs, list(_SHAPE), src, dst, mesh_shape, coord, groups)
        torch.testing.assert_close(out, shard_local(x, tuple(mesh_shape), dst, coord), msg=f"{src} -> {dst}")
        ok = torch.autograd.gradcheck(
            lambda t: _loss(t, mesh_shape, coord, groups, src, dst, w), (x.clone().requires_grad_(),),
            fast_mode=True)
        assert ok, (src, dst)
        checked += 1
    return checked, refused


def _ops_worker(rank, world_size):
    from torch_localmap.launch import make_mesh
    from torch_localmap._runtime.redistribute import group_names, shard_local

    results = {}
    for shape in ((4,), (2, 2)):
        mesh = make_mesh(shape)
        results[shape] = _check_mesh(mesh, 7)
    # opcheck of redistribute (schema, autograd registration, fake tensor, AOT dispatch) on a
    # 2x2 mesh, every rank in step
    mesh = make_mesh((2, 2))
    coord, groups = list(mesh.get_coordinate()), group_names(mesh)
    torch.manual_seed(3)
    x = torch.randn(_SHAPE, dtype=torch.float64)
    for src, dst in [("S(0)R", "RR"), ("P(sum)S(1)", "S(0)R"), ("S(0)S(1)", "S(1)S(0)"), ("RR", "P(sum)S(0)")]:
        xs = shard_local(x, (2, 2), src, coord).requires_grad_()
        opcheck(RD.default, (xs, list(_SHAPE), src, dst, [2, 2], coord, groups))
    # the gradient of a gathered value arriving Partial comes back by reduce-scatter
    mesh1 = make_mesh((4,))
    c1, g1 = list(mesh1.get_coordinate()), group_names(mesh1)
    xs = shard_local(x, (4,), "S(0)", c1).requires_grad_()
    y = RD(xs, list(_SHAPE), "S(0)", "R", [4], c1, g1, "P(sum)")
    y.backward(torch.full_like(y, float(rank + 1)))  # rank r contributes r + 1
    torch.testing.assert_close(xs.grad, torch.full_like(xs, 10.0))  # 1 + 2 + 3 + 4
    return results


def test_redistribute_gradcheck_every_pair_on_gloo_ranks():
    results = run_distributed(_ops_worker, 4, timeout=600)
    for shape, n_pairs in (((4,), 16), ((2, 2), 256)):
        checked, refused = results[0][shape]
        assert checked + refused == n_pairs and checked > refused > 0, (shape, checked, refused)
    assert all(r == results[0] for r in results)
