"""Calls whose sizes change from step to step (issue 31): a module from `parallelize` on a
(2, 2) mesh of 4 gloo ranks, called with a new sequence length at almost every step.

* loss and every gradient equal to the model in one process at every call;
* the plan is solved a handful of times at most: a call at new sizes carries the previous
  plan to its sizes (C++ transfer_plan) unless a materially cheaper plan exists there;
* the cache of planned signatures stays within plan_cache_size (least recently used dropped);
* the same through torch.compile(backend="localmap") with Dynamo's automatic dynamic shapes.
"""
import random

import pytest
import torch
import torch.nn as nn

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING

CALLS = 50
LENGTHS = range(16, 28)  # 12 lengths, odd ones included: a sequence shard may stop dividing
CACHE = 8  # fewer than the lengths: entries are evicted and planned again
TOL = dict(rtol=1e-10, atol=1e-12)


class TokenMixer(nn.Module):
    """Per-token MLP, then a mean over the sequence: the length is in every activation."""

    def __init__(self, d=16, hidden=32):
        super().__init__()
        self.up = nn.Linear(d, hidden, dtype=torch.float64)
        self.down = nn.Linear(hidden, d, dtype=torch.float64)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(x)))
        return (h.mean(dim=1) ** 2).sum()


def _lengths():
    rng = random.Random(0)
    return [rng.choice(LENGTHS) for _ in range(CALLS)]


def _batch(step, length):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(8, length, 16, generator=g, dtype=torch.float64)


def _run(model, lengths, params=None):
    """(loss, gradients) per call; `params`: the module whose parameters to read (default `model`)."""
    from torch.distributed.tensor import DTensor

    full = lambda t: t.full_tensor() if isinstance(t, DTensor) else t.detach().clone()  # noqa: E731
    out = []
    for step, length in enumerate(lengths):
        params = params or model
        params.zero_grad()
        loss = model(_batch(step, length))
        loss.backward()
        out.append((float(full(loss.detach())), {k: full(p.grad) for k, p in params.named_parameters()}))
    return out


def _rank_varlen(rank, world_size, lengths):
    import torch_localmap
    from torch_localmap._torch_private import graph_module

    torch.manual_seed(0)
    model = TokenMixer()
    code_before = len(graph_module.graph_code_keys())
    pm = torch_localmap.parallelize(model, make_mesh((2, 2)), (_batch(0, lengths[0]),), device="cpu",
                                    calibration=FORCE_SHARDING, time_limit=2.0, plan_cache_size=CACHE)
    results = _run(pm, lengths)
    sharded = sorted(k for k, s in pm.plan.state_placements().items() if set(s) != {"R"})
    # torch.fx keeps each GraphModule's source: only the cached programs' may remain.
    code = (len(graph_module.graph_code_keys()) - code_before, sum(map(len, pm._plans._code.values())))
    return results if rank == 0 else None, dict(pm.plan_cache_stats), len(pm._plans), sharded, code


def test_fifty_calls_at_random_lengths_plan_a_handful_of_times_and_match_one_process():
    lengths = _lengths()
    torch.manual_seed(0)
    ref = _run(TokenMixer(), lengths)
    outs = run_distributed(_rank_varlen, 4, lengths, timeout=900)
    results, stats, cached, sharded, (code_grown, code_cached) = outs[0]
    assert code_grown == code_cached, (code_grown, code_cached)  # evicted programs' source dropped
    assert sharded, "the forced cost model should shard some parameter"
    for step, ((loss, grads), (ref_loss, ref_grads)) in enumerate(zip(results, ref)):
        torch.testing.assert_close(loss, ref_loss, **TOL, msg=lambda m: f"call {step} (length {lengths[step]}): {m}")
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"call {step} grad {k}: {m}")
    distinct = len(set(lengths))
    assert stats["hits"] + stats["misses"] == CALLS + 1, stats  # + parallelize's example call
    assert stats["solved"] + stats["carried"] == stats["misses"], stats
    assert stats["misses"] > distinct, stats  # evicted lengths came back and were planned again
    assert stats["evictions"] == stats["misses"] - cached > 0, stats
    assert cached <= CACHE, cached
    assert stats["solved"] <= 4, stats  # a handful: the rest carried the plan to their sizes
    assert all(o[1] == stats for o in outs), [o[1] for o in outs]  # every rank decided alike


def _rank_varlen_backend(rank, world_size, lengths):
    import torch._dynamo

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = TokenMixer()
    plans = []
    compiled = torch.compile(model, backend="localmap",  # dynamic=None: Dynamo's automatic dynamic shapes
                             options={"mesh": make_mesh((2, 2)), "calibration": FORCE_SHARDING, "time_limit": 2.0,
                                      "plan_cache_size": CACHE, "on_plan": plans.append})
    results = _run(compiled, lengths, params=model)
    carried = sum(1 for p in plans if p.transfer and not p.transfer["replanned"])
    return results if rank == 0 else None, len(plans), carried


def test_the_backend_over_random_lengths_plans_a_handful_of_times_and_matches_one_process():
    lengths = _lengths()
    torch.manual_seed(0)
    ref = _run(TokenMixer(), lengths)
    outs = run_distributed(_rank_varlen_backend, 4, lengths, timeout=900)
    results, planned, carried = outs[0]
    for step, ((loss, grads), (ref_loss, ref_grads)) in enumerate(zip(results, ref)):
        torch.testing.assert_close(loss, ref_loss, **TOL, msg=lambda m: f"call {step} (length {lengths[step]}): {m}")
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"call {step} grad {k}: {m}")
    # Dynamo compiles the first length statically, then one dynamic graph for every other
    # length: each length of the dynamic graph is a program of its own, its plan carried.
    assert planned >= len(set(lengths)), planned
    assert planned - carried <= 4, (planned, carried)
    assert all(o[1:] == (planned, carried) for o in outs), [o[1:] for o in outs]


def test_plan_cache_options_are_checked():
    from torch_localmap._parallelize import _check_count, _check_fraction

    with pytest.raises(TypeError, match=r"plan_cache_size must be an int >= 1, got 0"):
        _check_count(0, "plan_cache_size", minimum=1)
    with pytest.raises(ValueError, match=r"replan_tolerance: expected a non-negative fraction"):
        _check_fraction(-0.1, "replan_tolerance")
