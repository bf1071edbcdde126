"""Repeated blocks placed alike (core/symmetry.h): the plan says how many blocks repeat and
whether they are placed alike, and when it says so, every layer's nodes carry the same
placements and recompute choices."""
from collections import defaultdict

import torch

from torch_localmap import models
from torch_localmap._report import format_plan
from torch_localmap.plan import plan_module


def _layer_patterns(plan) -> dict:
    patterns = defaultdict(list)
    for n in plan.nodes:
        parts = n.module.split(".")
        if len(parts) >= 2 and parts[0] == "layers":
            patterns[parts[1]].append((n.phase, n.op, n.inputs, n.outputs, n.recompute))
    return patterns


def test_repeated_layers_are_placed_alike_or_the_plan_says_why():
    torch.manual_seed(0)
    model, inputs = models.build("llama", models.llama.LlamaConfig.tiny(n_layers=4), batch=8)
    for mesh, kwargs in (((2, 2), {}), ((4,), {"recompute": True, "memory_limit": None})):
        plan = plan_module(model, mesh, inputs, time_limit=3, **kwargs)
        blocks = plan.summary.blocks
        assert blocks["repeated"] >= 3  # layers 1..3 at least (the first may trace differently)
        patterns = _layer_patterns(plan)
        assert len(patterns) == 4
        if blocks["alike"]:
            distinct = {tuple(p) for p in patterns.values()}
            assert len(distinct) <= 1 + (4 - blocks["repeated"]), f"{len(distinct)} patterns among 4 layers"
        else:
            assert blocks["asymmetry_gain_s"] > 0 or blocks["asymmetry_gain_s"] == -1
        assert "Repeated blocks:" in format_plan(plan)


def test_many_repeated_layers_are_solved_tied_first_and_the_full_solve_starts_from_that_plan():
    torch.manual_seed(0)
    model, inputs = models.build("llama", models.llama.LlamaConfig.tiny(n_layers=6), batch=8)
    plan = plan_module(model, (2, 2), inputs, time_limit=4, recompute=True)
    blocks = plan.summary.blocks
    assert blocks["repeated"] >= 4
    assert "blocks folded" in blocks["folded"], blocks
    # The full solve started from the tied plan, and keeps it unless it finds a cheaper one.
    assert int(plan.summary.solver.cost) <= int(blocks["folded_cost"])
    assert "Folded first solve:" in format_plan(plan)
    unfolded = plan_module(model, (2, 2), inputs, time_limit=4, recompute=True, fold_repeated=False)
    assert "folded" not in unfolded.summary.blocks
