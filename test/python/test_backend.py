"""torch.compile(model, backend="localmap") beyond one training graph (issue 14): graph
breaks (each subgraph planned, a parameter read by both keeps one placement), BatchNorm
buffers written back, eval / no_grad graphs planned (not replicated), dynamic shapes
re-planned per shape, DTensor inputs in their own placements. Each result is compared with
the eager model in one process; parameters are forced onto sharded placements.
"""
import torch
import torch.nn as nn

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

TOL = dict(rtol=2e-4, atol=2e-5)


class BrokenNet(nn.Module):
    """Two compiled regions (a graph break between them) that both read `shared`."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(16, 16)
        self.bn = nn.BatchNorm1d(16)
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        h = torch.relu(self.bn(self.shared(x)))
        torch._dynamo.graph_break()
        return self.head(torch.tanh(self.shared(h)))


def _model():
    torch.manual_seed(0)
    return BrokenNet()


def _inputs(batch):
    return torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))


def _reference():
    m = _model().train()
    out = m(_inputs(8))
    out.square().mean().backward()
    ref = {"out": out.detach(), "grads": {k: p.grad.clone() for k, p in m.named_parameters()},
           "buffers": {k: b.clone() for k, b in m.named_buffers()}}
    m.eval()
    with torch.no_grad():
        ref["eval"] = {b: m(_inputs(b)) for b in (8, 12)}
        ref["fresh_eval"] = _model().eval()(_inputs(8))  # initial running statistics
    return ref


def _rank_backend(rank, world_size):
    from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor

    mesh = make_mesh((2,))
    model = _model().train()
    plans = []
    compiled = torch.compile(model, backend="localmap", dynamic=True,
                             options={"mesh": mesh, "calibration": FORCE_SHARDING, "on_plan": plans.append})
    out = compiled(_inputs(8))
    out.square().mean().backward()
    res = {"out": _full(out.detach()), "grads": {k: _full(p.grad) for k, p in model.named_parameters()},
           "buffers": {k: _full(b) for k, b in model.named_buffers()}, "train_plans": len(plans)}
    # The placement each plan gave `shared.weight` (the same tensor in both regions).
    res["shared_specs"] = {p.state_placements().get("shared.weight") for p in plans} - {None}
    res["train_sharded"] = sorted({k for p in plans for k, s in p.state_placements().items() if set(s) != {"R"}})

    model.eval()
    n = len(plans)
    with torch.no_grad():
        res["eval"] = {b: _full(compiled(_inputs(b))) for b in (8, 12)}  # a second shape: re-planned
    eval_plans = plans[n:]
    res["eval_plans"] = len(eval_plans)
    res["eval_backward"] = [p.joint.backward for p in eval_plans]
    res["eval_sharded"] = any(set(s) != {"R"} for p in eval_plans for s in p.state_placements().values())
    res["eval_shared_specs"] = {p.state_placements().get("shared.weight") for p in eval_plans} - {None}

    # A model whose parameters are DTensors (here `shared.weight` sharded by rows, the rest
    # replicated) takes a DTensor input (each rank holds its batch shard): both are planned
    # in their own placements.
    def shard_shared(name, module, mesh):
        for pname, p in list(module.named_parameters(recurse=False)):
            placements = [Shard(0)] if name == "shared" and pname == "weight" else [Replicate()]
            module.register_parameter(pname, nn.Parameter(distribute_tensor(p.detach(), mesh, placements)))

    dmodel = distribute_module(_model().eval(), mesh, shard_shared)
    dplans = []
    dcompiled = torch.compile(dmodel, backend="localmap", options={"mesh": mesh, "on_plan": dplans.append})
    with torch.no_grad():
        res["dtensor_in"] = _full(dcompiled(distribute_tensor(_inputs(8), mesh, [Shard(0)])))
    res["dtensor_specs"] = {p.state_placements().get("shared.weight") for p in dplans} - {None}

    # optimizer_impl picks figures a live calibration measured; this profile has none: refused.
    try:
        torch.compile(_model(), backend="localmap",
                      options={"mesh": mesh, "calibration": FORCE_SHARDING, "optimizer_impl": "fused"})(_inputs(8))
        res["impl_error"] = None
    except Exception as e:  # Dynamo wraps the backend's ValueError
        res["impl_error"] = str(e)
    return res


def test_backend_graph_breaks_buffers_eval_dynamic_shapes_and_dtensor_inputs():
    ref = _reference()
    results = run_distributed(_rank_backend, 2, timeout=600)
    for r in results:
        torch.testing.assert_close(r["out"], ref["out"], **TOL)
        for k, g in ref["grads"].items():
            torch.testing.assert_close(r["grads"][k], g, **TOL, msg=lambda m: f"grad {k}: {m}")
        for k, b in ref["buffers"].items():  # running stats and the batch counter, as eager wrote them
            torch.testing.assert_close(r["buffers"][k], b, **TOL, msg=lambda m: f"buffer {k}: {m}")
        assert r["train_plans"] >= 2, "the graph break should give two planned regions"
        assert len(r["shared_specs"]) == 1, r["shared_specs"]  # one placement for the shared weight
        assert r["train_sharded"], "FORCE_SHARDING should shard parameters in the backend"
        for b, want in ref["eval"].items():
            torch.testing.assert_close(r["eval"][b], want, **TOL, msg=lambda m: f"eval batch {b}: {m}")
        assert r["eval_plans"] >= 2 and not any(r["eval_backward"]), "eval graphs: forward-only plans"
        assert "optimizer_impl='fused': this calibration profile has no optimizer figures" in (r["impl_error"] or ""), \
            r["impl_error"]
        assert r["eval_sharded"], "eval graphs were planned all-replicated"
        assert r["eval_shared_specs"] <= r["shared_specs"]  # eval reuses the training placement
        torch.testing.assert_close(r["dtensor_in"], ref["fresh_eval"], **TOL)
        assert r["dtensor_specs"] == {"S(0)"}, r["dtensor_specs"]  # planned in its own placement
