"""The planner's glue pauses Python's cyclic collector around its bulk phases and must hand
it back as it found it (a user who disabled it keeps it disabled)."""
import gc

import pytest
import torch

from torch_localmap import plan_module
from torch_localmap._gc_pause import gc_paused


@pytest.fixture
def collector_state():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_paused_restores_the_state_it_found(collector_state, enabled_before):
    (gc.enable if enabled_before else gc.disable)()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one set it
    assert gc.isenabled() == enabled_before


def test_gc_paused_restores_it_when_the_block_raises(collector_state):
    gc.enable()
    with pytest.raises(RuntimeError, match="inside"):
        with gc_paused():
            raise RuntimeError("inside")
    assert gc.isenabled()


@pytest.mark.parametrize("enabled_before", [True, False])
def test_planning_leaves_the_collector_as_it_was(collector_state, enabled_before):
    (gc.enable if enabled_before else gc.disable)()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    plan = plan_module(model, (2,), (torch.randn(4, 8),), time_limit=1.0)
    assert plan.nodes  # it planned
    assert gc.isenabled() == enabled_before
