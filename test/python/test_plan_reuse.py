"""Plan once, train many (issue 29): a saved plan is validated when it is read (every spec
against the plan's own mesh and tensor shapes, errors naming the node and the field), is
applied only to the model call it was made for (its fingerprint; PlanMismatchError names
what differs), and applied it trains like a plan made in place: 4 gloo ranks against one
process, and the compile backend against eager.
"""
import json

import pytest
import torch
import torch.nn as nn

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING
from torch_localmap import MeshSpec, PlanMismatchError
from torch_localmap.examples.mlp import make_example
from torch_localmap.plan import Plan, plan_module

CFG = dict(batch=32, d_in=32, hidden=64, d_out=16, depth=2, dtype=torch.float64)
# Sharded on both mesh dims, so the applied plan has to communicate to get the numbers right.
FIXED = {"layers.0.weight": "S(0)S(1)", "layers.0.bias": "RS(0)", "layers.1.weight": "S(1)R",
         "layers.2.weight": "RS(1)", "layers.2.bias": "S(0)R"}
STEPS = 3
LR = 0.1
TOL = dict(rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model, example = make_example(**CFG)
    plan = plan_module(model, (2, 2), example, time_limit=2, fixed_params=FIXED)
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    plan.save(path)
    return path, plan


def _edited(tmp_path, source, edit):
    doc = json.loads(source.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


def _matrix_node(doc):
    """(index, name) of the first op whose output is a 2-D tensor."""
    for i, n in enumerate(doc["nodes"]):
        if n["op"] not in ("placeholder", "output") and len(n["tensors"]["outputs"][0]) == 2 and n["tensors"]["inputs"]:
            return i, n["name"]
    raise AssertionError("no matrix op in the plan")


def _no_solving(monkeypatch):
    import torch_localmap.plan as plan_mod

    def refuse(*_args, **_kwargs):
        raise AssertionError("a saved plan was given: nothing should be solved")

    monkeypatch.setattr(plan_mod, "_plan_json", refuse)


# ---- reading a plan file --------------------------------------------------------------

def test_saved_plan_reads_back_as_written(saved):
    path, plan = saved
    again = Plan.load(path)
    assert again.to_document() == plan.to_document()
    assert again.fingerprint == plan.fingerprint and len(again.fingerprint["hash"]) == 32
    assert set(FIXED.items()) <= set(again.param_placements().items())


@pytest.mark.parametrize("field", ["outputs", "inputs"])
def test_a_misspelled_placement_is_refused_naming_node_and_field(saved, tmp_path, field):
    doc = json.loads(saved[0].read_text())
    i, name = _matrix_node(doc)

    def edit(d):
        d["nodes"][i]["strategy"][field][0] = "XYZ"

    with pytest.raises(ValueError, match=rf"plan\.nodes\[{i}\] \('{name}', .*\)\.strategy\.{field}\[0\]: "
                                         r"cannot parse placement 'XYZ'"):
        Plan.load(_edited(tmp_path, saved[0], edit))


def test_a_shard_dim_beyond_the_tensor_is_refused(saved, tmp_path):
    doc = json.loads(saved[0].read_text())
    i, name = _matrix_node(doc)

    def edit(d):
        d["nodes"][i]["strategy"]["outputs"][0] = "S(9)R"

    with pytest.raises(ValueError, match=rf"plan\.nodes\[{i}\] \('{name}', .*strategy\.outputs\[0\] 'S\(9\)R': "
                                         r"Shard\(9\) is out of range for a tensor with 2 dims"):
        Plan.load(_edited(tmp_path, saved[0], edit))


def test_a_redistribution_that_does_not_fit_is_refused(saved, tmp_path):
    doc = json.loads(saved[0].read_text())
    i = next(i for i, n in enumerate(doc["nodes"]) if n.get("redistributions"))

    def edit(d):
        d["nodes"][i]["redistributions"][0]["to"] = "S(7)R"

    with pytest.raises(ValueError, match=rf"plan\.nodes\[{i}\] .*\.redistributions\[0\]\.to 'S\(7\)R': Shard\(7\)"):
        Plan.load(_edited(tmp_path, saved[0], edit))


def test_a_mesh_of_another_rank_count_is_refused(saved, tmp_path):
    def more_ranks(d):
        d["mesh"]["shape"] = [2, 4]

    with pytest.raises(ValueError, match=r"plan\.mesh\.shape: \[2, 4\] is not the mesh this plan was made for"):
        Plan.load(_edited(tmp_path, saved[0], more_ranks))

    def more_dims(d):
        d["mesh"]["shape"] = [2, 2, 2]

    with pytest.raises(ValueError, match=r"plan\.nodes\[0\] \('primals_1', placeholder\)\.strategy\.outputs\[0\] "
                                         r"'S\(0\)S\(1\)': got 2 placements but the mesh has 3 dims"):
        Plan.load(_edited(tmp_path, saved[0], more_dims))


@pytest.mark.parametrize("key", ["hash", "graph", "boundary"])
def test_an_edited_fingerprint_is_refused(saved, tmp_path, key):
    def edit(d):
        d["fingerprint"][key] = "0" * 32

    with pytest.raises(ValueError, match=r"plan\.mesh\.shape: \[2, 2\] is not the mesh this plan was made for "
                                         r"\(plan\.fingerprint\.hash covers"):
        Plan.load(_edited(tmp_path, saved[0], edit))


def test_a_plan_of_the_previous_format_is_refused_with_what_to_do(saved, tmp_path):
    def old(d):
        d["format_version"] = 1
        del d["fingerprint"]

    with pytest.raises(ValueError, match=r"format_version: 1, written by an older torch_localmap.*Plan the model "
                                         r"again and save it"):
        Plan.load(_edited(tmp_path, saved[0], old))


# ---- applying a plan: made for this call, or refused ----------------------------------

class _Leaky(nn.Module):
    def __init__(self, slope):
        super().__init__()
        self.fc, self.slope = nn.Linear(8, 8), slope

    def forward(self, x):
        return nn.functional.leaky_relu(self.fc(x), self.slope).sum()


@pytest.mark.parametrize("case", ["mesh", "batch", "dtype", "depth", "fixed"])
def test_a_plan_made_for_another_call_names_what_differs(saved, monkeypatch, case):
    _no_solving(monkeypatch)
    plan = Plan.load(saved[0])
    model, example = make_example(**CFG)
    mesh, options, want = (2, 2), {}, None
    if case == "mesh":
        mesh, want = (4,), r"mesh shape: the plan was made for a mesh of shape \[2, 2\], this mesh has shape \[4\]"
    elif case == "batch":
        _, example = make_example(**{**CFG, "batch": 16})
        want = r"input 0 \('\w+'\): the plan was made for \[32, 32\] float64, this call has \[16, 32\] float64"
    elif case == "dtype":
        model, example = make_example(**{**CFG, "dtype": torch.float32})
        want = r"input 0 .*\[32, 32\] float64, this call has \[32, 32\] float32"
    elif case == "depth":
        model, example = make_example(**{**CFG, "depth": 3})
        want = r"graph: the plan has \d+ nodes, this graph \d+; the first differing node is node \d+"
    else:
        options, want = {"fixed_params": {"layers.0.weight": "RR"}}, \
            r"fixed_params\['layers\.0\.weight'\]: the plan places it in S\(0\)S\(1\), this call fixes it to RR"
    with pytest.raises(PlanMismatchError, match=want):
        plan_module(model, mesh, example, plan=plan, **options)


def test_a_graph_differing_only_in_an_argument_is_refused(tmp_path, monkeypatch):
    x = torch.randn(4, 8)
    plan = plan_module(_Leaky(0.01), (2,), (x,), time_limit=1)
    _no_solving(monkeypatch)
    assert plan_module(_Leaky(0.01), (2,), (x,), plan=plan).fingerprint == plan.fingerprint
    with pytest.raises(PlanMismatchError, match="graph: the same ops and shapes, but some op's arguments"):
        plan_module(_Leaky(0.2), (2,), (x,), plan=plan)


def test_a_simulated_mesh_plan_applies_to_a_named_mesh_without_solving(saved, monkeypatch):
    path, plan = saved
    _no_solving(monkeypatch)
    model, example = make_example(**CFG)
    applied = plan_module(model, MeshSpec((2, 2), ("dp", "tp")), example, plan=str(path))
    assert [(n.inputs, n.outputs) for n in applied.nodes] == [(n.inputs, n.outputs) for n in plan.nodes]
    assert applied.graph is not None and applied.joint is not None  # what the runtime needs
    assert applied.mesh_dim_names == ("dp", "tp") and applied.fingerprint == plan.fingerprint
    assert applied.param_placements() == plan.param_placements()


def test_a_plan_of_a_meta_device_model_applies_to_the_model_on_cpu(saved, monkeypatch):
    model, example = make_example(**CFG)
    with torch.device("meta"):
        meta_model, _ = make_example(**CFG)
    plan = plan_module(meta_model, (2, 2), example, time_limit=1, fixed_params=FIXED)
    assert plan.fingerprint == saved[1].fingerprint  # where the weights live is not part of it
    _no_solving(monkeypatch)
    assert plan_module(model, (2, 2), example, plan=plan).param_placements() == plan.param_placements()


def test_plan_must_be_a_plan_or_a_path():
    model, example = make_example(**CFG)
    with pytest.raises(TypeError, match="plan: expected a torch_localmap Plan or a plan file's path, got int"):
        plan_module(model, (2, 2), example, plan=42)


# ---- end to end: plan on a laptop, train with the file --------------------------------

def _train(model, x, y):
    from torch.distributed.tensor import DTensor

    def full(t):
        return t.full_tensor() if isinstance(t, DTensor) else t.clone()

    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], None
    for step in range(STEPS):
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        if step == 0:
            grads = {k: full(p.grad) for k, p in model.named_parameters()}
        opt.step()
        losses.append(full(loss.detach()))
    return torch.stack(losses), grads, {k: full(p.detach()) for k, p in model.named_parameters()}


def _rank_train_with_saved_plan(rank, world_size, path):
    import torch_localmap.plan as plan_mod
    from torch_localmap import parallelize

    def refuse(*_args, **_kwargs):
        raise AssertionError("a saved plan was given: nothing should be solved")

    plan_mod._plan_json = refuse
    mesh = make_mesh((2, 2))
    model, (x, y) = make_example(**CFG)
    pmodel = parallelize(model, mesh, (x, y), plan=Plan.load(path))
    return _train(pmodel, x, y), pmodel.plan.param_placements(), pmodel.plan.fingerprint


def test_saved_plan_trains_on_four_ranks_like_one_process(tmp_path):
    from torch_localmap import report

    # On the laptop: plan for the cluster's 2x2 mesh (simulated), look at the page, save.
    model, example = make_example(**CFG)
    plan = plan_module(model, (2, 2), example, time_limit=2, fixed_params=FIXED)
    report.write_report_html(plan, tmp_path / "plan.html")
    assert (tmp_path / "plan.html").stat().st_size > 0
    plan.save(tmp_path / "plan.json")
    # On the cluster: every rank trains with the file.
    ref_model, (x, y) = make_example(**CFG)
    ref_losses, ref_grads, ref_params = _train(ref_model, x, y)
    results = run_distributed(_rank_train_with_saved_plan, 4, str(tmp_path / "plan.json"), timeout=300)
    for (losses, grads, params), placements, fingerprint in results:
        assert placements == plan.param_placements() and fingerprint == plan.fingerprint
        assert set(FIXED.items()) <= set(placements.items())
        torch.testing.assert_close(losses, ref_losses, **TOL)
        for k in ref_grads:
            torch.testing.assert_close(grads[k], ref_grads[k], **TOL, msg=lambda m: f"grad of {k}: {m}")
            torch.testing.assert_close(params[k], ref_params[k], **TOL, msg=lambda m: f"param {k}: {m}")


def _compile_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def _rank_backend_with_saved_plans(rank, world_size, folder):
    import os

    import torch_localmap.plan as plan_mod

    mesh = make_mesh((world_size,))
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    saved = []

    def keep(plan):
        path = os.path.join(folder, f"rank{rank}_graph{len(saved)}.json")
        plan.save(path)
        saved.append(path)

    first = torch.compile(_compile_model(), backend="localmap", fullgraph=True,
                          options={"mesh": mesh, "calibration": FORCE_SHARDING, "on_plan": keep})
    first(x).square().mean().backward()
    torch._dynamo.reset()

    def refuse(*_args, **_kwargs):
        raise AssertionError("a saved plan was given: nothing should be solved")

    plan_mod._plan_json = refuse
    model = _compile_model()
    applied = []
    again = torch.compile(model, backend="localmap", fullgraph=True,
                          options={"mesh": mesh, "calibration": FORCE_SHARDING, "plan": saved,
                                   "on_plan": applied.append})
    out = again(x)
    out.square().mean().backward()
    specs = {n.outputs[0] for p in applied for n in p.nodes if n.outputs}
    return out.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}, len(saved), specs


def test_compile_backend_applies_saved_plans(tmp_path):
    model = _compile_model()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    ref = model(x)
    ref.square().mean().backward()
    for out, grads, n_saved, specs in run_distributed(_rank_backend_with_saved_plans, 2, str(tmp_path), timeout=240):
        assert n_saved == 1 and specs - {"R"}, "the saved plan should shard something"
        torch.testing.assert_close(out, ref.detach(), rtol=2e-4, atol=2e-5)
        for k, p in model.named_parameters():
            torch.testing.assert_close(grads[k], p.grad, rtol=2e-4, atol=2e-5)
