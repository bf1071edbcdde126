"""local_map on plain tensors: eager (no mesh / simulated mesh), make_fx, joint graphs,
torch.compile, region metadata, and every bad-input error. DTensor parity with torch's
own local_map runs on gloo ranks in test_local_map_dist.py."""
import copy
import json

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.fx.experimental.proxy_tensor import make_fx

import torch_localmap as tlm
from torch_localmap import local_map, region_of, use_mesh
from torch_localmap._local_map import localmap_hop
from torch_localmap._local_map import MeshSpec, RegionMutationError, node_fixed_placements, run_region_local
from torch_localmap._local_map import Region

MESH = MeshSpec((2, 2), ("dp", "tp"))

# x is split by rows on dp; w is whole everywhere. Each dp rank computes the grad of w from
# its rows only, so w's gradient is a partial sum over dp: P(sum) on dp.
@local_map(out_placements="S(0)R", in_placements=("S(0)R", "RR", None),
           in_grad_placements=("S(0)R", "P(sum)R", None))
def scaled_matmul(x, w, alpha):
    return torch.relu(x @ w) * alpha


# The same region declaring w's gradient Replicate (the default): wrong for this body.
@local_map(out_placements="S(0)R", in_placements=("S(0)R", "RR", None))
def scaled_matmul_replicated_grad(x, w, alpha):
    return torch.relu(x @ w) * alpha


def reference(x, w, alpha):
    return torch.relu(x @ w) * alpha


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 4, generator=g), torch.randn(4, 6, generator=g)


def _grads(fn, x, w):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = fn(x, w, 2.0)
    (y * torch.arange(y.numel(), dtype=y.dtype).view_as(y)).sum().backward()
    return y.detach(), x.grad, w.grad


def _region_nodes(gm):
    return [n for n in gm.graph.nodes if region_of(n) is not None]


# ---- eager -----------------------------------------------------------------------------

def test_without_mesh_the_function_runs_on_whole_tensors():
    x, w = _inputs()
    assert torch.equal(scaled_matmul(x, w, 2.0), reference(x, w, 2.0))


def test_simulated_mesh_matches_unsharded_forward_and_partial_grads():
    x, w = _inputs()
    ref = _grads(reference, x, w)
    with use_mesh(MESH):
        got = _grads(scaled_matmul, x, w)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)


def test_replicated_grad_declaration_loses_the_partial_sum():
    # Shows the simulated mesh checks in_grad_placements for real: declaring w's grad
    # Replicate keeps only dp rank 0's share.
    x, w = _inputs()
    ref = _grads(reference, x, w)
    with use_mesh(MESH):
        got = _grads(scaled_matmul_replicated_grad, x, w)
    torch.testing.assert_close(got[0], ref[0])
    torch.testing.assert_close(got[1], ref[1])
    assert not torch.allclose(got[2], ref[2])


def test_uneven_inputs_and_partial_outputs_are_assembled():
    @local_map(out_placements=("P(sum)R", "RS(0)"), in_placements=("S(1)R", "RS(0)"))
    def region(a, b):
        return a.sum(dim=1, keepdim=True), b * 2

    a = torch.randn(3, 5)  # columns split 3 + 2 over dp
    b = torch.randn(6, 4)
    with use_mesh(MESH):
        s, d = region(a, b)
    torch.testing.assert_close(s, a.sum(dim=1, keepdim=True))
    torch.testing.assert_close(d, b * 2)
    # Uneven sharded outputs: the global shape cannot be inferred from rank 0's piece.
    with use_mesh(MESH), pytest.raises(ValueError, match=r"output 1 on rank 1 .* has local shape \[2, 4\]"):
        region(a, torch.randn(5, 4))


def test_non_tensor_outputs_and_pytree_outputs():
    @local_map(out_placements=("RR", None, "S(0)R"), in_placements=("S(0)R",))
    def region(x):
        return {"a": x.sum(dim=0, keepdim=True).clone() * 0 + 1, "n": 3, "b": x + 1}

    x = torch.randn(4, 2)
    with use_mesh(MESH):
        out = region(x)
    assert out["n"] == 3
    torch.testing.assert_close(out["b"], x + 1)


# ---- traced -----------------------------------------------------------------------------

def test_make_fx_records_one_hop_node_with_local_body():
    x, w = _inputs()
    with use_mesh(MESH):
        gm = make_fx(lambda x, w: scaled_matmul(x, w, 2.0), tracing_mode="fake")(x, w)
    (node,) = _region_nodes(gm)
    assert node.target is localmap_hop
    region = region_of(node)
    assert region.in_placements == ("S(0)R", "RR")
    assert region.out_placements == ("S(0)R",)
    assert region.mesh_shape == (2, 2) and region.mesh_dim_names == ("dp", "tp")
    line = scaled_matmul.__wrapped__.__code__.co_firstlineno
    assert region.name == f"test_local_map.scaled_matmul:{line}"
    assert list(node.meta["val"][0].shape) == [8, 6]  # global outside
    body = getattr(gm, node.args[0].target)
    shapes = [list(p.meta["val"].shape) for p in body.graph.nodes if p.op == "placeholder"]
    assert shapes == [[4, 4], [4, 6]]  # local inside
    assert not any(n.target is localmap_hop for n in body.graph.nodes)


def test_fake_tensor_mode_maps_global_to_local_and_back():
    from torch._subclasses.fake_tensor import FakeTensorMode

    seen = []

    @local_map(out_placements=("S(0)S(1)", "RR"), in_placements=("S(0)S(1)",))
    def region(x):
        seen.append(tuple(x.shape))
        return x * 2, x.sum(dim=0)

    with FakeTensorMode() as mode, use_mesh(MESH):
        x = mode.from_tensor(torch.randn(8, 6))
        a, b = region(x)
    assert seen == [(4, 3)]
    assert tuple(a.shape) == (8, 6) and tuple(b.shape) == (3,)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(_inputs()[1].clone())

    def forward(self, x):
        return scaled_matmul(x, self.w, 2.0).square().mean()


def _joint():
    from torch_localmap._trace import trace_joint

    with use_mesh(MESH):
        return trace_joint(_Net(), (_inputs()[0],))


def test_joint_graph_has_forward_and_backward_region_nodes():
    jg = _joint()
    nodes = _region_nodes(jg.gm)
    fixed = [node_fixed_placements(n)["fixed"] for n in nodes]
    assert [f["role"] for f in fixed] == ["forward", "backward"]
    fw, bw = fixed
    assert fw["inputs"] == ["S(0)R", "RR"] and fw["outputs"] == ["S(0)R"]
    # backward: the saved inputs it reads (x, w: relu's mask is recomputed) and the output's
    # tangent in; only w needs a gradient, placed as declared
    assert bw["inputs"] == ["S(0)R", "RR", "S(0)R"] and bw["outputs"] == ["P(sum)R"]
    assert fw["region"] == bw["region"] == region_of(nodes[0]).name
    assert node_fixed_placements(next(iter(jg.gm.graph.nodes))) is None


def test_joint_graph_region_boundaries_are_constraint_nodes_with_gradient_placements():
    jg = _joint()
    sc = torch.ops.localmap.sharding_constraint.default
    calls = [(n.args[1], n.args[2] if len(n.args) > 2 else None) for n in jg.gm.graph.nodes if n.target is sc]
    # forward: x and w into the region (w's gradient declared Partial), the output out;
    # backward (written by the op's C++ autograd kernel): the output's gradient in, and w's
    # gradient pinned Partial -- the constraint the planner must keep (x needs no gradient).
    assert calls == [("S(0)R", "S(0)R"), ("RR", "P(sum)R"), ("S(0)R", None),
                     ("S(0)R", "S(0)R"), ("P(sum)R", "RR")]


def test_joint_graph_exports_to_planner_ir_with_fixed_placements():
    from torch_localmap._ir_export import export_graph

    jg = _joint()
    ex = export_graph(jg.gm, MESH.shape, MESH.dim_names, node_extra=node_fixed_placements)
    assert tlm._C.check_graph(ex.to_json()) == len(ex.nodes)
    pinned = [n for n in ex.nodes if n.fixed is not None]
    assert [n.op for n in pinned] == ["higher_order.tlm_local_map"] * 2
    assert pinned[0].args[0] == {"subgraph": "localmap_body_0"}


def test_region_survives_deepcopy_recompile_and_json():
    x, w = _inputs()
    with use_mesh(MESH):
        gm = make_fx(lambda x, w: scaled_matmul(x, w, 2.0))(x, w)
    want = region_of(_region_nodes(gm)[0])
    gm2 = copy.deepcopy(gm)
    gm2.recompile()
    (n2,) = _region_nodes(gm2)
    assert region_of(n2) == want
    assert Region.from_json(json.loads(json.dumps(want.to_json()))) == want
    torch.testing.assert_close(gm2(x, w), gm(x, w))
    torch.testing.assert_close(gm2(x, w), reference(x, w, 2.0))


def test_run_region_local_runs_the_body_on_shards():
    x, w = _inputs()
    with use_mesh(MESH):
        gm = make_fx(lambda x, w: scaled_matmul(x, w, 2.0))(x, w)
    (node,) = _region_nodes(gm)
    (top,) = run_region_local(node, [x[:4], w])
    (bottom,) = run_region_local(node, [x[4:], w])
    torch.testing.assert_close(torch.cat([top, bottom]), reference(x, w, 2.0))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph_without_graph_breaks(backend):
    x, w = _inputs()

    def model(x, w):
        return scaled_matmul(x * 2, w, 3.0).sum(dim=1)

    def grads(fn):
        xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = fn(xx, ww)
        y.sum().backward()
        return y.detach(), xx.grad, ww.grad

    ref = grads(model.__wrapped__ if hasattr(model, "__wrapped__") else
                (lambda x, w: reference(x * 2, w, 3.0).sum(dim=1)))
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    with use_mesh(MESH):
        got = grads(torch.compile(model, backend=counter, fullgraph=True))
    assert counter.frame_count == 1
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
    torch._dynamo.reset()
    with use_mesh(MESH):
        assert torch._dynamo.explain(model)(x, w).graph_break_count == 0


def test_aot_autograd_graphs_contain_forward_and_backward_hops():
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = []

    def backend(gm, example_inputs):
        from functorch.compile import make_boxed_func

        def keep(g, _):
            graphs.append(g)
            return make_boxed_func(g)

        return aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep)

    x, w = _inputs()
    w = w.clone().requires_grad_()
    torch._dynamo.reset()
    with use_mesh(MESH):
        torch.compile(lambda x, w: scaled_matmul(x, w, 2.0), backend=backend, fullgraph=True)(x, w).sum().backward()
    roles = [[region_of(n).role for n in _region_nodes(g)] for g in graphs]
    assert roles == [["forward"], ["backward"]]


def test_upstream_local_map_hop_nodes_are_read_from_meta():
    from torch.distributed.tensor.placement_types import Replicate, Shard

    class FakeMesh:
        shape = (2, 2)
        mesh_dim_names = ("dp", "tp")

    g = torch.fx.Graph()
    a = g.placeholder("a")
    a.meta["val"] = torch.empty(4, 4)
    node = g.call_function(torch._higher_order_ops.local_map_hop, (a,))
    node.meta["val"] = (torch.empty(4, 4),)
    node.meta["local_map_kwargs"] = {"in_placements": ((Shard(0), Replicate()),),
                                     "out_placements": ((Replicate(), Shard(1)),),
                                     "device_mesh": FakeMesh(), "in_grad_placements": None}
    fixed = node_fixed_placements(node)["fixed"]
    assert fixed["inputs"] == ["S(0)R"] and fixed["outputs"] == ["RS(1)"]
    assert region_of(node).mesh_dim_names == ("dp", "tp")


# ---- bad input --------------------------------------------------------------------------

def test_placement_count_must_match_argument_count():
    x, w = _inputs()
    bad = local_map(reference, out_placements="S(0)R", in_placements=("S(0)R", "RR"))
    with pytest.raises(ValueError, match=r"in_placements has 2 entries but the call has 3 arguments"):
        bad(x, w, 2.0)
    with use_mesh(MESH), pytest.raises(ValueError, match=r"in_placements has 2 entries"):
        bad(x, w, 2.0)


def test_placement_for_non_tensor_argument():
    x, w = _inputs()
    bad = local_map(reference, out_placements="S(0)R", in_placements=("S(0)R", "RR", "RR"))
    with use_mesh(MESH), pytest.raises(ValueError, match=r"in_placements\[2\]: argument 2 is not a tensor \(float\)"):
        bad(x, w, 2.0)


def test_shard_dim_beyond_tensor_rank():
    x, w = _inputs()
    bad = local_map(reference, out_placements="S(0)R", in_placements=("S(2)R", "RR", None))
    with use_mesh(MESH), pytest.raises(ValueError, match=r"in_placements\[0\].*Shard\(2\) is out of range"):
        bad(x, w, 2.0)


def test_wrong_number_of_mesh_dims():
    x, w = _inputs()
    bad = local_map(reference, out_placements="S(0)R", in_placements=("S(0)", "RR", None))
    with use_mesh(MESH), pytest.raises(ValueError, match=r"got 1 placements but the mesh has 2 dims"):
        bad(x, w, 2.0)


def test_output_count_must_match_out_placements():
    x, w = _inputs()
    bad = local_map(reference, out_placements=("S(0)R", "RR"), in_placements=("S(0)R", "RR", None))
    with use_mesh(MESH), pytest.raises(ValueError, match=r"out_placements has 2 entries but the region has 1 outputs"):
        bad(x, w, 2.0)
    with use_mesh(MESH), pytest.raises(ValueError, match=r"out_placements has 2 entries"):
        make_fx(lambda x, w: bad(x, w, 2.0), tracing_mode="fake")(x, w)


def test_tensor_output_needs_placements():
    x, w = _inputs()
    bad = local_map(reference, out_placements=(None,), in_placements=("S(0)R", "RR", None))
    with use_mesh(MESH), pytest.raises(ValueError, match=r"output 0 is a tensor .* placements are None"):
        bad(x, w, 2.0)


def _mutating(x, w, alpha):
    x.mul_(alpha)
    return x @ w


def test_the_one_mutation_check_names_the_input_written_in_place():
    from torch_localmap._local_map.hop import inputs_unmutated

    a, b = torch.zeros(2), torch.zeros(2)
    with inputs_unmutated("r", [a, b]):
        a.add(1)  # out of place: allowed
    with pytest.raises(RegionMutationError, match=r"region 'r' mutates its tensor input 1 in place"):
        with inputs_unmutated("r", [a, b]):
            b.add_(1)


@pytest.mark.parametrize("mode", ["no_mesh", "simulated", "make_fx", "autograd"])
def test_region_mutating_an_input_is_rejected(mode):
    x, w = _inputs()
    keep = x.clone()
    bad = local_map(_mutating, out_placements="S(0)R", in_placements=("S(0)R", "RR", None))
    with pytest.raises(RegionMutationError, match=r"mutate"):
        if mode == "no_mesh":
            bad(x, w, 2.0)
        else:
            with use_mesh(MESH):
                if mode == "simulated":
                    bad(x, w, 2.0)
                elif mode == "make_fx":
                    make_fx(lambda x, w: bad(x, w, 2.0), tracing_mode="fake")(x, w)
                else:
                    bad(x, w.clone().requires_grad_(), 2.0)
    if mode != "no_mesh":  # on a mesh the region only ever sees copies of its shards
        assert torch.equal(x, keep)


def test_tensor_kwargs_and_missing_in_placements_under_a_mesh():
    x, w = _inputs()
    kw = local_map(lambda x, *, w: x @ w, out_placements="S(0)R", in_placements=("S(0)R",))
    with use_mesh(MESH), pytest.raises(TypeError, match=r"tensor keyword argument 'w'"):
        kw(x, w=w)
    none = local_map(reference, out_placements="S(0)R")
    with use_mesh(MESH), pytest.raises(ValueError, match=r"in_placements is required"):
        none(x, w, 2.0)


def test_bad_placement_objects():
    with pytest.raises(TypeError, match=r"in_placements\[0\]"):
        local_map(reference, out_placements="RR", in_placements=(3,))
    with pytest.raises(ValueError, match=r"cannot parse placement"):
        local_map(reference, out_placements="X(1)")


def test_decorator_forms():
    @local_map(out_placements="R", in_placements=("R",))
    def a(x):
        return x + 1

    b = local_map(lambda x: x + 1, out_placements="R", in_placements=("R",))
    x = torch.randn(3)
    with use_mesh((1,)):
        torch.testing.assert_close(a(x), x + 1)
        torch.testing.assert_close(b(x), x + 1)
    assert a.__name__ == "a"
    assert tlm.local_map.use_mesh is use_mesh


# ---- redistribute_inputs in the planner ----------------------------------------------------

def _region_input_edge(redistribute: bool):
    """(producer's output spec, region's input spec, estimated step) for a region that wants
    its input replicated, fed by a matmul whose weight is pinned row-sharded: the cheap plan
    leaves the matmul's sum pending and reduces it on the way into the region."""
    from torch_localmap.plan import plan_module

    @local_map(out_placements="RR", in_placements=("RR",), redistribute_inputs=redistribute)
    def body(h):
        return torch.tanh(h)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(65536, 64))

        def forward(self, x):
            return body(x @ self.w).sum()

    plan = plan_module(M(), (2, 2), (torch.randn(8, 65536),), fixed_params={"w": "S(0)R"}, time_limit=5)
    g = plan.graph
    for i, fx in enumerate(g.fx_nodes):
        if plan.nodes[i].family == "local_map" and g.nodes[i].fixed["role"] == "forward":
            src = [a for a in fx.args if isinstance(a, torch.fx.Node) and a.op != "get_attr"][0]
            # The region's input boundary is a sharding-constraint node pinned like the region.
            assert src.target is torch.ops.localmap.sharding_constraint.default
            c = g.index_of[src]
            assert plan.nodes[c].family == "sharding_constraint" and plan.nodes[c].inputs[0] == plan.nodes[i].inputs[0]
            src = src.args[0]
            return plan.nodes[g.index_of[src]].outputs[0], plan.nodes[c].inputs[0], plan.summary.estimated_step_s
    raise AssertionError("no forward region in the plan")


def test_redistribute_inputs_false_means_no_collective_into_the_region():
    # torch's local_map refuses inputs in other placements unless redistribute_inputs=True;
    # the planner honours that: without it the matmul must produce the replicated value
    # itself (here by gathering the weight, dearer); with it, the pending sum is reduced.
    produced, taken, strict_cost = _region_input_edge(False)
    assert (produced, taken) == ("RR", "RR")
    produced, taken, free_cost = _region_input_edge(True)
    assert produced.startswith("P(sum)") and taken == "RR"
    assert free_cost < strict_cost
