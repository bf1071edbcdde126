"""Random ops on shards: every rank draws the whole tensor and keeps its piece.

A random op run on a shard would draw only as many numbers as its piece has, so its
numbers would differ from those of one process running the whole model. Instead each
rank runs the op on a tensor of the global shape -- the same op, shape and dtype, so
the generator is consumed exactly as in one process -- and keeps the piece its planned
placement gives it. With the same generator state on every rank (parallelize
synchronizes it from rank 0) dropout masks equal the single-device masks under the
same seed. The price: each rank draws the global tensor (memory and time of the whole
mask), which the cost model's random family does not yet charge.
"""
from __future__ import annotations

import torch

from .. import _C

__all__ = ["RANDOM_OPS", "is_random", "run_sharded"]


def _piece(value: torch.Tensor, mesh_shape, spec: str, coord) -> torch.Tensor:
    shape, offset = _C.local_layout(list(value.shape), list(mesh_shape), spec, list(coord))
    out = value
    for d, (size, start) in enumerate(zip(shape, offset)):
        if size != value.shape[d]:
            out = out.narrow(d, start, size)
    return out


def _native_dropout(fn, args, kwargs, global_shapes, out_specs, mesh_shape, coord):
    x, p, train = args[0], float(args[1]), args[2]
    if not train or p == 0.0:
        return fn(*args, **kwargs)
    whole = torch.empty(tuple(global_shapes[0]), dtype=x.dtype, device=x.device)
    mask = _piece(fn(whole, p, train)[1], mesh_shape, out_specs[1], coord)
    # The kernel's own arithmetic (output = input * mask * scale, bit for bit).
    out = torch.ops.aten.native_dropout_backward.default(x, mask, 1.0 / (1.0 - p))
    return out, mask


def _shaped_like_self(fn, args, kwargs, global_shapes, out_specs, mesh_shape, coord):
    x = args[0]
    whole = torch.empty(tuple(global_shapes[0]), dtype=x.dtype, device=x.device)
    return _piece(fn(whole, *args[1:], **kwargs), mesh_shape, out_specs[0], coord)


def _sized(fn, args, kwargs, global_shapes, out_specs, mesh_shape, coord):
    # rand / randn(size, *, dtype, ...): the rule keeps the traced (global) size
    return _piece(fn(list(global_shapes[0]), *args[1:], **kwargs), mesh_shape, out_specs[0], coord)


RANDOM_OPS = {
    # draws of self's shape (exponential and uniform: exponential_ / uniform_, functionalized)
    "aten.bernoulli.p": _shaped_like_self,
    "aten.rand_like.default": _shaped_like_self,
    "aten.randn_like.default": _shaped_like_self,
    "aten.exponential.default": _shaped_like_self,
    "aten.uniform.default": _shaped_like_self,
    "aten.rand.default": _sized,
    "aten.randn.default": _sized,
    "aten.native_dropout.default": _native_dropout,
}


def is_random(op: str) -> bool:
    return op in RANDOM_OPS


def run_sharded(op: str, fn, args, kwargs, global_shapes, out_specs, mesh_shape, coord):
    """Runs random op `op` (callable `fn`) on this coordinate's local arguments, drawing the
    global tensor's numbers: `global_shapes` / `out_specs` per tensor output of the op."""
    return RANDOM_OPS[op](fn, args, kwargs, global_shapes, out_specs, mesh_shape, coord)
