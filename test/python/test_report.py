"""Plan reports (issue 18): per-module report, graph-order view, explained choices.

Checked on the bundled Llama-style model (32 layers, mesh 8x8, meta device), on a model
that calls one submodule twice with different arguments, and on the 3-D local_map
example. Every figure a report shows is checked against the plan it reads."""
import json
import math

import pytest
import torch
import torch.nn as nn

from torch_localmap import models
from torch_localmap import report as R
from torch_localmap.plan import Plan, plan_module


def _close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-11)  # costs are whole picoseconds in the solver


@pytest.fixture(scope="module")
def llama_plan():
    cfg = models.tiny_config("llama")
    cfg = type(cfg)(dim=256, n_layers=32, n_heads=8, n_kv_heads=4, ffn_dim=512, vocab_size=1024, seq_len=64)
    with torch.device("meta"):
        model, example = models.build("llama", cfg, batch=16)
    return plan_module(model, (8, 8), example, time_limit=5)


def test_llama_module_report_has_every_layer_call_with_its_costs(llama_plan):
    rep = R.build_report(llama_plan)
    json.dumps(rep)  # JSON-ready
    by_name = {e["name"]: e for e in rep["modules"]}
    layers = [f"layers.{i}" for i in range(32)]
    assert all(name in by_name for name in layers)
    order = [e["name"] for e in rep["modules"] if e["name"] in layers]
    assert order == layers  # call order
    root = by_name[""]
    s = llama_plan.summary
    # The root holds every forward and backward node and every parameter's optimizer step:
    # its totals are the plan's, less the output node's communication (graph outputs
    # leaving in their specs).
    out_comm = llama_plan.nodes[-1].comm_s
    assert root["optimizer_s"] > 0
    assert _close(root["forward"]["compute_s"] + root["backward"]["compute_s"] + root["optimizer_s"], s.compute_s,
                  1e-6)
    assert _close(sum(by_name[name]["optimizer_s"] for name in layers) + by_name["tok_embeddings"]["optimizer_s"]
                  + by_name["norm"]["optimizer_s"] + by_name["output"]["optimizer_s"], root["optimizer_s"], 1e-6)
    assert _close(root["forward"]["comm_s"] + root["backward"]["comm_s"] + out_comm, s.comm_s, 1e-6)
    for name in layers:
        e = by_name[name]
        assert e["parent"] == "" and e["depth"] == 1 and e["type"]
        assert e["params"] and all(k.startswith(name + ".") for k in e["params"])
        assert e["params"] == {k: v for k, v in llama_plan.param_placements().items() if k.startswith(name + ".")}
        assert e["inputs"] and e["outputs"]
        assert e["forward"]["compute_s"] > 0 and e["backward"]["compute_s"] > 0
        # A layer's figures are the sum of the nodes labelled with it or its sub-calls.
        inside = [n for n in llama_plan.nodes if n.module == name or n.module.startswith(name + ".")]
        assert _close(sum(n.compute_s for n in inside if n.phase == "forward"), e["forward"]["compute_s"], 1e-6)
        kinds = {c.split(" ")[0] for n in inside if n.phase == "backward" for r in n.redistributions
                 for c in r["collectives"]}
        assert set(e["backward"]["collectives"]) == kinds
        assert 0 <= e["share"]["compute"] <= 1
    text = R.format_modules(rep)
    assert "layers.31 (" in text and "backward compute" in text


def test_llama_layer_grid_and_graph_view_link_backward_to_forward(llama_plan):
    rep = R.build_report(llama_plan)
    grid = rep["layers"]
    assert grid["rows"] == [f"layers.{i}" for i in range(32)]
    assert grid["columns"] and all(all(c is not None for c in row) for row in grid["cells"])
    nodes = rep["nodes"]
    assert len(nodes) == len(llama_plan.nodes)
    by_name = {n["name"]: n for n in nodes}
    backward = [n for n in nodes if n["phase"] == "backward" and n["forward_node"]]
    assert len(backward) > 32 * 10
    for n in backward:
        fwd = by_name[n["forward_node"]]
        assert fwd["phase"] == "forward" and fwd["seq_nr"] == n["seq_nr"]
        assert fwd["index"] < n["index"]
        if n["module"].startswith("layers."):  # one op's forward and backward belong to the same call
            assert fwd["module"] == n["module"]
    ops = [n for n in nodes if n["phase"] in ("forward", "backward") and n["op"] != "aten.detach.default"]
    assert sum(1 for n in ops if n["module"].startswith("layers.")) > 0.8 * len(ops)
    moved = [r for n in nodes for r in n["redistributions"]]
    assert moved and all(r["from"] != r["to"] and r["seconds"] >= 0 for r in moved)
    text = R.format_graph(rep, region="layers.0.attention.wq")
    assert "differentiates" in text and "forward" in text and "backward" in text


def test_llama_memory_timeline_peaks_at_the_estimated_peak(llama_plan):
    rep = R.build_report(llama_plan)
    t = rep["memory_timeline"]
    m = llama_plan.summary.memory
    assert len(t["node"]) == len(t["bytes"]) <= 2000
    assert t["baseline"] == m.parameters + m.optimizer_state
    assert t["baseline"] + max(t["bytes"]) == m.peak
    prog = rep["solver_progress"]
    assert prog["seconds"] and len(prog["seconds"]) == len(prog["cost"]) == len(prog["bound"])
    assert prog["bound"][-1] <= prog["cost"][-1] * (1 + 1e-9)


def test_explain_prices_every_alternative_against_the_plan(llama_plan):
    name = next(k for k in llama_plan.param_placements() if k.startswith("layers.3.") and k.endswith("weight"))
    ex = R.explain(llama_plan, name)
    chosen = ex["alternatives"][0]
    assert chosen["chosen"] and chosen["outputs"] == [llama_plan.param_placements()[name]]
    assert chosen["delta"] == {"compute_s": 0.0, "comm_s": 0.0, "bytes": 0}
    assert len(ex["alternatives"]) >= 4
    assert len({tuple(a["outputs"]) for a in ex["alternatives"]}) == len(ex["alternatives"])
    # An op: its chosen compute and incoming communication are the plan's own figures.
    i = next(i for i, n in enumerate(llama_plan.nodes) if n.op == "aten.mm.default" and n.module.startswith("layers.5"))
    ex = R.explain(llama_plan, llama_plan.nodes[i].name)
    chosen = next(a for a in ex["alternatives"] if a["chosen"])
    assert _close(chosen["compute_s"], llama_plan.nodes[i].compute_s, 1e-6)
    assert _close(chosen["comm_in_s"], llama_plan.nodes[i].comm_s, 1e-6)
    assert "chosen" in R.format_explanation(ex)
    with pytest.raises(ValueError, match="no node or parameter named 'nope'"):
        R.explain(llama_plan, "nope")


def test_report_of_a_saved_plan_keeps_the_labels(llama_plan, tmp_path):
    path = tmp_path / "plan.json"
    llama_plan.save(path)
    again = Plan.load(path)
    a, b = R.build_report(llama_plan), R.build_report(again)
    assert [n["region"] for n in a["nodes"]] == [n["region"] for n in b["nodes"]]
    assert [n["forward_node"] for n in a["nodes"]] == [n["forward_node"] for n in b["nodes"]]
    assert [(e["name"], e["forward"], e["backward"]) for e in a["modules"]] == \
        [(e["name"], e["forward"], e["backward"]) for e in b["modules"]]
    assert a["memory_timeline"] == b["memory_timeline"] and a["solver_progress"] == b["solver_progress"]
    assert again.param_placements() == llama_plan.param_placements() and b["layers"] == a["layers"]
    assert [e["params"] for e in a["modules"]] == [e["params"] for e in b["modules"]]
    with pytest.raises(ValueError, match="read from a file"):
        R.explain(again, "layers.0.attention.wq.weight")


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class TwoCalls(nn.Module):
    """One block, called on a large batch and on a small one."""

    def __init__(self, dim=64):
        super().__init__()
        self.block = Block(dim)

    def forward(self, big, small):
        return self.block(big).square().mean() + self.block(small).square().mean()


def test_a_module_called_twice_gets_one_entry_per_call():
    model = TwoCalls()
    plan = plan_module(model, (4,), (torch.randn(4096, 64), torch.randn(4, 64)), time_limit=5,
                       device="cpu")
    rep = R.build_report(plan)
    by_name = {e["name"]: e for e in rep["modules"]}
    first, second = by_name["block"], by_name["block@1"]
    assert (first["call"], second["call"]) == (0, 1) and first["fqn"] == second["fqn"] == "block"
    assert by_name["block.up@1"]["parent"] == "block@1"
    assert first["params"] == second["params"]  # parameters are shared ...
    assert first["inputs"] and second["inputs"]  # ... activations are the call's own
    # Whether the two calls were planned differently is read from the plan, op by op.
    def ops(names, phase):
        return [(n.op, n.inputs, n.outputs) for n in plan.nodes if n.module in names and n.phase == phase]

    calls = [("block", "block.up", "block.down"), ("block@1", "block.up@1", "block.down@1")]
    differs = any(ops(calls[0], p) != ops(calls[1], p) for p in ("forward", "backward"))
    assert (second["differs_from"] == "block") == differs
    assert first["differs_from"] is None
    if differs:
        cost = lambda e: sum(e[p]["compute_s"] + e[p]["comm_s"] for p in ("forward", "backward"))  # noqa: E731
        delta = cost(second) - cost(first)
        assert R._time(abs(delta)) in second["difference"]
        assert "DIFFERS" in R.format_modules(rep)


def test_local_map_regions_are_labelled_forward_and_backward():
    from torch_localmap.examples.cp_attention import MESH_DIM_NAMES, CPAttentionModel, example_inputs

    plan = plan_module(CPAttentionModel(), (2, 2, 2), example_inputs(), time_limit=5)
    del MESH_DIM_NAMES
    rep = R.build_report(plan)
    regions = {}
    for n in rep["nodes"]:
        if n["region"].startswith("local_map:"):  # local_map:<module>.<function>:<line>
            short = n["region"].rsplit(":", 1)[0].rsplit(".", 1)[-1]
            regions.setdefault((short, n["phase"]), []).append(n)
    assert {("cp_attention", "forward"), ("cp_attention", "backward"), ("pointwise", "forward")} <= set(regions)
    fwd = regions[("cp_attention", "forward")][0]
    assert fwd["op"] == "higher_order.tlm_local_map"
    assert fwd["inputs"] == ["S(0)S(1)S(2)", "S(0)S(1)R", "S(0)S(1)R"] and fwd["outputs"] == ["S(0)S(1)S(2)"]
    bwd = regions[("cp_attention", "backward")][0]
    assert bwd["outputs"] == ["S(0)S(1)S(2)", "S(0)S(1)P(sum)", "S(0)S(1)P(sum)"]  # its in_grad_placements
    assert bwd["seq_nr"] == fwd["seq_nr"] and bwd["forward_node"] == fwd["name"]
    assert all(n["module"] == "" for nodes in regions.values() for n in nodes)  # called by the root's forward
    assert "local_map:cp_attention:" in R.format_graph(rep)


def test_a_model_on_the_meta_device_traces_like_a_real_one():
    """Meta tensors reach some Meta kernels without autograd (nll_loss: cross-entropy lost its
    whole backward); the trace uses CPU fake tensors instead, so both graphs are the same."""
    from torch_localmap._trace import trace_joint

    model, example = models.build("llama", batch=2)
    with torch.device("meta"):
        meta_model, meta_example = models.build("llama", batch=2)
    ops = [str(n.target) for n in trace_joint(model, example).gm.graph.nodes]
    meta_ops = [str(n.target) for n in trace_joint(meta_model, meta_example).gm.graph.nodes]
    assert meta_ops == ops and any("nll_loss_backward" in o for o in ops)
