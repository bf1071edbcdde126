"""IOPDDL suite: our solver beside the contest's reference scores and plain HiGHS.

Every instance runs under its contest time limit (README table in the suite
directory) on this machine. "Plain HiGHS" is the straightforward MILP of the
whole problem (no reductions, no start solution) through the same HiGHS
library, stopped early once it reaches the contest's best score.

    python benchmarks/iopddl_bench.py [--dir ../shared/iopddl] [--instances A,G]
        [--time-scale 1.0] [--solvers ours,highs] [--results results.json]

Results are also kept in a JSON file so the two solvers can run at different
times (`--solvers highs` then `--solvers ours`) and be tabulated together.
"""
import argparse
import json
import os
import re
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch_localmap  # noqa: E402
from torch_localmap import _solver  # noqa: E402  (torch-free solver module)
from torch_localmap.solver import iopddl_suite_dir, load_problem  # noqa: E402


def reference_table(directory):
    """{instance: {limit, best, median, xla, nodes, model}} parsed from the suite README."""
    refs = {}

    def num(cell):
        """A score cell: blank (none published), or a number with thousands commas that a note
        may follow ("1,617,084 (optimal)")."""
        if not cell.strip():
            return None
        m = re.match(r"\s*(\d[\d,]*)(\s|$)", cell)
        if not m:
            raise ValueError(f"{directory}/README.md: a score cell reads {cell!r}; expected a number such as "
                             "1,617,084, optionally followed by a note")
        return int(m.group(1).replace(",", ""))

    with open(os.path.join(directory, "README.md")) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and re.fullmatch(r"[A-Z]", cells[0]):
                refs[cells[0]] = {
                    "model": cells[1], "nodes": num(cells[2]), "limit": float(cells[3].rstrip(" s")),
                    "best": num(cells[4]), "median": num(cells[5]), "xla": num(cells[6]),
                }
    return refs


def instance_file(directory, name):
    return os.path.join(directory, f"asplos-2025-iopddl-{name}.json.gz")


def run_ours(problem, limit, best, threads):
    reached = [None]
    t0 = time.monotonic()

    def progress(seconds, cost, bound):
        if reached[0] is None and best is not None and cost <= best:
            reached[0] = seconds

    r = torch_localmap.solve(problem, time_limit=limit, threads=threads, progress=progress,
                             gap_tolerance=0.0)  # the contest: the best cost within the limit
    if reached[0] is None and best is not None and r.cost <= best:
        reached[0] = r.seconds
    ev = problem.evaluate(r.solution)
    assert ev["feasible"] and int(ev["cost"]) == r.cost, "reported cost differs from the evaluator"
    return {"cost": r.cost, "bound": r.bound, "gap": r.gap, "seconds": time.monotonic() - t0,
            "status": r.status, "t_best": reached[0]}


def run_highs(problem, limit, best, threads):
    t0 = time.monotonic()
    try:
        d = _solver.solve_plain_milp(problem, limit, threads, float(best) if best is not None else None)
    except RuntimeError as e:
        return {"cost": None, "bound": None, "seconds": time.monotonic() - t0, "error": str(e)}
    t_best = None
    if best is not None:
        for t, obj in d["improvements"]:
            if obj <= best + 0.5:
                t_best = t
                break
    cost = None if d["cost"] is None else int(d["cost"])
    return {"cost": cost, "bound": d["dual_bound"], "seconds": time.monotonic() - t0, "t_best": t_best,
            "optimal": d["optimal"]}


def fmt_int(v):
    return "—" if v is None else f"{v:,}"


def fmt_bound(v):
    return "—" if v is None else f"{v:,.0f}"


def fmt_gap(v):
    return "—" if v is None else f"{100 * v:.2f}%"


def fmt_ratio(a, b):
    return "—" if a is None or b is None else f"{a / b:.3f}"


def table(refs, results, names):
    lines = [
        "| inst | limit | ours cost | ours bound | gap | time | ours/best | ours/XLA | HiGHS cost | HiGHS/best "
        "| t→best ours | t→best HiGHS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        ref = refs[n]
        o = results.get(n, {}).get("ours", {})
        h = results.get(n, {}).get("highs", {})
        t = lambda v: "—" if v is None else f"{v:.1f} s"  # noqa: E731
        lines.append(
            f"| {n} | {ref['limit']:.0f} s | {fmt_int(o.get('cost'))} | "
            f"{fmt_bound(o.get('bound'))} | {fmt_gap(o.get('gap'))} | {t(o.get('seconds'))} | "
            f"{fmt_ratio(o.get('cost'), ref['best'])} | {fmt_ratio(o.get('cost'), ref['xla'])} | "
            f"{fmt_int(h.get('cost'))} | {fmt_ratio(h.get('cost'), ref['best'])} | "
            f"{t(o.get('t_best'))} | {t(h.get('t_best'))} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=iopddl_suite_dir())
    ap.add_argument("--instances", help="comma-separated letters (default: all in the README table)")
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply every contest limit")
    ap.add_argument("--solvers", default="ours,highs", help="comma-separated: ours, highs; empty: only tabulate --results")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--results", default=os.path.join(REPO, "build", "iopddl_results.json"))
    args = ap.parse_args(argv)
    if not os.path.isdir(args.dir):
        print(f"suite directory not found: {args.dir} (use --dir or TLM_SHARED_DIR)", file=sys.stderr)
        return 2
    refs = reference_table(args.dir)
    names = args.instances.split(",") if args.instances else sorted(refs)
    solvers = [s for s in args.solvers.split(",") if s]
    unknown = [s for s in solvers if s not in ("ours", "highs")]
    if unknown:
        print(f"unknown solver(s) {unknown}: expected ours and/or highs", file=sys.stderr)
        return 2
    results = {}
    if os.path.exists(args.results):
        with open(args.results) as f:
            results = json.load(f)
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    for n in names if solvers else []:
        ref = refs[n]
        limit = ref["limit"] * args.time_scale
        t0 = time.monotonic()
        problem = load_problem(instance_file(args.dir, n))
        read_s = time.monotonic() - t0
        for solver in solvers:
            run = run_ours if solver == "ours" else run_highs
            r = run(problem, max(limit - read_s, 1.0), ref["best"], args.threads)
            r["read_seconds"] = read_s
            r["limit"] = limit
            results.setdefault(n, {})[solver] = r
            print(f"{n} {solver}: {json.dumps(r)}", file=sys.stderr, flush=True)
            with open(args.results, "w") as f:
                json.dump(results, f, indent=1)
    print(f"cores: {args.threads} threads on {os.cpu_count()} cores; time scale {args.time_scale}")
    print(table(refs, results, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
