"""The issue's reference model (torch_localmap/examples/cp_attention.py) on one device.

Regions on whole tensors (no mesh) and on a simulated (2, 2, 2) (dp, tp, cp) mesh must
give the plain model's output, loss and every parameter gradient; the joint graph's
region nodes must carry the declared placements. The parallelize end-to-end test lives
with parallelize."""
import pytest
import torch

from torch_localmap import region_of, use_mesh
from torch_localmap.examples.cp_attention import (
    MESH_DIM_NAMES, CPAttentionModel, PlainModel, cp_attention, example_inputs, pointwise, replicated_linear)
from torch_localmap._local_map import MeshSpec, node_fixed_placements

MESH = MeshSpec((2, 2, 2), MESH_DIM_NAMES)


class Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).square().mean()


def _run(model, x):
    out = model(x)
    loss = out.square().mean()
    loss.backward()
    return out.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("mesh", [None, MESH], ids=["whole_tensors", "simulated_2x2x2"])
def test_matches_plain_model(mesh):
    (x,) = example_inputs()
    ref = _run(PlainModel(), x)
    model = CPAttentionModel()
    if mesh is None:
        got = _run(model, x)
    else:
        with use_mesh(mesh):
            got = _run(model, x)
    torch.testing.assert_close(got[0], ref[0])
    torch.testing.assert_close(got[1], ref[1])
    assert got[2].keys() == ref[2].keys() == {"wq", "wk", "wv", "wo"}
    for name in ref[2]:
        torch.testing.assert_close(got[2][name], ref[2][name], msg=name)


def test_joint_graph_region_boundaries_carry_declared_placements():
    from torch_localmap._trace import trace_joint

    with use_mesh(MESH):
        jg = trace_joint(Loss(CPAttentionModel()), example_inputs())
    fixed = {}
    for n in jg.gm.graph.nodes:
        f = node_fixed_placements(n)
        if f:
            f = f["fixed"]
            fixed[(f["region"].split(":")[0].rsplit(".", 1)[1], f["role"])] = (f["inputs"], f["outputs"])
    assert fixed[("pointwise", "forward")] == (["S(0)S(0)R"], ["S(0)S(0)R"])
    assert fixed[("replicated_linear", "forward")] == (["RRR", "RRR"], ["RRR"])
    assert fixed[("cp_attention", "forward")] == (["S(0)S(1)S(2)", "S(0)S(1)R", "S(0)S(1)R"], ["S(0)S(1)S(2)"])
    # backward: saved q, k, v plus the output tangent in; q, k, v grads out, k and v Partial on cp
    assert fixed[("cp_attention", "backward")] == (
        ["S(0)S(1)S(2)", "S(0)S(1)R", "S(0)S(1)R", "S(0)S(1)S(2)"],
        ["S(0)S(1)S(2)", "S(0)S(1)P(sum)", "S(0)S(1)P(sum)"])
    assert fixed[("replicated_linear", "backward")][1] == ["RRR", "RRR"]
    # the region boundaries are sharding-constraint nodes; k's and v's gradients are pinned
    # Partial on cp in the backward, where the op's C++ autograd kernel put them
    sc = torch.ops.localmap.sharding_constraint.default
    calls = [(n.args[1], n.args[2] if len(n.args) > 2 else None) for n in jg.gm.graph.nodes if n.target is sc]
    assert calls.count(("S(0)S(1)R", "S(0)S(1)P(sum)")) == 2
    assert calls.count(("S(0)S(1)P(sum)", "S(0)S(1)R")) == 2
    # the model input needs no gradient, so the pointwise region has no backward node
    assert ("pointwise", "backward") not in fixed
    names = {region_of(n).name for n in jg.gm.graph.nodes if region_of(n)}
    assert names == {f.__wrapped__.__module__ + "." + f.__wrapped__.__qualname__ + ":" +
                     str(f.__wrapped__.__code__.co_firstlineno) for f in (pointwise, replicated_linear, cp_attention)}


def test_planner_charges_each_region_its_interior_compute():
    """A region's cost is its body's work on local shards, not a pass-through."""
    from torch_localmap.plan import plan_module

    plan = plan_module(Loss(CPAttentionModel()), (2, 2, 2), example_inputs(), time_limit=2.0)
    regions = [(ir, pn) for ir, pn in zip(plan.graph.nodes, plan.nodes) if ir.fixed is not None]
    assert regions, "the model has local_map regions"
    for ir, pn in regions:
        work = ir.extra["work"]
        assert work["bytes"] > 0, ir.name
        assert pn.compute_s > 0, ir.name
    # Attention (forward and backward) does matmuls inside: real FLOPs, and more than a
    # pointwise region's.
    def function(ir):  # region names are "module.qualname:line"
        return ir.fixed["region"].rsplit(".", 1)[1].split(":")[0]

    attn = [ir.extra["work"]["flops"] for ir, _ in regions if function(ir) == "cp_attention"]
    point = [ir.extra["work"]["flops"] for ir, _ in regions if function(ir) == "pointwise"]
    assert attn and point and min(attn) > max(point) > 0
