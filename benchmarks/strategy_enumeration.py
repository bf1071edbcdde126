"""Strategy enumeration speed: our C++ propagator vs DTensor's Python strategy functions.

Traces the Llama-3-8B-shaped joint graph (fake tensors, no real memory), exports the
planner IR and times `_C.enumerate_strategies` on each mesh. Beside it, in the same run,
DTensor's own strategy functions (torch.distributed.tensor sharding propagator on a fake
process-group mesh) enumerate strategies node by node the way autoparallel drives them:
each op gets its producers' output specs as input strategies. DTensor runs on a graph
with --dtensor-layers layers (the layers are identical) under a time budget; its total
for the full graph is extrapolated per node from the mean time of each op measured.

    PYTHONPATH=$PWD python benchmarks/strategy_enumeration.py [--layers 32] [--mesh 8x8 --mesh 8x8x4]
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from torch_localmap import _C, models
from torch_localmap._torch_private import dtensor_reference as dtref
from torch_localmap._ir_export import export_graph
from torch_localmap._trace import trace_joint


def trace_llama(layers: int, seq: int):
    cfg = dataclasses.replace(models.llama.LlamaConfig.llama3_8b(), n_layers=layers, seq_len=seq)
    with FakeTensorMode():
        module, inputs = models.build("llama", config=cfg, batch=1)
    return trace_joint(module, inputs)


def _timed(fn, repeat: int):
    """(median wall s, median CPU s of this process, last result). CPU time is what the
    comparison uses: the machine is shared, and both sides are single-threaded."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return statistics.median(walls), statistics.median(cpus), result


def _all_specs(ndim: int, mesh_ndim: int) -> list:
    """Every R/S(d) spec of a tensor: what autoparallel offers for placeholders."""
    per_dim = ["R"] + [f"S({d})" for d in range(ndim)]
    return [tuple(c) for c in itertools.product(per_dim, repeat=mesh_ndim)]


def dtensor_enumerate(gm: fx.GraphModule, mesh_shape, budget_s: float):
    """Per-node DTensor strategy enumeration.

    Returns ({op: [CPU seconds per node]}, nodes timed, ops without rules, {op: first error}).
    """
    dmesh = dtref.dtensor_fake_mesh(mesh_shape)
    slot = dtref._TensorSlot
    outs = {}  # fx node -> list over outputs of lists of spec tuples
    per_op, no_rule, timed, errors = {}, set(), 0, {}
    start = time.perf_counter()
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if n.op == "placeholder":
            outs[n] = [_all_specs(val.dim(), len(mesh_shape))]
            continue
        if n.op != "call_function":
            continue
        if n.target is __import__("operator").getitem:
            src, k = n.args
            outs[n] = [outs.get(src, [[("R",) * len(mesh_shape)]] * (k + 1))[k]]
            continue
        replicate = [("R",) * len(mesh_shape)]
        n_out = len(val) if isinstance(val, (list, tuple)) else 1
        if not isinstance(n.target, torch._ops.OpOverload) or not dtref.dtensor_has_rule(n.target):
            no_rule.add(str(n.target))
            outs[n] = [replicate] * n_out
            continue
        if time.perf_counter() - start > budget_s:
            outs[n] = [replicate] * n_out
            continue
        metas, choices = [], []

        def to_slot(a):
            if isinstance(a, fx.Node):
                v = a.meta["val"]
                metas.append((list(v.shape), v.dtype))
                specs = outs.get(a, [replicate])[0] or replicate
                # DTensor takes every spec the producer offers; Replicate first for single-dim rules
                choices.append(sorted(set(specs), key=lambda s: (s != replicate[0], s)))
                return slot(len(metas) - 1)
            return a

        args = fx.node.map_aggregate(n.args, to_slot)
        kwargs = fx.node.map_aggregate(dict(n.kwargs), to_slot)
        t = time.process_time()
        try:
            result = dtref.dtensor_op_strategies(n.target, list(args), kwargs, metas, choices, dmesh)
        except Exception as e:  # DTensor cannot handle this call: time it anyway, feed Replicate onwards
            result = None
            errors.setdefault(str(n.target), f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
        per_op.setdefault(str(n.target), []).append(time.process_time() - t)
        timed += 1
        if not result:
            outs[n] = [replicate] * n_out
        elif result[0][0] == "tuple":
            outs[n] = [[tuple(_split(o[0])) for _, o in child] or replicate for child in result[0][1]]
        else:
            outs[n] = [[tuple(_split(o[k])) for _, o in result if o[k] is not None] or replicate
                       for k in range(len(result[0][1]))]
    return per_op, timed, no_rule, errors


def _split(spec: str) -> list:
    import re

    return re.findall(r"R|S\(-?\d+\)|P\(\w+\)|_StridedShard\([^)]*\)|MaskPartial|\w+\([^)]*\)", spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--mesh", action="append", help="mesh shape such as 8x8 (repeatable); default 8x8 and 8x8x4")
    p.add_argument("--dtensor-layers", type=int, default=1, help="layers of the graph DTensor enumerates")
    p.add_argument("--dtensor-budget", type=float, default=120.0, help="seconds of DTensor enumeration per mesh")
    p.add_argument("--repeat", type=int, default=5, help="C++ timing repeats (median)")
    p.add_argument("--plan-mesh", action="append",
                   help="also time _C.plan (strategies + all costs + solver, 1 s solver limit, 1 thread) on this "
                        "mesh (repeatable; default 8x8; 'none' to skip). The full 3-D problem's edge matrices "
                        "need many GB, so 8x8x4 is opt-in")
    args = p.parse_args(argv)
    meshes = [tuple(int(s) for s in m.split("x")) for m in (args.mesh or ["8x8", "8x8x4"])]

    t = time.perf_counter()
    full = trace_llama(args.layers, args.seq)
    print(f"traced Llama-3-8B dims, {args.layers} layers, seq {args.seq}, batch 1: "
          f"{len(full.gm.graph.nodes)} FX nodes ({time.perf_counter() - t:.1f}s)")
    small = trace_llama(args.dtensor_layers, args.seq) if args.dtensor_layers != args.layers else full
    full_counts = {}
    for n in full.gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            full_counts[str(n.target)] = full_counts.get(str(n.target), 0) + 1

    print("CPU seconds (medians of --repeat runs for C++); parse = read_graph only; enumerate = "
          "_C.enumerate_strategies (parse + rules + JSON result); counts = _C.strategy_counts (no JSON result)")
    print(f"{'mesh':>8} {'IR nodes':>9} {'strategies':>11} {'parse':>7} {'counts':>7} {'enumerate':>9} "
          f"{'(wall)':>7} {'+costs':>7} {'DTensor':>9} {'ratio':>7}")
    notes = []
    for mesh in meshes:
        ex = export_graph(full.gm, list(mesh))
        ir_json = ex.to_json()
        _, parse_s, _ = _timed(lambda: _C.check_graph(ir_json), args.repeat)
        _, counts_s, counts = _timed(lambda: _C.strategy_counts(ir_json), args.repeat)
        enum_wall, enum_s, result = _timed(lambda: _C.enumerate_strategies(ir_json, True), args.repeat)
        # Strategies + compute costs + every distinct redistribution cost of every edge (the
        # planner's problem build, no solve; dense matrices not materialized).
        _, costs_s, build = _timed(lambda: _C.build_cost_tables_stats(ir_json), args.repeat)
        result = json.loads(result)
        n_strats = sum(len(e["strategies"]) for e in result if e is not None)
        fell = sorted({ex.nodes[i].op for i, e in enumerate(result) if e and e.get("fell_back")})

        per_op, timed, no_rule, errors = dtensor_enumerate(small.gm, mesh, args.dtensor_budget)
        all_times = [x for v in per_op.values() for x in v]
        mean_all = statistics.fmean(all_times) if all_times else float("nan")
        est, covered = 0.0, 0
        for op, count in full_counts.items():
            if op in no_rule:
                continue
            times = per_op.get(op)
            est += count * (statistics.fmean(times) if times else mean_all)
            covered += count
        m = "x".join(map(str, mesh))
        print(f"{m:>8} {len(ex.nodes):9d} {n_strats:11d} {parse_s:7.3f} {counts_s:7.3f} {enum_s:9.3f} "
              f"{enum_wall:7.3f} {costs_s:7.3f} {est:9.1f} {est / enum_s:6.0f}x")
        notes.append(f"{m}: problem build (+costs): {build['edges']} edges, {build['edge_matrix_entries']} edge-matrix "
                     f"entries, {build['distinct_redistribution_costs']} distinct redistribution costs computed")
        notes.append(f"{m}: DTensor timed {timed} nodes of a {args.dtensor_layers}-layer graph, extrapolated per op "
                     f"to the {covered} nodes of the full graph it has rules for")
        notes.append(f"{m}: strategies per family (nodes, strategies): {counts}")
        if fell:
            notes.append(f"{m}: C++ replicate-only fallback (no rule yet) for: {', '.join(fell)}")
        if no_rule:
            notes.append(f"{m}: no DTensor rule (excluded from the DTensor total): {', '.join(sorted(no_rule))}")
        if errors:
            notes.append(f"{m}: DTensor raised for some nodes of: {', '.join(sorted(errors))} "
                         f"(timed anyway; Replicate fed onwards)")
        slow = sorted(((statistics.fmean(v), op) for op, v in per_op.items()), reverse=True)[:4]
        notes.append(f"{m}: slowest DTensor ops (mean CPU s/node): " + ", ".join(f"{op} {t:.3f}" for t, op in slow))
    plan_meshes = [m for m in (args.plan_mesh or ["8x8"]) if m != "none"]
    for m in plan_meshes:
        mesh = tuple(int(x) for x in m.split("x"))
        ir_json = export_graph(full.gm, list(mesh)).to_json()
        w, c = time.perf_counter(), time.process_time()
        plan = json.loads(_C.plan(ir_json, json.dumps({"time_limit": 1.0, "threads": 1})))
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        solver = plan["summary"]["solver"]
        print(f"_C.plan on {m} (strategies + compute/redistribution costs + solver): {cpu:.1f} s CPU, {wall:.1f} s wall; "
              f"the solver reports {solver['seconds']:.1f} s wall of it (status {solver['status']}), so building "
              f"the problem (strategies + all costs) took about {max(0.0, wall - solver['seconds']):.1f} s wall")
    print("enumerate column: strategies only; +costs column: _C.plan with build_only (parse + strategies + compute "
          "costs + all redistribution costs, no solve); ratio: DTensor / enumerate")
    for n in notes:
        print("  " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
