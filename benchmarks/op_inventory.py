"""Per model: the aten ops of its joint graph (tiny config) and which ones fall back
to the replicate-only strategy in C++ enumeration.

    PYTHONPATH=$PWD python benchmarks/op_inventory.py [--mesh 2x2] [--model llama ...]
"""
import argparse
import sys

from torch_localmap.models import inventory


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mesh", default="2x2", help="mesh shape, e.g. 2x2 or 8x8x4")
    p.add_argument("--model", action="append", help="model name (repeatable); default all")
    args = p.parse_args(argv)
    mesh = [int(s) for s in args.mesh.split("x")]
    all_fell: set = set()
    known = True
    for name in args.model or inventory.model_names():
        traced = inventory.trace_tiny(name, mesh)
        counts = inventory.op_counts(traced.exported)
        fell = inventory.fallback_ops(traced.exported)
        known = fell is not None
        print(f"== {name}: {sum(counts.values())} op nodes, {len(counts)} distinct ops")
        for op, c in counts.items():
            mark = "" if fell is None else ("  FALLBACK (replicate)" if op in fell else "")
            print(f"  {c:4d}  {op}{mark}")
        if fell:
            all_fell.update(fell)
    if not known:
        print("enumerate_strategies is not in this build of torch_localmap._C: fallbacks unknown")
    else:
        print(f"ops falling back to replicate: {len(all_fell)}" + (f" ({', '.join(sorted(all_fell))})" if all_fell else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
