"""The issue's reference example end to end: parallelize the three-region (dp, tp, cp)
model on a (2, 2, 2) mesh of 8 gloo ranks; output, loss and every parameter gradient equal
the single-device model's, and the plan keeps each region's declared placements at its
boundaries (forward and backward nodes)."""
import pytest
import torch

from dist_utils import make_mesh, run_distributed


class _Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out.square().mean(), out


def _parallel_step(rank, world_size):
    import torch_localmap as tlm
    from torch_localmap.examples.cp_attention import MESH_DIM_NAMES, CPAttentionModel, example_inputs

    mesh = make_mesh((2, 2, 2), MESH_DIM_NAMES)
    model = _Loss(CPAttentionModel())
    (x,) = example_inputs()
    pm = tlm.parallelize(model, mesh, (x,), device="cpu", time_limit=2.0)
    loss, out = pm(x)
    loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        g = p.grad
        grads[name] = g.full_tensor() if hasattr(g, "full_tensor") else g
    pinned = []
    for node, planned in zip(pm.plan.graph.nodes, pm.plan.nodes):
        if node.fixed is not None:
            pinned.append((node.fixed["region"], node.fixed["role"], node.fixed["inputs"], node.fixed["outputs"],
                           {"inputs": list(planned.inputs), "outputs": list(planned.outputs)}))
    return {"loss": loss.detach().full_tensor(), "out": out.detach().full_tensor(), "grads": grads, "pinned": pinned}


@pytest.fixture(scope="module")
def results():
    return run_distributed(_parallel_step, 8, timeout=400.0)


def _reference():
    from torch_localmap.examples.cp_attention import PlainModel, example_inputs

    model = _Loss(PlainModel())
    (x,) = example_inputs()
    loss, out = model(x)
    loss.backward()
    return loss.detach(), out.detach(), {n: p.grad for n, p in model.named_parameters()}


def test_parallelized_regions_match_single_device(results):
    loss, out, grads = _reference()
    for r in results:
        torch.testing.assert_close(r["loss"], loss)
        torch.testing.assert_close(r["out"], out)
        assert r["grads"].keys() == grads.keys()
        for name in grads:
            torch.testing.assert_close(r["grads"][name], grads[name], msg=name)


def test_plan_keeps_declared_placements_at_region_boundaries(results):
    pinned = results[0]["pinned"]
    def fn(region):  # "torch_localmap.examples.cp_attention.pointwise:27" -> "pointwise"
        return region.rsplit(".", 1)[1].split(":")[0]

    roles = sorted((fn(region), role) for region, role, *_ in pinned)
    assert roles == [("cp_attention", "backward"), ("cp_attention", "forward"), ("pointwise", "forward"),
                     ("replicated_linear", "backward"), ("replicated_linear", "forward")]
    for region, role, ins, outs, strategy in pinned:
        assert strategy["inputs"] == ins, (region, role)
        assert strategy["outputs"] == outs, (region, role)
    attn_bw = next(p for p in pinned if fn(p[0]) == "cp_attention" and p[1] == "backward")
    assert attn_bw[3] == ["S(0)S(1)S(2)", "S(0)S(1)P(sum)", "S(0)S(1)P(sum)"]
