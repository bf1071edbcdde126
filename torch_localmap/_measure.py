"""parallelize(measure_candidates=k): the planner's pick checked on the real mesh (issue 30).

The cost model prices a plan; the machine runs it, and the two can disagree (kernel launch
overhead, gloo's copies, oversubscribed cores). With this option parallelize plans the model
as usual and, beside it, the plans torch's own wrappers run (like="ddp", like="fsdp2"; one
that cannot run the model is skipped) and, on a 1-D mesh, the planner's plan on each 2-D
layout of the same ranks (4 ranks as 2x2: tensor parallelism inside pairs, data parallelism
across them -- the logical mesh shapes Alpa and XLA's auto-sharding search over). It runs
each distinct candidate for a few training steps on the real mesh -- forward, backward and
an AdamW step (the implementation parallelize's `optimizer_impl` names, else torch's
default), on a copy of the model -- and keeps the fastest. The candidates take turns, in
MEASURE_ROUNDS rounds: a host's speed drifts (other processes, the ranks' own collective
threads on shared cores), and measured one after another the MoE of benchmarks/step_time.py
kept a plan 1.1-1.25x slower than DDP's in 1 of 4 tries. Every copy is held until the last
round (its parameters; an optimizer's state lives only during its own steps). The optimizer
step counts: state a plan replicates whole is held as plain tensors, other state as DTensors,
whose dispatch AdamW pays per kernel (the step-time MoE: 2.0 against 0.8 ms a step). A
candidate's step is the median over the rounds of its turns' median steps, on the slowest
rank; every rank receives the same numbers, so every rank keeps the same plan. The
measurements go into the kept plan (`plan.measurements`) and its report.
"""
from __future__ import annotations

import copy
import gc
import statistics
import time

import torch
import torch.distributed as dist

from ._torch_private.pytrees import pytree

__all__ = ["candidates", "layouts", "measure_and_pick"]

# Rounds in which every candidate runs its steps once, each round starting from another
# candidate: drift of the host's speed reaches every candidate alike.
MEASURE_ROUNDS = 3


def layouts(mesh_shape) -> list:
    """The 2-D layouts of a 1-D mesh's ranks (both orders of every factor pair: which pairs of
    ranks share a group differs), smallest first dim first; none for an N-D mesh, whose
    layout the user chose."""
    if len(mesh_shape) != 1:
        return []
    n = mesh_shape[0]
    return [(a, n // a) for a in range(2, n // 2 + 1) if n % a == 0]


def candidates(mesh_shape) -> list:
    """(like, layout or None) in the order they are tried: the planner's own plan first, then
    torch's, then the planner's on each layout of the ranks."""
    return [(None, None), ("ddp", None), ("fsdp2", None)] + [(None, layout) for layout in layouts(mesh_shape)]


def _label(like, layout=None) -> str:
    name = "planned" if like is None else f"like={like}"
    return name if layout is None else f"{name} on {'x'.join(map(str, layout))}"


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


def _step_seconds(pmodel, args, kwargs, steps: int, cuda: bool, optimizer_impl: str | None = None) -> float:
    from ._live_calibration import _adamw, default_optimizer_impl

    impl = optimizer_impl or default_optimizer_impl("cuda" if cuda else "cpu")
    params = [p for p in pmodel.parameters() if p.requires_grad]
    opt = _adamw(params, impl) if params else None
    times = []
    for i in range(steps + 1):  # the first step warms up (allocations, optimizer state, Inductor's compile)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        _scalar(pmodel(*args, **kwargs)).backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - t0)
        pmodel.zero_grad(set_to_none=True)
    return statistics.median(times)


def _slowest_rank(seconds: list, group) -> list:
    """Per entry of `seconds`, the largest value over the ranks (one gather for all)."""
    if not dist.is_initialized():
        return list(seconds)
    every = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, list(seconds), group=group)
    return [max(values) for values in zip(*every)]


def _start_together(group) -> None:
    """Every rank starts a candidate's turn at once: one candidate's stragglers do not run into
    the next one's steps."""
    if dist.is_initialized():
        dist.barrier(group=group)


def _same_plan(a, b) -> bool:
    return [(n.inputs, n.outputs) for n in a.nodes] == [(n.inputs, n.outputs) for n in b.nodes]


def measure_and_pick(model, build, args, kwargs, mesh_shape, limit: int, steps: int, cuda: bool, group,
                     no_layouts: str | None = None, optimizer_impl: str | None = None):
    """Plans and measures up to `limit` candidates; returns ((like, layout) of the fastest, its
    plan, the measurements). `build(model_copy, like, layout)` returns a ParallelModule;
    `no_layouts`: why the layouts of the ranks cannot be tried (listed as skipped), or None;
    `optimizer_impl`: the AdamW implementation each measured step runs (None: torch's default)."""
    measured, held = [], []  # held: (the copy, its entry in `measured`, its layout, plain state)
    for like, layout in candidates(mesh_shape):
        if len(held) >= limit:
            break
        label = _label(like, layout)
        if layout is not None and no_layouts:
            measured.append({"candidate": label, "skipped": no_layouts})
            continue
        try:
            pmodel = build(copy.deepcopy(model), like, layout)
        except ValueError as e:  # a torch wrapper that cannot run this model (e.g. BatchNorm under like='ddp')
            if like is None and layout is None:
                raise
            measured.append({"candidate": label, "skipped": str(e).splitlines()[0]})
            continue
        # The same plan with its state held the same way runs the same program: measured once.
        plain = getattr(pmodel, "_plain_state", False)
        if any(lay == layout and was_plain == plain and _same_plan(pmodel.plan, other.plan)
               for other, _, lay, was_plain in held):
            measured.append({"candidate": label, "skipped": "the same plan as an earlier candidate"})
            continue
        entry = {"candidate": label, "like": like, "layout": None if layout is None else list(layout),
                 "estimated_step_s": pmodel.plan.summary.estimated_step_s}
        measured.append(entry)
        held.append((pmodel, entry, layout, plain))
    turns = [[] for _ in held]  # per candidate, its median step in each round
    for r in range(MEASURE_ROUNDS):
        for i in [(r + k) % len(held) for k in range(len(held))]:
            _start_together(group)
            turns[i].append(_step_seconds(held[i][0], args, kwargs, steps, cuda, optimizer_impl))
    slowest = _slowest_rank([statistics.median(t) for t in turns], group)
    for (_, entry, *_), seconds in zip(held, slowest):
        entry["measured_step_s"] = seconds
    best = min(range(len(held)), key=lambda i: (slowest[i], i))
    (pmodel, kept, layout, _) = held[best]
    plan = pmodel.plan
    del held, pmodel
    gc.collect()  # the copies' parameters and programs go before the kept plan is applied to the model
    return (kept["like"], layout), plan, {
        "candidates": measured, "kept": kept["candidate"], "kept_like": kept["like"], "kept_layout": kept["layout"],
        "steps": steps, "rounds": MEASURE_ROUNDS}
