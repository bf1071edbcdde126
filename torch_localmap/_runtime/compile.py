"""How a rank program runs: reshard after forward, overlap, Inductor compilation.

Compilation hands each of the rank's forward and backward graphs -- aten ops and
_c10d_functional collectives, already in the overlap schedule's order -- to Inductor
(C++ code on CPU, Triton on CUDA) on its first call, with that call's tensors as the
example inputs. A plan's program has static shapes, so one compilation serves every
later call of the plan; Inductor's own caches serve other ranks and later runs.
"""
from __future__ import annotations

import dataclasses

import torch.fx as fx

from .._torch_private import inductor
from .bucketing import DEFAULT_BUCKET_BYTES


@dataclasses.dataclass(frozen=True)
class ExecutionOptions:
    # Re-gather parameters in backward instead of saving them; None: only when keeping them
    # would not fit the memory limit (RankProgram's memory_room).
    reshard_after_forward: bool | None = True
    overlap: bool = True  # issue collectives early, wait late (core/overlap_schedule.h)
    inflight_bytes: int | None = None  # overlap's bound on bytes in flight (None: 2x the largest collective)
    # overlap's bound on collectives in flight (None: none). gloo meshes get 1: two gloo
    # collectives in flight together have corrupted CPU ranks' heaps (schedule.py).
    inflight_collectives: int | None = None
    compile: bool = False  # Inductor
    # Collectives of one kind merged into flat buffers of at most this many bytes (DDP's
    # bucket_cap_mb; bucketing.py); 0: every collective on its own.
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    # glibc's malloc keeps freed memory for the next step instead of page-faulting it back in
    # (host_memory.py): CPU meshes.
    keep_host_memory: bool = False


class CompiledOnFirstCall:
    """Calls `gm` through Inductor, compiled with the first call's inputs."""

    def __init__(self, gm: fx.GraphModule):
        self.graph_module = gm
        self._compiled = None
        self._boxed = None

    def _compile(self, example_inputs: list) -> None:
        self._compiled = inductor.inductor_compile(self.graph_module, example_inputs)
        self._boxed = inductor.boxed_entry(self._compiled)

    def __call__(self, *inputs):
        if self._compiled is None:
            self._compile(list(inputs))
        return self._compiled(*inputs)

    def call_boxed(self, args: list):
        """Calls the graph on `args`, which it empties: where Inductor's boxed entry is
        reachable (inductor.boxed_entry), each input is freed after its last use inside the
        compiled code -- backward's saved activations, as the eager backward frees them."""
        if self._compiled is None:
            self._compile(list(args))
        if self._boxed is not None:
            return self._boxed(args)
        inputs = list(args)
        args.clear()
        return self._compiled(*inputs)

    @property
    def code(self) -> str:
        return self.graph_module.code
