"""Hostile and malformed input (issue 13): nothing crashes, hangs or passes silently.

One test per class of input found by probing the public APIs: each expects a clear
exception naming what is wrong, or a correct result.
"""
import gzip
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import torch_localmap
from torch_localmap import _C
from torch_localmap.examples.mlp import make_example
from torch_localmap.plan import plan_module
from torch_localmap.solver import MilpUnavailableError, iopddl_suite_dir, load_problem, solve

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(iopddl_suite_dir(), "example.json")
needs_suite = pytest.mark.skipif(not os.path.isfile(EXAMPLE), reason="IOPDDL suite not found (set TLM_SHARED_DIR)")

TINY = {"problem": {"name": "tiny", "nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[1, 2], [3, 1]],
                                              "usages": [[1, 1], [1, 1]]},
                    "edges": {"nodes": [[0, 1]], "costs": [[0, 1, 1, 0]]}}}


def cli(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "torch_localmap", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=timeout)


# ---- crash: recursion depth ------------------------------------------------------------

def test_deeply_nested_unknown_member_is_an_error_not_a_stack_overflow(tmp_path):
    deep = "[" * 80000 + "]" * 80000
    text = '{"problem": {"unknown": ' + deep + ', "nodes": {}}}'
    with pytest.raises(ValueError, match="nesting deeper than 512 levels"):
        load_problem(text)
    path = tmp_path / "deep.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    r = cli("solve", str(path), "--time-limit", "5")
    assert r.returncode == 2, r.stderr
    assert "nesting deeper than 512 levels" in r.stderr and "Traceback" not in r.stderr


def test_ir_reader_has_the_same_depth_limit():
    with pytest.raises(ValueError, match="nesting deeper than 512"):
        _C.check_graph('{"mesh": {"shape": [2]}, "nodes": ' + "[" * 5000 + "]" * 5000 + "}")


# ---- wrong decoding: surrogate pairs -----------------------------------------------------

def test_surrogate_pair_in_a_problem_name_decodes_to_one_character():
    doc = json.loads(json.dumps(TINY))
    doc["problem"]["name"] = "model \U0001F600 v2"
    text = json.dumps(doc)  # json.dumps writes the emoji as \ud83d\ude00
    assert "\\ud83d\\ude00" in text
    assert load_problem(text).name == "model \U0001F600 v2"


def test_lone_surrogate_is_an_error():
    text = json.dumps(TINY).replace('"tiny"', '"bad \\ud83d name"')
    with pytest.raises(ValueError, match="surrogate"):
        load_problem(text)
    with pytest.raises(ValueError, match="surrogate"):
        _C.check_graph('{"mesh": {"shape": [2]}, "nodes": [{"name": "\\ude00", "op": "output", "args": [[]]}]}')


# ---- silently accepted -------------------------------------------------------------------

def test_fractional_mesh_sizes_are_refused():
    model, ex = make_example(batch=8)
    with pytest.raises(TypeError, match=r"size 0 is 2.5 \(float\); expected an integer"):
        plan_module(model, (2.5, 2), ex)
    with pytest.raises(TypeError, match="expected an integer"):
        torch_localmap.MeshSpec((2, True))


def test_mesh_product_overflowing_int64_is_refused():
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match=r"more than 2\^31 - 1 devices"):
        plan_module(model, (2**40, 2**40), ex)
    with pytest.raises(ValueError, match=r"more than 2\^31 - 1 devices"):
        _C.local_layout([8], [2**62, 4], "RR", [0, 0])


def test_tensor_shapes_past_2_to_the_53_are_refused():
    with pytest.raises(ValueError, match=r"more than 2\^53 elements"):
        _C.local_layout([2**40, 2**40], [2], "S(0)", [0])


@pytest.mark.parametrize("kwargs, match", [
    ({"threads": 0}, "threads: expected at least 1, got 0"),
    ({"threads": -3}, "threads: expected at least 1"),
    ({"time_limit": float("nan")}, "time_limit: expected a finite number of seconds > 0, got nan"),
    ({"time_limit": -1.0}, "time_limit: expected a finite number of seconds > 0"),
    ({"time_limit": float("inf")}, "time_limit: expected a finite number"),
    ({"seed": -1}, "seed: expected a non-negative integer"),
])
def test_solver_options_out_of_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve(TINY, **kwargs)


def test_solver_options_of_the_wrong_type():
    with pytest.raises(TypeError, match="threads: expected an integer, got 2.5"):
        solve(TINY, threads=2.5)
    with pytest.raises(TypeError, match="time_limit: expected a number"):
        solve(TINY, time_limit="10")


def test_negative_usage_limit_is_refused_by_solver_and_evaluator_alike():
    doc = json.loads(json.dumps(TINY))
    doc["problem"]["usage_limit"] = -1
    with pytest.raises(ValueError, match="usage_limit is -1; expected a non-negative number"):
        load_problem(doc)


def test_plan_file_without_format_version_is_refused(tmp_path):
    from torch_localmap.plan import Plan

    model, ex = make_example(batch=8)
    plan = plan_module(model, (2,), ex, time_limit=2)
    doc = json.loads(plan.to_json())
    assert doc["format_version"] == Plan.FORMAT_VERSION
    del doc["format_version"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="format_version"):
        Plan.load(str(path))


# ---- unclear errors ---------------------------------------------------------------------

def test_plan_module_given_a_function():
    _, ex = make_example(batch=8)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got function"):
        plan_module(lambda x, y: (x - y).sum(), (2,), ex)


class _MutatesItsInput(torch.nn.Module):
    def __init__(self, grad_path):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.grad_path = grad_path

    def forward(self, x):
        @torch_localmap.local_map(out_placements="S(0)R", in_placements=("S(0)R",))
        def scale(a):
            a.mul_(2)
            return a * 1

        if self.grad_path:  # the region's input requires grad
            return scale(self.lin(x)).sum()
        return scale(x).sum() + self.lin(x).sum()


@pytest.mark.parametrize("grad_path", [False, True])
def test_in_place_mutation_in_a_region_raises_region_mutation_error(grad_path):
    with pytest.raises(torch_localmap.RegionMutationError, match="mutates its tensor input 0 in place"):
        plan_module(_MutatesItsInput(grad_path), (2, 2), (torch.randn(8, 4),), time_limit=2)


def test_cli_gzip_errors_are_one_line(tmp_path):
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(TINY).encode())[:-12])  # truncated stream
    r = cli("solve", str(bad), "--time-limit", "5")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error:") and "corrupt or truncated gzip data" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_out_into_a_missing_directory_fails_before_solving(tmp_path):
    problem = tmp_path / "tiny.json"
    problem.write_text(json.dumps(TINY))
    r = cli("solve", str(problem), "--time-limit", "30", "--out", str(tmp_path / "nope" / "sol.json"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert "cost=" not in r.stdout  # nothing was solved


def test_cli_escapes_control_characters_in_problem_names(tmp_path):
    doc = json.loads(json.dumps(TINY))
    doc["problem"]["name"] = "evil\x1b[2J\x07name"
    problem = tmp_path / "evil.json"
    problem.write_text(json.dumps(doc))
    r = cli("solve", str(problem), "--time-limit", "5")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr + r.stdout
    assert "evil\\x1b[2J\\x07name" in r.stderr


# ---- HiGHS missing: loud, never a silent downgrade ----------------------------------------

NO_HIGHS = {"TLM_HIGHS_LIBRARY": "/nonexistent/libhighs.so"}


def test_without_highs_solve_output_and_plan_summary_say_so(tmp_path):
    problem = tmp_path / "tiny.json"
    problem.write_text(json.dumps(TINY))
    r = cli("solve", str(problem), "--time-limit", "5", env=NO_HIGHS)
    assert r.returncode == 0, r.stderr
    assert "HiGHS unavailable: MILP phases off" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("cost=")
    code = ("import warnings, torch_localmap as t; from torch_localmap.examples.mlp import make_example\n"
            "m, ex = make_example(batch=8)\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always'); p = t.plan_module(m, (2,), ex, time_limit=2)\n"
            "print(p.summary.solver.note); print(any('MILP phases off' in str(x.message) for x in w))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **NO_HIGHS}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("HiGHS unavailable: MILP phases off")
    assert out.stdout.splitlines()[1] == "True"


def test_without_highs_exact_mode_raises(tmp_path):
    code = ("import json, torch_localmap.solver as s\n"
            f"try:\n    s.solve({json.dumps(TINY)!r}, exact=True, time_limit=5)\n"
            "except s.MilpUnavailableError as e:\n    print('raised:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **NO_HIGHS}, timeout=120)
    assert "raised: exact mode needs HiGHS" in out.stdout and "HiGHS unavailable" in out.stdout, out.stderr
    tiny = tmp_path / "tiny.json"  # a real file: the error must be about HiGHS, not the path
    tiny.write_text(json.dumps(TINY))
    r = cli("solve", str(tiny), "--exact", "--time-limit", "5", env=NO_HIGHS)
    assert r.returncode == 2 and "HiGHS unavailable" in r.stderr


def test_highs_is_loaded_here_and_reports_its_version():
    st = torch_localmap.solver.highs_status()
    assert st["loaded"], st["why"]
    assert st["version"] and st["path"]
    assert issubclass(MilpUnavailableError, RuntimeError)


def test_versions_command_names_the_loaded_highs():
    r = cli("versions")
    assert r.returncode == 0, r.stderr
    assert "torch 2.13" in r.stdout and "HiGHS library" in r.stdout and "loaded from" in r.stdout


# ---- limits: the time limit is the wall time of the whole call ------------------------------

@needs_suite
def test_solve_time_limit_is_the_wall_time_of_the_whole_command():
    """The largest shared instance, 10 s: start-up, reading and exit count (within 10%), by the
    command's own clock (its `time=`, counted from the process's start). The wall time seen from
    outside is a benchmark's figure: a loaded machine stretches it."""
    largest = max((os.path.join(iopddl_suite_dir(), f) for f in os.listdir(iopddl_suite_dir())
                   if f.endswith(".json.gz")), key=os.path.getsize)
    r = cli("solve", largest, "--time-limit", "10", "--quiet")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"cost=(\d+) bound=\S+ gap=([\d.]+)% time=([\d.]+)s?", last)
    assert m, last
    assert float(m.group(3)) <= 11.0, f"{last} for --time-limit 10"
