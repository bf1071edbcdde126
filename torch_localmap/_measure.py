"""parallelize(measure_candidates=k): the planner's pick checked on the real mesh (issue 30).

The cost model prices a plan; the machine runs it, and the two can disagree (kernel launch
overhead, gloo's copies, oversubscribed cores). With this option parallelize plans the model
as usual and, beside it, the plans torch's own wrappers run (like="ddp", like="fsdp2"; one
that cannot run the model is skipped), runs each distinct candidate for a few forward +
backward steps on the real mesh -- on a copy of the model, gradients dropped -- and keeps the
fastest. A candidate's step is the median of its steps on the slowest rank; every rank
receives the same numbers, so every rank keeps the same plan. The measurements go into the
kept plan (`plan.measurements`) and its report.
"""
from __future__ import annotations

import copy
import gc
import statistics
import time

import torch
import torch.distributed as dist

from ._torch_private.pytrees import pytree

__all__ = ["CANDIDATES", "measure_and_pick"]

# The candidates in the order they are tried: the planner's own plan first, then torch's.
CANDIDATES = (None, "ddp", "fsdp2")


def _label(like) -> str:
    return "planned" if like is None else f"like={like}"


def _scalar(out):
    """A scalar over every floating output that needs a gradient: backward then runs through
    the whole program, as a loss over the outputs would."""
    leaves = [x for x in pytree.tree_leaves(out)
              if isinstance(x, torch.Tensor) and x.is_floating_point() and x.requires_grad]
    if not leaves:
        raise ValueError("measure_candidates: the model's outputs hold no floating tensor that requires grad; "
                         "expected a training call (measuring times forward + backward)")
    if len(leaves) == 1 and leaves[0].dim() == 0:
        # A loss: backward from it as a training loop does, without reading its value (on gloo
        # meshes the value may still be pending: _runtime/deferred_loss.py).
        return leaves[0]
    total = leaves[0].float().sum()
    for x in leaves[1:]:
        total = total + x.float().sum()
    return total


def _step_seconds(pmodel, args, kwargs, steps: int, cuda: bool) -> float:
    times = []
    for i in range(steps + 1):  # the first step warms up (allocations, Inductor's compile)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        _scalar(pmodel(*args, **kwargs)).backward()
        if cuda:
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - t0)
        pmodel.zero_grad(set_to_none=True)
    return statistics.median(times)


def _slowest_rank(seconds: float, group) -> float:
    if not dist.is_initialized():
        return seconds
    every = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, seconds, group=group)
    return max(every)


def _same_plan(a, b) -> bool:
    return [(n.inputs, n.outputs) for n in a.nodes] == [(n.inputs, n.outputs) for n in b.nodes]


def measure_and_pick(model, build, args, kwargs, limit: int, steps: int, cuda: bool, group):
    """Plans and measures up to `limit` candidates; returns (like of the fastest, its plan,
    the measurements). `build(model_copy, like)` returns a ParallelModule."""
    measured, plans = [], []
    for like in CANDIDATES:
        if len(plans) >= limit:
            break
        try:
            pmodel = build(copy.deepcopy(model), like)
        except ValueError as e:  # a torch wrapper that cannot run this model (e.g. BatchNorm under like='ddp')
            if like is None:
                raise
            measured.append({"candidate": _label(like), "skipped": str(e).splitlines()[0]})
            continue
        if any(_same_plan(pmodel.plan, p) for p in plans):
            measured.append({"candidate": _label(like), "skipped": "the same plan as an earlier candidate"})
            continue
        seconds = _slowest_rank(_step_seconds(pmodel, args, kwargs, steps, cuda), group)
        plans.append(pmodel.plan)
        measured.append({"candidate": _label(like), "like": like, "measured_step_s": seconds,
                         "estimated_step_s": pmodel.plan.summary.estimated_step_s})
        del pmodel
        gc.collect()  # the copy's parameters and program go before the next candidate is built
    timed = [m for m in measured if "measured_step_s" in m]
    best = min(range(len(timed)), key=lambda i: (timed[i]["measured_step_s"], i))
    return timed[best]["like"], plans[best], {"candidates": measured, "kept": timed[best]["candidate"],
                                              "steps": steps}
