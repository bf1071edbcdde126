"""Python API and CLI of the strategy solver on the IOPDDL example and one contest instance."""
import itertools
import json
import os
import re
import subprocess
import sys

import pytest

import torch_localmap
from torch_localmap.solver import InfeasibleError, iopddl_suite_dir, load_problem

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SUITE = iopddl_suite_dir()
EXAMPLE = os.path.join(SUITE, "example.json")
CONTEST = os.path.join(SUITE, "asplos-2025-iopddl-G.json.gz")
needs_suite = pytest.mark.skipif(not os.path.isfile(EXAMPLE),
                                 reason=f"IOPDDL suite not found at {SUITE} (set TLM_SHARED_DIR)")


def brute_force(doc):
    """Optimum of an IOPDDL document by enumeration, written independently of the C++ code."""
    p = doc["problem"]
    costs, usages, intervals = p["nodes"]["costs"], p["nodes"]["usages"], p["nodes"]["intervals"]
    edges = list(zip(p["edges"]["nodes"], p["edges"]["costs"]))
    limit = p.get("usage_limit")
    best = None
    for x in itertools.product(*[range(len(c)) for c in costs]):
        if limit is not None:
            times = {a for a, b in intervals if a < b}
            if any(sum(usages[i][x[i]] for i, (a, b) in enumerate(intervals) if a <= t < b) > limit for t in times):
                continue
        total = sum(costs[i][x[i]] for i in range(len(x)))
        total += sum(m[x[u] * len(costs[v]) + x[v]] for (u, v), m in edges)
        best = total if best is None or total < best else best
    return best


@needs_suite
def test_example_optimum_through_every_input_form():
    with open(EXAMPLE) as f:
        text = f.read()
    doc = json.loads(text)
    optimum = brute_force(doc)
    for form in (EXAMPLE, text, doc, text.encode()):
        r = torch_localmap.solve(form, time_limit=10)
        assert r.cost == optimum
        assert r.bound <= optimum
        assert r.optimal and r.status == "optimal" and r.gap == 0.0
        ev = load_problem(EXAMPLE).evaluate(r.solution)
        assert ev["feasible"] and int(ev["cost"]) == r.cost


@needs_suite
def test_cli_on_example(tmp_path):
    with open(EXAMPLE) as f:
        optimum = brute_force(json.load(f))
    out = tmp_path / "solution.json"
    proc = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", EXAMPLE, "--time-limit", "5",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"cost=(\d+) bound=(\S+) gap=(\S+)% time=(\S+)", last)
    assert m, last
    assert int(m.group(1)) == optimum and float(m.group(2)) == optimum and float(m.group(3)) == 0.0
    sol = json.loads(out.read_text())
    assert sol["cost"] == optimum and sol["feasible"] is True
    assert int(load_problem(EXAMPLE).evaluate(sol["solution"])["cost"]) == optimum


@needs_suite
def test_contest_instance_short_limit_api_and_gzip_cli(tmp_path):
    problem = load_problem(CONTEST)
    r = torch_localmap.solve(problem, time_limit=4)
    ev = problem.evaluate(r.solution)
    assert ev["feasible"], ev["violations"][:3]
    assert int(ev["cost"]) == r.cost
    assert r.bound <= r.cost
    # The limit covers start-up (importing torch: ~2 s alone, more while other tests load the
    # machine), so it leaves the solve a few seconds even on a busy CI machine.
    proc = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", CONTEST, "--time-limit", "6"],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr
    m = re.fullmatch(r"cost=(\d+) bound=(\S+) gap=(\S+)% time=(\S+)", proc.stdout.strip().splitlines()[-1])
    assert m and float(m.group(2)) <= int(m.group(1))


def test_malformed_problem_names_the_field():
    bad = '{"problem": {"nodes": {"intervals": [[0, 1]], "costs": [[1, 2]], "usages": [[1]]}}}'
    with pytest.raises(ValueError, match=r"problem\.nodes\.usages\[0\]: has 1 entries; expected 2"):
        torch_localmap.solve(bad)
    with pytest.raises(FileNotFoundError):
        torch_localmap.solve("/nonexistent/problem.json")


def test_infeasible_memory_raises_named_error():
    doc = {"problem": {"nodes": {"intervals": [[0, 4], [2, 6]], "costs": [[0, 1], [0]], "usages": [[9, 4], [3]]},
                       "usage_limit": 6}}
    with pytest.raises(InfeasibleError, match=r"usage_limit 6 at time 2 .* smallest possible usage there, 7"):
        torch_localmap.solve(doc)
    assert issubclass(InfeasibleError, ValueError)


def test_cli_reports_bad_file_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"problem": {"nodes": 3}}')
    proc = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", str(bad)], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 2
    assert "problem.nodes: expected object, got number" in proc.stderr


def test_solving_never_loads_torch():
    """`solve` runs in the torch-free module _solver: a time limit is not spent loading torch."""
    code = ("import sys, torch_localmap; from torch_localmap import solve, load_problem, InfeasibleError; "
            "import torch_localmap.__main__; print(sorted(m for m in ('torch', 'torch_localmap._C') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_planner_and_solver_raise_one_infeasible_error_class():
    """_C (the planner) has its own copy of the solver; both raise the same Python classes."""
    from torch_localmap import _C, _solver

    assert _C.InfeasibleError is _solver.InfeasibleError is torch_localmap.InfeasibleError
    assert _C.MilpUnavailableError is _solver.MilpUnavailableError
