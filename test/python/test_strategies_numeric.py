"""Every strategy the C++ propagator emits for small MLP joint graphs is numerically exact.

Uneven shapes on purpose (batch 5, widths 7 and 3) so that uneven and empty
shards, nested sharding and per-rank shape arguments are exercised. The full
per-op verifier (python -m torch_localmap verify-strategies) covers more ops.
"""
import json

import pytest
import torch
import torch.nn as nn

from torch_localmap import _C
from torch_localmap._ir_export import export_graph
from torch_localmap._trace import trace_joint

from strategy_numeric import check_node


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 7)
        self.l2 = nn.Linear(7, 3)

    def forward(self, x, y):
        return ((self.l2(torch.relu(self.l1(x))) - y) ** 2).mean()


class Activations(nn.Module):
    """Covers the rest of the MLP op set: gelu, tanh, sigmoid, neg, casts, like ops, reductions."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 8)
        self.l2 = nn.Linear(8, 4, bias=False)

    def forward(self, x, y):
        h = nn.functional.gelu(self.l1(x))
        h = torch.tanh(h) * torch.sigmoid(h) + torch.ones_like(h) - torch.zeros_like(h)
        h = self.l2(h).reshape(-1)
        z = h.view(5, 4)
        per_row = (z - y).mean(dim=1)
        return (per_row * per_row).sum() + z.neg().clone().to(torch.float64).mean().to(torch.float32)


def _graph(module, inputs, mesh):
    torch.manual_seed(0)
    joint = trace_joint(module, inputs)
    ex = export_graph(joint.gm, mesh)
    return ex.document(), ex.to_json()


CASES = {
    "mlp": lambda: (MLP(), (torch.randn(5, 6), torch.randn(5, 3))),
    "activations": lambda: (Activations(), (torch.randn(5, 6), torch.randn(5, 4))),
}


@pytest.mark.parametrize("mesh", [[2], [2, 2]], ids=["2", "2x2"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_strategy_is_exact(case, mesh):
    module, inputs = CASES[case]()
    doc, ir = _graph(module, inputs, mesh)
    result = json.loads(_C.enumerate_strategies(ir, False))  # no fallback: every op must have a rule
    checked, failures = 0, []
    for i, (node, entry) in enumerate(zip(doc["nodes"], result)):
        if entry is None or node["op"] == "placeholder":
            continue
        assert not entry["fell_back"]
        assert entry["strategies"], node["name"]
        for s in entry["strategies"]:
            try:
                check_node(doc, ir, i, s, seed=checked)
            except Exception as e:  # collect all, report together
                failures.append(f"{node['name']} ({node['op']}) {s}: {e}")
            checked += 1
    assert not failures, "\n".join(failures[:20])
    assert checked > 50


def test_placeholders_get_every_rs_spec_and_no_partial():
    doc, ir = _graph(*CASES["mlp"](), [2, 2])
    result = json.loads(_C.enumerate_strategies(ir))
    # l1.weight is (7, 6): on 2x2, R/S(0)/S(1) on each mesh dim = 9 specs, all shardable.
    idx = next(i for i, n in enumerate(doc["nodes"]) if n["op"] == "placeholder" and n["outputs"][0]["shape"] == [7, 6])
    outs = [s["outputs"][0] for s in result[idx]["strategies"]]
    assert len(outs) == 9 and len(set(outs)) == 9
    assert all("P" not in o for o in outs)


def test_unknown_op_falls_back_or_raises():
    doc, _ = _graph(*CASES["mlp"](), [2])
    relu = next(n for n in doc["nodes"] if n["op"] == "aten.relu.default")
    relu["op"] = "aten.not_a_real_op.default"
    ir = json.dumps(doc)
    entry = json.loads(_C.enumerate_strategies(ir))[doc["nodes"].index(relu)]
    assert entry["fell_back"] and entry["family"] == "fallback"
    assert entry["strategies"] == [{"inputs": ["R"], "outputs": ["R"]}]
    with pytest.raises(ValueError, match=r"aten\.not_a_real_op\.default.*'relu'.*local_map"):
        _C.enumerate_strategies(ir, False)


def test_op_work_counts_local_matmul_flops():
    doc, ir = _graph(*CASES["mlp"](), [2])
    mm = next(i for i, n in enumerate(doc["nodes"]) if n["op"] == "aten.addmm.default")
    a, b = doc["nodes"][mm]["args"][1]["t"][0], doc["nodes"][mm]["args"][2]["t"][0]
    m, k = doc["nodes"][a]["outputs"][0]["shape"]
    n = doc["nodes"][b]["outputs"][0]["shape"][1]
    full, _ = _C.op_work(ir, mm, json.dumps({"inputs": ["R", "R", "R"], "outputs": ["R"]}))
    rows, _ = _C.op_work(ir, mm, json.dumps({"inputs": ["R", "S(0)", "R"], "outputs": ["S(0)"]}))
    assert full == 2 * m * n * k + 2 * m * n
    assert rows == 2 * 3 * n * k + 2 * 3 * n  # largest shard of 5 rows over 2 ranks holds 3


def test_bad_strategy_and_coord_raise_value_error():
    doc, ir = _graph(*CASES["mlp"](), [2])
    mm = next(i for i, n in enumerate(doc["nodes"]) if n["op"] == "aten.addmm.default")
    with pytest.raises(ValueError, match="tensor inputs"):
        _C.op_work(ir, mm, json.dumps({"inputs": ["R"], "outputs": ["R"]}))
    with pytest.raises(ValueError, match="outside the mesh"):
        _C.local_call_args(ir, mm, json.dumps({"inputs": ["R", "R", "R"], "outputs": ["R"]}), [2])
    with pytest.raises(ValueError, match="outside the graph"):
        _C.op_work(ir, 10**6, json.dumps({"inputs": [], "outputs": []}))
