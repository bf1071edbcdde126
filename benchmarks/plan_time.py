"""Planning time of the Llama-3-8B-shaped model (issue 17): trace, export, cost tables,
solve, certified gap and memory against the device's limit, per mesh and time limit.

    PYTHONPATH=$PWD python benchmarks/plan_time.py --mesh 8x8 --mesh 8x8x4 --limits 5,10,30
    PYTHONPATH=$PWD python benchmarks/plan_time.py --limits 10 --save-ir /tmp/ir   # then, without Python:
    build/cmake/tlm_plan /tmp/ir/ir_8x8x4.json 10

The model (dim 4096, 32 layers, 32/8 heads, ffn 14336, vocab 128256) is traced with fake
tensors at batch 16, seq 8192 (no memory is allocated), whole and with its repeated layers
stamped (the two graphs are the same; the stamped one is planned); every plan then runs on
the exported graph (`_C.plan`, one call: cost tables + solve; its time limit covers both).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from torch_localmap import _C, models  # noqa: E402
from torch_localmap._ir_export import export_graph  # noqa: E402
from torch_localmap._trace import trace_joint  # noqa: E402
from torch_localmap.plan import plan_options  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mesh", action="append", default=None, help="e.g. 8x8 (repeatable; default 8x8 and 8x8x4)")
    p.add_argument("--limits", default="5,10,30")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--save-ir", default=None, metavar="DIR",
                   help="also write each mesh's exported graph as DIR/ir_<mesh>.json (for build/cmake/tlm_plan)")
    a = p.parse_args(argv)
    meshes = [tuple(int(x) for x in m.split("x")) for m in (a.mesh or ["8x8", "8x8x4"])]
    limits = [float(x) for x in a.limits.split(",")]
    cfg = dataclasses.replace(models.llama.LlamaConfig.llama3_8b(), seq_len=a.seq, n_layers=a.layers)
    with FakeTensorMode():
        module, inputs = models.build("llama", config=cfg, batch=a.batch)
    trace_joint(module, inputs)  # warm-up: the first trace of a process also loads tracing machinery
    times = {}
    for stamp in ("0", "1"):  # whole, then the repeated layers traced once and stamped
        os.environ["TLM_TRACE_STAMP"] = stamp
        t0 = time.perf_counter()
        joint = trace_joint(module, inputs)
        times[stamp] = (time.perf_counter() - t0, len(joint.gm.graph.nodes), joint.stamped)
    (t_whole, n_whole, _), (t_trace, n_stamped, stamped) = times["0"], times["1"]
    print(f"Llama-3-8B shape, {a.layers} layers, batch {a.batch}, seq {a.seq}: traced whole in {t_whole:.1f} s "
          f"({n_whole} nodes); stamped from 4 layers of '{stamped}' in {t_trace:.1f} s ({n_stamped} nodes): "
          f"{t_whole / t_trace:.1f}x faster\n")
    print("| mesh | limit | trace + export + plan | export | plan call (wall) | of which tables | solve | status | gap "
          "| est. peak / limit |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for mesh in meshes:
        t0 = time.perf_counter()
        ir = export_graph(joint.gm, mesh, tuple(f"d{i}" for i in range(len(mesh)))).to_json()
        t_export = time.perf_counter() - t0
        if a.save_ir:
            os.makedirs(a.save_ir, exist_ok=True)
            with open(os.path.join(a.save_ir, f"ir_{'x'.join(map(str, mesh))}.json"), "w") as f:
                f.write(ir)
        for limit in limits:
            t0 = time.perf_counter()
            doc = json.loads(_C.plan(ir, plan_options(time_limit=limit)))
            wall = time.perf_counter() - t0
            s = doc["summary"]
            sol, mem = s["solver"], s["memory"]
            use = f"{mem['peak'] / 2**30:.1f} / {s['memory_limit'] / 2**30:.1f} GiB" if s["memory_limit"] else "-"
            print(f"| {'x'.join(map(str, mesh))} | {limit:g} s | {t_trace + t_export + wall:.1f} s | {t_export:.1f} s | "
                  f"{wall:.1f} s | "
                  f"{s['build_seconds']:.1f} s | {sol['seconds']:.1f} s | {sol['status']} | {100 * sol['gap']:.3f}% | "
                  f"{use} |", flush=True)


if __name__ == "__main__":
    main()
