"""Measured peak memory of a piece of work on one rank, to compare with the plan's
estimate (plan.summary.memory).

CUDA: the caching allocator's peak (torch.cuda.max_memory_allocated) above what was
allocated when the window opened. CPU has no allocator statistics: the profiler's
allocation records carry the running total of bytes allocated since profiling began
(c10's ProfiledCPUMemoryReporter), so a window that opens before the model is built
sees every tensor of the run -- parameters, optimizer state, activations, gathered
parameters, Inductor's buffers. Communication libraries' own buffers (gloo, NCCL) are
not tensors and are counted by neither.
"""
from __future__ import annotations

import torch

from .._torch_private import profiler


class PeakMemory:
    """`with PeakMemory(device) as m: ...` then `m.peak_bytes`."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.peak_bytes = 0
        self._prof = None
        self._base = 0

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "cpu":
            self._prof = profiler.cpu_memory_profiler()
            self._prof.__enter__()
        else:
            raise ValueError(f"PeakMemory: device type {self.device.type!r}; expected 'cpu' or 'cuda'")
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._base
            return False
        self._prof.__exit__(*exc)
        self.peak_bytes = profiler.cpu_allocation_peak(self._prof)
        return False
