"""Planning time of the Llama-3-8B-shaped model (issue 17): trace, export, cost tables,
solve, certified gap and memory against the device's limit, per mesh and time limit.

    PYTHONPATH=$PWD python benchmarks/plan_time.py --mesh 8x8 --mesh 8x8x4 --limits 5,10,30

The model (dim 4096, 32 layers, 32/8 heads, ffn 14336, vocab 128256) is traced once with
fake tensors at batch 16, seq 8192 (no memory is allocated); every plan then runs on the
exported graph (`_C.plan`, one call: cost tables + solve; its time limit covers both).
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
    a = p.parse_args(argv)
    meshes = [tuple(int(x) for x in m.split("x")) for m in (a.mesh or ["8x8", "8x8x4"])]
    limits = [float(x) for x in a.limits.split(",")]
    cfg = dataclasses.replace(models.llama.LlamaConfig.llama3_8b(), seq_len=a.seq, n_layers=a.layers)
    t0 = time.perf_counter()
    with FakeTensorMode():
        module, inputs = models.build("llama", config=cfg, batch=a.batch)
    joint = trace_joint(module, inputs)
    t_trace = time.perf_counter() - t0
    print(f"Llama-3-8B shape, {a.layers} layers, batch {a.batch}, seq {a.seq}: traced in {t_trace:.1f} s "
          f"({len(joint.gm.graph.nodes)} nodes)\n")
    print("| mesh | limit | export | plan call (wall) | of which tables | solve | status | gap | est. peak / limit |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for mesh in meshes:
        t0 = time.perf_counter()
        ir = export_graph(joint.gm, mesh, tuple(f"d{i}" for i in range(len(mesh)))).to_json()
        t_export = time.perf_counter() - t0
        for limit in limits:
            t0 = time.perf_counter()
            doc = json.loads(_C.plan(ir, plan_options(time_limit=limit)))
            wall = time.perf_counter() - t0
            s = doc["summary"]
            sol, mem = s["solver"], s["memory"]
            use = f"{mem['peak'] / 2**30:.1f} / {s['memory_limit'] / 2**30:.1f} GiB" if s["memory_limit"] else "-"
            print(f"| {'x'.join(map(str, mesh))} | {limit:g} s | {t_export:.1f} s | {wall:.1f} s | "
                  f"{s['build_seconds']:.1f} s | {sol['seconds']:.1f} s | {sol['status']} | {100 * sol['gap']:.3f}% | "
                  f"{use} |", flush=True)


if __name__ == "__main__":
    main()
