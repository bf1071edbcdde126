"""Strategy counts per op family and C++ enumeration time for the Llama-3-8B-shaped joint graph.

Traces the model with fake tensors (no real memory; needs torch_localmap.models),
exports the planner IR per mesh, and reports for each mesh: the node count, the
time of one `_C.strategy_counts` call (parse + graph-wide enumeration in C++) and
the strategies per family. Wall times on a shared machine are noisy; the C++
process CPU time is printed beside them.

    PYTHONPATH=$PWD python benchmarks/strategy_counts.py [--layers 32] [--seq 8192] [--mesh 8x8 --mesh 8x8x4]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

from torch._subclasses.fake_tensor import FakeTensorMode

from torch_localmap import _C
from torch_localmap._ir_export import export_graph
from torch_localmap._trace import trace_joint


def trace_llama(layers: int, seq: int):
    from torch_localmap import models

    cfg = dataclasses.replace(models.llama.LlamaConfig.llama3_8b(), n_layers=layers, seq_len=seq)
    with FakeTensorMode():
        module, inputs = models.build("llama", config=cfg, batch=1)
    return trace_joint(module, inputs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--mesh", action="append", default=None, help="e.g. 8x8 (repeatable)")
    args = ap.parse_args()
    meshes = [[int(x) for x in m.split("x")] for m in (args.mesh or ["8x8", "8x8x4"])]
    joint = trace_llama(args.layers, args.seq)
    for mesh in meshes:
        ir = export_graph(joint.gm, mesh).to_json()
        nodes = ir.count('"name":')
        _C.check_graph(ir)  # warm up
        w0, c0 = time.perf_counter(), time.process_time()
        counts = json.loads(_C.strategy_counts(ir))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        w0 = time.perf_counter()
        _C.check_graph(ir)
        parse = time.perf_counter() - w0
        total = sum(v["strategies"] for v in counts.values())
        print(f"mesh {'x'.join(map(str, mesh))}: {nodes} nodes, {total} strategies; "
              f"strategy_counts {wall:.3f} s wall / {cpu:.3f} s CPU (of which IR parse {parse:.3f} s wall)")
        for fam, v in sorted(counts.items()):
            print(f"    {fam:12s} {v['nodes']:6d} nodes {v['strategies']:8d} strategies "
                  f"({v['strategies'] / v['nodes']:.1f}/node)")


if __name__ == "__main__":
    main()
