"""Constructs the planner cannot represent get a clear exception naming the module, the op or
the Python line, and what to do instead (issue 14) -- and root hooks do run."""
import pytest
import torch
import torch.nn as nn

from torch_localmap import local_map, use_mesh
from torch_localmap._local_map import RegionClosureError
from torch_localmap._trace import UnsupportedModelError
from torch_localmap.plan import plan_module

from dist_utils import make_mesh, run_distributed


class Counting(nn.Module):
    """Writes a Python attribute in forward: a side effect the planned program would drop."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


class Positives(nn.Module):
    """Its output's shape depends on the input's values."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y[y > 0]


def test_python_side_effect_names_the_submodule_and_attribute():
    model = nn.Sequential(nn.Linear(4, 4), Counting())
    with pytest.raises(UnsupportedModelError, match=r"'1' changes its Python attribute 'calls'.*register_buffer"):
        plan_module(model, (2, 2), (torch.randn(8, 4),))


def test_data_dependent_output_shape_names_the_module_and_line():
    model = nn.Sequential(nn.Linear(4, 4), Positives())
    with pytest.raises(UnsupportedModelError) as info:
        plan_module(model, (2, 2), (torch.randn(8, 4),))
    text = str(info.value)
    assert "in '1'" in text  # the submodule's FQN
    assert "test_front_door_errors.py" in text and "y[y > 0]" in text  # the Python line
    assert "What to do:" in text and "argument" in text


def test_hooks_on_submodules_are_refused_by_name():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    model[1].register_forward_hook(lambda m, i, o: o * 2)
    with pytest.raises(UnsupportedModelError, match=r"'1' \(forward hook\).*root module"):
        plan_module(model, (2, 2), (torch.randn(8, 4),))


class ClosesOverItsWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))

        @local_map(out_placements="S(0)R", in_placements=("S(0)R",))
        def body(x):
            return x @ self.w  # self.w is not an argument: no placement, no gradient

        self.body = body

    def forward(self, x):
        return self.body(x)


def test_local_map_body_closing_over_a_parameter_is_an_error_when_planned():
    with pytest.raises(UnsupportedModelError, match=r"RegionClosureError.*Pass it as an argument"):
        plan_module(ClosesOverItsWeight(), (2, 2), (torch.randn(8, 4, requires_grad=True),))


def test_local_map_body_closing_over_a_parameter_is_an_error_on_a_simulated_mesh():
    model = ClosesOverItsWeight()
    with use_mesh((2, 2)), pytest.raises(RegionClosureError, match=r"shape \(4, 6\) that requires grad"):
        model(torch.randn(8, 4, requires_grad=True)).sum().backward()


# ---- root hooks run around every call of a parallel module ---------------------------------

def _hooked_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))  # rescales the input
    model.calls = []
    model.register_forward_hook(lambda m, args, out: m.calls.append(tuple(out.shape)))
    return model


def _rank_hooks(rank, world_size):
    import torch_localmap

    model = _hooked_model()
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    pmodel = torch_localmap.parallelize(model, make_mesh((2,)), (x,), time_limit=2)
    outs = [pmodel(x).full_tensor() for _ in range(2)]
    return outs, list(model.calls)


def test_root_forward_hooks_run_at_every_call():
    model = _hooked_model()
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    ref = model(x).detach()
    for outs, calls in run_distributed(_rank_hooks, 2, timeout=300):
        for out in outs:
            torch.testing.assert_close(out, ref)  # the pre-hook's rescaling took effect
        assert calls == [(6, 2), (6, 2)]  # the post-hook ran once per call


class _RankDependentForward(torch.nn.Module):
    """A forward that computes another graph on rank 1 (as a set of strings iterated in
    forward does under per-process hash seeds): the same ops, wired differently."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x):
        import torch.distributed as dist

        order = ("a", "b") if dist.get_rank() != 1 else ("b", "a")
        first, second = (getattr(self, n) for n in order)
        return second(torch.relu(first(x))).sum()


def _rank_traces_another_graph(rank, world_size):
    import torch_localmap
    from torch_localmap.plan import PlanMismatchError

    torch.manual_seed(0)
    model = _RankDependentForward()
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    try:
        torch_localmap.parallelize(model, make_mesh((2,)), (x,), time_limit=2)
    except PlanMismatchError as e:
        return str(e)
    return None


def test_ranks_that_trace_different_graphs_all_raise_instead_of_mismatched_collectives():
    # Rank 0's plan, applied node by node to rank 1's graph, would run other collectives
    # there: every rank must refuse, naming the rank that differs and the usual cause.
    for message in run_distributed(_rank_traces_another_graph, 2, timeout=300):
        assert message is not None
        assert "rank 1 traced another graph than rank 0" in message and "PYTHONHASHSEED" in message
