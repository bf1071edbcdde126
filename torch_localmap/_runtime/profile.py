"""Where a planned step's time goes, measured against the plan's estimate.

`compare_with_plan(program, plan, inputs)` runs the rank's forward and backward graphs
once node by node, each collective waited right after it is issued (no overlap: every
collective's own time), and sums seconds per op family (what the cost model prices
with its compute roofline) and per collective kind (what it prices with its collective
fits). The plan's estimate per family is its nodes' compute time, per collective kind
the steps of its redistributions (C++ prices them). Data movement around collectives
(padding, folding gathered pieces) is shown on its own: the model does not price it.
"""
from __future__ import annotations

import time
from collections import defaultdict

import torch
import torch.fx as fx

from .._torch_private import node_meta
from .schedule import is_wait, node_kind

_KIND_NAMES = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
               "all_reduce": "all_reduce", "all_reduce_": "all_reduce", "all_to_all_single": "all_to_all"}


class _Timed(fx.Interpreter):
    def __init__(self, gm, families, sync):
        super().__init__(gm)
        self.families, self.sync, self.seconds = families, sync, defaultdict(float)

    def run_node(self, n):
        if n.op != "call_function" or is_wait(n):
            return super().run_node(n)
        self.sync()
        t0 = time.perf_counter()
        out = super().run_node(n)
        kind = node_kind(n)
        if kind == "S":
            out = torch.ops._c10d_functional.wait_tensor.default(out)
            key = "comm: " + _KIND_NAMES.get(n.target._opname, n.target._opname)
        elif kind == "M":
            key = "data movement"
        else:
            i = node_meta.plan_node_of(n)
            key = "compute: " + (self.families.get(i) or "other")
        self.sync()
        self.seconds[key] += time.perf_counter() - t0
        return out


def _graph_of(fn):
    return getattr(fn, "graph_module", fn)


def measured_breakdown(program, plan, inputs) -> dict:
    """Seconds per category of one forward + backward of the rank program (eager, serialized)."""
    families = {i: n.family for i, n in enumerate(plan.nodes)}
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    with torch.no_grad():
        fw = _Timed(_graph_of(program.fw), families, sync)
        outs = fw.run(*inputs)
        seconds = fw.seconds
        if program.bw is not None:
            n = program.num_fwd_outputs
            tangents = [torch.ones_like(outs[j]) for j in program.tangent_outputs]
            bw = _Timed(_graph_of(program.bw), families, sync)
            bw.run(*outs[n:], *tangents)
            for k, v in bw.seconds.items():
                seconds[k] += v
    return dict(seconds)


def estimated_breakdown(plan, cost_model) -> dict:
    """Seconds per category the plan's cost model predicts for one step."""
    out = defaultdict(float)
    graph = plan.graph
    for i, (node, p) in enumerate(zip(graph.nodes, plan.nodes)):
        if node.op in ("placeholder",):
            continue
        if p.compute_s:
            out["compute: " + (p.family or "other")] += p.compute_s
        refs = []
        for arg in (node.args, node.kwargs):
            _refs(arg, refs)
        for k, (src_node, src_out) in enumerate(refs):
            if k >= len(p.inputs) or p.inputs[k] is None:
                continue
            src = plan.nodes[src_node].outputs[src_out]
            dst = p.inputs[k]
            if src == dst:
                continue
            meta = graph.nodes[src_node].outputs[src_out]
            for step in cost_model.redistribute_steps(list(meta.shape), meta.dtype, list(plan.mesh_shape), src, dst):
                name = step["collective"]
                out[("data movement" if name.startswith("local") else "comm: " + name)] += step["seconds"]
    return dict(out)


def _refs(arg, out):
    if isinstance(arg, dict):
        if "t" in arg:
            out.append(tuple(arg["t"]))
            return
        for v in arg.values():
            _refs(v, out)
    elif isinstance(arg, list):
        for v in arg:
            _refs(v, out)


def compare_with_plan(program, plan, inputs, cost_model) -> list:
    """Rows (category, estimated s, measured s, measured / estimated), largest first."""
    est = estimated_breakdown(plan, cost_model)
    meas = measured_breakdown(program, plan, inputs)
    rows = []
    for key in sorted(set(est) | set(meas), key=lambda k: -max(est.get(k, 0), meas.get(k, 0))):
        e, m = est.get(key, 0.0), meas.get(key, 0.0)
        rows.append((key, e, m, m / e if e > 0 else float("inf")))
    return rows
