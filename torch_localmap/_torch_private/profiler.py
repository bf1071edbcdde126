"""Measuring a step's peak CPU memory with torch's profiler.

Written for torch 2.13 (torch.profiler, torch._C._profiler's event tree).
"""
from __future__ import annotations


def cpu_memory_profiler():
    """A profiler recording CPU allocations only (torch.profiler.profile with
    profile_memory=True, 2.13)."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False, with_stack=False)


def cpu_allocation_peak(prof) -> int:
    """The largest running total of CPU bytes allocated (and not yet freed) since `prof`
    started: each allocation record's total_allocated (the profiler's event tree,
    torch._C._profiler._EventType.Allocation, 2.13)."""
    from torch._C._profiler import _EventType

    peak = 0
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
            peak = max(peak, int(e.extra_fields.total_allocated))
    return peak
