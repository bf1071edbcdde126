"""Held-out evaluation of the solver (issue 17): instances it was never tuned on.

Instances come from benchmarks/iopddl_generate.py on its *evaluation* seeds (the solver's
schedule is tuned only on tuning seeds). Each instance class is a structure the twelve
contest files under-represent (cyclic cores that do not fold, dense edge matrices, tight
memory, memory-bound knapsacks over time, ...). Per instance:

- ours: `torch_localmap.solve` with the time limit T (gap tolerance 0: it searches to T);
- the reference: the best of ours with 10x T and plain HiGHS (the whole MILP, no
  reductions, no start) with 10x T;
- optionally `--baseline-bin`: an older build's `tlm_solve` at T (to check that no class got
  worse than before a change).

    PYTHONPATH=$PWD python benchmarks/heldout_bench.py --limit 5 --seeds 2 [--classes a,b]
        [--baseline-bin /path/to/old/tlm_solve] [--json out.json]

Prints one row per instance and, per class, the worst ours/reference ratio.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from iopddl_generate import EVAL_SEEDS, generate  # noqa: E402
from torch_localmap import _solver  # noqa: E402  (torch-free solver module)
from torch_localmap.solver import load_problem, solve  # noqa: E402

# name -> generator arguments. Sizes keep one instance's three solves within a few minutes
# on two cores at the default limit.
CLASSES = {
    "tree-sparse-tight": dict(topology="tree", density="sparse", memory="tight", nodes=20000),
    "cyclic-sparse-none": dict(topology="cyclic", density="sparse", memory="none", nodes=4000),
    "cyclic-sparse-tight": dict(topology="cyclic", density="sparse", memory="tight", nodes=4000),
    "cyclic-dense-loose": dict(topology="cyclic", density="dense", memory="loose", nodes=3000),
    "mixed-sparse-tight": dict(topology="mixed", density="sparse", memory="tight", nodes=12000),
    "mixed-dense-tight": dict(topology="mixed", density="dense", memory="tight", nodes=8000),
    # Issue 33: keep-or-recompute choices under a limit 1.08x the least peak (iopddl_generate.py).
    "islands-sparse-bound": dict(topology="islands", density="sparse", memory="bound", nodes=3000, strategies=(2, 6)),
}


def run_ours(problem, limit):
    t0 = time.monotonic()
    r = solve(problem, time_limit=limit, gap_tolerance=0.0)
    ev = problem.evaluate(r.solution)
    assert ev["feasible"] and int(ev["cost"]) == r.cost, "reported cost differs from the evaluator"
    return {"cost": r.cost, "bound": r.bound, "wall": time.monotonic() - t0, "status": r.status,
            "phases": list(r.phases)}


def run_highs(problem, limit):
    t0 = time.monotonic()
    try:
        d = _solver.solve_plain_milp(problem, limit, 2, None)
    except RuntimeError as e:
        return {"cost": None, "wall": time.monotonic() - t0, "error": str(e).splitlines()[0]}
    return {"cost": None if d["cost"] is None else int(d["cost"]), "wall": time.monotonic() - t0}


def run_baseline(binary, path, limit):
    """An older tlm_solve on the uncompressed instance; its last line reads cost=... ."""
    t0 = time.monotonic()
    out = subprocess.run([binary, path, str(limit)], capture_output=True, text=True, timeout=limit * 4 + 60)
    m = re.search(r"cost=(\d+)", out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "")
    return {"cost": int(m.group(1)) if m else None, "wall": time.monotonic() - t0}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=float, default=5.0, help="ours' time limit T in seconds (reference: 10 T)")
    p.add_argument("--seeds", type=int, default=2, help="evaluation seeds per class")
    p.add_argument("--classes", default=",".join(CLASSES), help="comma-separated subset of " + ",".join(CLASSES))
    p.add_argument("--reference-scale", type=float, default=10.0)
    p.add_argument("--baseline-bin", default=None, help="an older build's tlm_solve, run at T")
    p.add_argument("--json", default=None, help="write every result here")
    a = p.parse_args(argv)
    classes = [c for c in a.classes.split(",") if c]
    unknown = [c for c in classes if c not in CLASSES]
    if unknown:
        raise SystemExit(f"unknown classes {unknown}; expected some of {sorted(CLASSES)}")
    results, tmp = [], tempfile.mkdtemp(prefix="heldout_")
    ref_limit = a.limit * a.reference_scale
    print(f"ours at T = {a.limit:g} s; reference = best of ours and plain HiGHS at {ref_limit:g} s; "
          f"evaluation seeds {EVAL_SEEDS.start}..{EVAL_SEEDS.start + a.seeds - 1}", flush=True)
    print("| class | seed | nodes | ours | wall | ours 10x | HiGHS 10x | ours/ref | baseline/ref |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for cls in classes:
        for seed in range(EVAL_SEEDS.start, EVAL_SEEDS.start + a.seeds):
            doc = generate(seed, "eval", **CLASSES[cls])
            path = os.path.join(tmp, f"{cls}-{seed}.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            problem = load_problem(path)
            row = {"class": cls, "seed": seed, "nodes": problem.num_nodes}
            row["ours"] = run_ours(problem, a.limit)
            row["ours_long"] = run_ours(problem, ref_limit)
            row["highs_long"] = run_highs(problem, ref_limit)
            if a.baseline_bin:
                row["baseline"] = run_baseline(a.baseline_bin, path, a.limit)
            costs = [c for c in (row["ours_long"]["cost"], row["highs_long"]["cost"]) if c is not None]
            ref = min(costs)
            row["ratio"] = row["ours"]["cost"] / ref if ref > 0 else 1.0
            base = row.get("baseline", {}).get("cost")
            row["baseline_ratio"] = None if base is None else (base / ref if ref > 0 else 1.0)
            results.append(row)
            os.remove(path)
            hc, br = row["highs_long"]["cost"], row["baseline_ratio"]
            highs_text = "-" if hc is None else f"{hc:.6g}"
            base_text = "-" if br is None else f"{br:.4f}"
            print(f"| {cls} | {seed} | {row['nodes']} | {row['ours']['cost']:.6g} | {row['ours']['wall']:.1f} s | "
                  f"{row['ours_long']['cost']:.6g} | {highs_text} | {row['ratio']:.4f} | {base_text} |", flush=True)
    print("\n| class | worst ours/ref | worst baseline/ref | worst wall / T |")
    print("|---|---|---|---|")
    for cls in classes:
        rows = [r for r in results if r["class"] == cls]
        worst = max(r["ratio"] for r in rows)
        base = [r["baseline_ratio"] for r in rows if r["baseline_ratio"] is not None]
        wall = max(r["ours"]["wall"] for r in rows) / a.limit
        print(f"| {cls} | {worst:.4f} | {max(base):.4f} | {wall:.2f} |" if base else
              f"| {cls} | {worst:.4f} | - | {wall:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"limit": a.limit, "reference_limit": ref_limit, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
