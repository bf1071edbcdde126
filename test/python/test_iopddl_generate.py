"""benchmarks/iopddl_generate.py: held-out instances for the solver (issue 17)."""
import os
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import iopddl_generate as gen  # noqa: E402


def test_same_arguments_same_instance_and_seed_splits_are_enforced():
    assert gen.generate(3, "tune", nodes=200) == gen.generate(3, "tune", nodes=200)
    assert gen.generate(3, "tune", nodes=200) != gen.generate(4, "tune", nodes=200)
    with pytest.raises(ValueError, match="not a tune seed"):
        gen.generate(gen.EVAL_SEEDS.start, "tune")
    with pytest.raises(ValueError, match="not a eval seed"):
        gen.generate(0, "eval")
    with pytest.raises(ValueError, match="topology"):
        gen.generate(0, "tune", topology="ring")


def _degrees(doc):
    deg = Counter()
    for u, v in doc["problem"]["edges"]["nodes"]:
        deg[u] += 1
        deg[v] += 1
    return deg


def test_cyclic_cores_have_no_node_to_fold_and_trees_fold_completely():
    n = 400
    cyclic = _degrees(gen.generate(1, "tune", nodes=n, topology="cyclic"))
    assert min(cyclic[i] for i in range(4, n)) >= 3  # every node past the first few joins 3 earlier ones
    tree = gen.generate(1, "tune", nodes=n, topology="tree")
    assert len(tree["problem"]["edges"]["nodes"]) == n - 1
    mixed = _degrees(gen.generate(1, "tune", nodes=n, topology="mixed"))
    assert sum(1 for i in range(n) if mixed[i] == 2) > n // 2  # chains between core nodes


@pytest.mark.parametrize("memory", ["none", "loose", "tight"])
@pytest.mark.parametrize("density", ["sparse", "dense"])
def test_instances_load_and_solve_feasibly_under_their_limit(memory, density):
    from torch_localmap.solver import load_problem, solve

    doc = gen.generate(gen.EVAL_SEEDS.start + 7, "eval", nodes=300, topology="mixed", density=density, memory=memory)
    p = doc["problem"]
    assert ("usage_limit" in p) == (memory != "none")
    for i, costs in enumerate(p["nodes"]["costs"]):
        assert len(costs) == len(p["nodes"]["usages"][i]) >= 2
    for (u, v), mat in zip(p["edges"]["nodes"], p["edges"]["costs"]):
        assert len(mat) == len(p["nodes"]["costs"][u]) * len(p["nodes"]["costs"][v])
    load_problem(doc)
    result = solve(doc, time_limit=2.0, threads=1)
    if memory != "none":
        assert gen.peak_usage(p, result.solution) <= p["usage_limit"]
    assert result.bound <= result.cost


def test_memory_bound_instances_are_knapsacks_over_time_with_a_feasible_labelling():
    """Issue 33: keep-or-recompute choices, coupled almost only through memory."""
    from torch_localmap.solver import load_problem

    n = 600
    doc = gen.generate(gen.EVAL_SEEDS.start + 3, "eval", nodes=n, topology="islands", memory="bound", strategies=(2, 6))
    p = doc["problem"]
    usages, costs = p["nodes"]["usages"], p["nodes"]["costs"]
    leanest = [min(range(len(u)), key=u.__getitem__) for u in usages]
    least_peak = gen.peak_usage(p, leanest)
    assert least_peak <= p["usage_limit"] <= 1.10 * least_peak
    # The cheapest strategy (keep: cost 0) uses the most memory, and all of them need twice the limit.
    assert all(c[0] == 0 and u[0] == max(u) for c, u in zip(costs, usages))
    assert 1.9 <= gen.peak_usage(p, [0] * n) / p["usage_limit"] <= 2.1
    # Along each node's strategies memory falls and cost rises: no strategy is dominated for free.
    assert all(u[s] >= u[s + 1] and c[s] <= c[s + 1] for c, u in zip(costs, usages) for s in range(len(u) - 1))
    assert len(_degrees(doc)) < n // 4  # most nodes share no edge
    lives = [b - a for a, b in p["nodes"]["intervals"]]
    assert sum(lives) / n > 100  # long lives: each point is shared by many nodes
    assert load_problem(doc).evaluate(leanest)["feasible"]
