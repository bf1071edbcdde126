"""Freed host memory kept in the process between training steps (CPU meshes, glibc).

A rank program allocates the same buffers every step: activations, gradient buckets (a
flat buffer per bucket, bucketing.py), collective outputs. glibc's malloc hands freed memory
back to the kernel -- it trims the top of the heap once more than `M_TRIM_THRESHOLD` bytes
are free there, and maps anything above `M_MMAP_THRESHOLD` on its own -- so the next step
touches fresh pages again, one page fault (and a page of zeroing) per 4 KiB. Both
thresholds move with the process's history, so whether a step pays depends on the order of
its allocations: llama's planned 2x2 program took 6,500-6,800 minor faults a backward on two
of its four ranks and none on the other two, 7-9 ms of CPU a step (docs/benchmarks_log.md).
torch's DDP keeps its buckets for the whole run, so it does not pay them.

Keeping what was freed (no trim, mappings only above 32 MiB, glibc's ceiling for the
threshold) makes every step after the first reuse the same pages: the process holds its
peak heap, as a CUDA caching allocator holds its peak. This is process-wide and stays set;
`TLM_KEEP_HOST_MEMORY=0` leaves malloc as it is. Other C libraries are left alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

from .._log import get_logger

logger = get_logger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper bound for M_MMAP_THRESHOLD on 64-bit hosts
_NEVER_TRIM = -1  # mallopt(3): "-1 disables trimming completely"

_applied: bool | None = None


def keep_freed_host_memory() -> bool:
    """Sets glibc's malloc to keep freed memory (once per process). Returns whether it is set:
    False off glibc or with TLM_KEEP_HOST_MEMORY=0."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("TLM_KEEP_HOST_MEMORY", "1") == "0":
        logger.info("TLM_KEEP_HOST_MEMORY=0: malloc's trim and mmap thresholds left as they are")
        return False
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # not glibc: its allocator has other knobs
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) == 1 and mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM) == 1
    if not ok:
        logger.warning("mallopt refused the trim/mmap thresholds: steps may page-fault on freed host memory")
    _applied = ok
    return ok
