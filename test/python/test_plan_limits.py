"""Limits a plan is made under (issue 17): the device's memory by default, the gap tolerance,
the solver's options table, and the planner problem exported for the solver."""
import json
import os
import subprocess
import sys

import pytest

from torch_localmap import _C
from torch_localmap._report import format_plan
from torch_localmap.examples.mlp import make_example
from torch_localmap.plan import plan_module
from torch_localmap.solver import InfeasibleError, load_problem, solve, solver_options

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"problem": {"name": "tiny", "nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[1, 2], [3, 1]],
                                              "usages": [[1, 1], [1, 1]]},
                    "edges": {"nodes": [[0, 1]], "costs": [[0, 1, 1, 0]]}}}


def test_default_memory_limit_is_the_devices_memory_minus_headroom():
    model, example = make_example(batch=8)
    plan = plan_module(model, (2, 2), example, time_limit=2)
    s = plan.summary
    assert s.memory_limit == int(80e9 * 0.9)  # H100: 80 GB, 10% headroom
    assert "device H100" in s.memory_limit_source and "10% headroom" in s.memory_limit_source
    assert s.memory.peak <= s.memory_limit
    text = format_plan(plan)
    assert "Memory: fits: estimated peak " in text and "% of the limit of 67.06 GiB/rank (device H100" in text


def test_memory_limit_none_plans_without_one_and_bytes_are_kept():
    model, example = make_example(batch=8)
    assert plan_module(model, (2,), example, time_limit=2, memory_limit=None).summary.memory_limit == 0
    plan = plan_module(model, (2,), example, time_limit=2, memory_limit=123456789)
    assert plan.summary.memory_limit == 123456789 and plan.summary.memory_limit_source == "memory_limit option"


def test_a_model_that_fits_no_plan_says_so():
    model, example = make_example(batch=8)
    with pytest.raises(InfeasibleError, match=r"no plan fits the per-rank memory limit of 4096 bytes \(memory_limit "
                                              r"option\).*memory_limit=None plans without one") as kept_all:
        plan_module(model, (2,), example, time_limit=2, memory_limit=4096)
    # Recomputing activations is one way to fit: named only where the plan did not allow it.
    assert "recompute=True (the solver may then recompute activations" in str(kept_all.value)
    with pytest.raises(InfeasibleError, match="memory_limit=None plans without one") as recomputing:
        plan_module(model, (2,), example, time_limit=2, memory_limit=4096, recompute=True)
    assert "recompute=True" not in str(recomputing.value)


@pytest.mark.parametrize("bad", [0, -5, "host", True])
def test_bad_memory_limit_is_refused(bad):
    model, example = make_example(batch=8)
    with pytest.raises(ValueError, match="memory_limit: expected a positive number of bytes per rank, 'device' or None"):
        plan_module(model, (2,), example, time_limit=2, memory_limit=bad)


def test_parameters_and_optimizer_state_count_for_the_whole_step():
    """The solver's peak (what the limit bounds) includes every parameter shard and its two
    Adam states: with everything held for the step, it cannot be below their sum."""
    model, example = make_example(batch=8)
    plan = plan_module(model, (2,), example, time_limit=2, optimizer_states=2)
    m = plan.summary.memory
    assert plan.summary.peak_bytes >= m.parameters + m.optimizer_state


def test_planner_problem_is_what_plan_solves():
    from torch_localmap._ir_export import export_graph
    from torch_localmap._trace import trace_joint
    from torch_localmap.plan import plan_options

    model, example = make_example(batch=8)
    joint = trace_joint(model, example)
    ir = export_graph(joint.gm, (2,), ("dp",)).to_json()
    problem = load_problem(_C.plan_problem(ir, plan_options(time_limit=2)))
    assert problem.num_nodes >= len(joint.gm.graph.nodes) - 1  # every node but the output, plus sinks
    r = solve(problem, time_limit=5, gap_tolerance=0)
    doc = json.loads(_C.plan(ir, plan_options(time_limit=5, gap_tolerance=0)))
    assert r.cost == int(doc["summary"]["solver"]["cost"])  # both proven optimal on this small graph


def test_solver_options_table_and_bad_names():
    table = {o["name"]: o for o in solver_options()}
    assert {"reduce_share", "merge_interval_s", "region_columns"} <= set(table)
    for o in table.values():
        assert o["min"] <= o["default"] <= o["max"] and o["meaning"]
    with pytest.raises(ValueError, match="unknown solver option 'merge_intervall_s'; expected one of .*merge_interval_s"):
        solve(TINY, time_limit=2, options={"merge_intervall_s": 1})
    with pytest.raises(ValueError, match=r"solver option merge_pool: expected a whole number"):
        solve(TINY, time_limit=2, options={"merge_pool": 2.5})
    with pytest.raises(ValueError, match=r"gap_tolerance: expected a fraction in \[0, 1\)"):
        solve(TINY, time_limit=2, gap_tolerance=1.0)


def test_result_reports_phases_and_honours_options():
    r = solve(TINY, time_limit=5, gap_tolerance=0, options={"merge_pool": 8})
    assert r.cost == 3 and r.optimal
    names = [p["name"] for p in r.phases]
    assert names and set(names) <= {o for o in ("reduce", "greedy", "price", "bound", "coarse_milp", "regions",
                                                "forest", "lagrangian_kick", "kick", "merge", "final_milp")}


def test_cli_lists_and_takes_options(tmp_path):
    env = {**os.environ, "PYTHONPATH": REPO}
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", "--list-options"], capture_output=True,
                         text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 0 and "merge_interval_s" in out.stdout and "default 3" in out.stdout
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", str(path), "--time-limit", "30",
                          "--option", "merge_pool=8", "--gap-tolerance", "0"], capture_output=True, text=True,
                         cwd=REPO, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("cost=3 ")
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", str(path), "--option", "merge_pool"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 2 and "--option merge_pool: expected NAME=VALUE" in out.stderr


def test_cli_plan_recomputes_as_asked():
    """`plan --recompute` passes the recompute option: torchtitan's full checkpointing
    recomputes values backward reads (the report's "recomputed" counts); off keeps them all."""
    env = {**os.environ, "PYTHONPATH": REPO}
    lines = {}
    for mode in ("off", "full"):
        out = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--model", "llama", "--mesh", "2x2",
                              "--recompute", mode, "--time-limit", "5", "--no-progress"], capture_output=True,
                             text=True, cwd=REPO, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        lines[mode] = [line for line in out.stdout.splitlines() if "for backward: kept" in line]
    assert lines["off"] and not any("recomputed" in line for line in lines["off"]), lines["off"]
    assert "recomputed" in lines["full"][0] and "recomputed 0 " not in lines["full"][0], lines["full"]
    # A model that fits no plan: the error names this command's flags, not plan_module's options.
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--model", "mlp", "--mesh", "2",
                          "--memory-limit-gib", "0.000001", "--time-limit", "5", "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "--recompute auto (the solver may then recompute" in out.stderr, out.stderr
    assert "a larger --memory-limit-gib (--memory-limit-gib none plans without one)" in out.stderr, out.stderr
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--recompute", "some"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 2 and "--recompute: invalid choice: 'some'" in out.stderr


def test_problem_loads_from_the_planner_json(tmp_path):
    """The planner problem round-trips through the problem file format (solve FILE can read it)."""
    from torch_localmap._ir_export import export_graph
    from torch_localmap._trace import trace_joint
    from torch_localmap.plan import plan_options

    model, example = make_example(batch=8)
    ir = export_graph(trace_joint(model, example).gm, (2,), ("dp",)).to_json()
    text = _C.plan_problem(ir, plan_options())
    problem = load_problem(text)
    path = tmp_path / "plan_problem.json"
    path.write_text(text)
    again = load_problem(str(path))
    assert again.num_nodes == problem.num_nodes and again.num_edges == problem.num_edges


def test_mean_nll_loss_is_traced_as_a_batch_shardable_sum():
    """cross_entropy(mean) is planned as sum / total weight, so its log-probabilities need not
    be whole on every rank; the gradient keeps the mean's kernel."""
    import torch

    from torch_localmap import models
    from torch_localmap._trace import trace_joint

    model, example = models.build("llama", batch=2)
    gm = trace_joint(model, example).gm
    fwd = [n for n in gm.graph.nodes if n.target == torch.ops.aten.nll_loss_forward.default]
    assert len(fwd) == 1 and fwd[0].args[3] == 2  # reduction: sum
    users = {str(u.target) for g in fwd[0].users for u in g.users}
    assert "aten.div.Tensor" in users
    plan = plan_module(model, (2,), example, time_limit=2)
    nll = [n for n in plan.nodes if n.op == "aten.nll_loss_forward.default"]
    assert nll and nll[0].family == "loss" and nll[0].num_strategies > 1  # batch-sharded rows exist
