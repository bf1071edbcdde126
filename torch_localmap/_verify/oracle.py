"""The split/assemble oracle: a global value -> each mesh coordinate's local tensor under a
placement spec, and per-coordinate outputs -> the global value (or why they are inconsistent).
Kinds are read through torch_localmap.placements; shapes and offsets come from C++."""
from __future__ import annotations

import itertools

import torch

from .. import _C
from ..placements import spec_parts
from .partial_pieces import reduce, split


RTOL, ATOL = 1e-7, 1e-9


class Layouts:
    """Local shapes/offsets of every rank from C++ (`_C.local_layouts`, row-major ranks),
    one call per (global shape, mesh, spec), cached."""

    def __init__(self):
        self._cache = {}

    def __call__(self, shape, mesh_shape, spec, coord):
        key = (tuple(shape), tuple(mesh_shape), spec)
        per_rank = self._cache.get(key)
        if per_rank is None:
            per_rank = [(list(s), list(o)) for s, o in _C.local_layouts(list(shape), list(mesh_shape), spec)]
            self._cache[key] = per_rank
        rank = 0
        for c, n in zip(coord, mesh_shape):
            rank = rank * n + c
        return per_rank[rank]


def _slice(t: torch.Tensor, shape, offset) -> torch.Tensor:
    idx = tuple(slice(o, o + s) for o, s in zip(offset, shape))
    return t[idx] if idx else t


def local_inputs(value: torch.Tensor, spec: str, mesh_shape, layouts: Layouts, gen) -> dict:
    """coord -> local tensor for a global `value` in placement `spec`.

    A rank's tensor depends only on its coordinates along the Shard mesh dims (which slice)
    and the Partial mesh dims (which piece): ranks that differ only along Replicate mesh dims
    are replicas and hold identical tensors, as they would on a real mesh.
    """
    parts = spec_parts(spec)
    coords = list(itertools.product(*[range(n) for n in mesh_shape]))
    partial_dims = [m for m, part in enumerate(parts) if part.kind.pending]
    shard_dims = [m for m, part in enumerate(parts) if part.kind.splits_dim]
    # Pieces per shard position: slice first, then split; splitting is elementwise, so the
    # reduction over a Partial group gives back the slice.
    shard_pieces = {}
    out = {}
    for c in coords:
        key = tuple(c[m] for m in shard_dims)
        if key not in shard_pieces:
            shape, offset = layouts(value.shape, mesh_shape, spec, c)
            tree = {(): _slice(value, shape, offset)}
            for m in partial_dims:  # one split per Partial mesh dim, nested in mesh-dim order
                nxt = {}
                for k, v in tree.items():
                    for i, piece in enumerate(split(v, mesh_shape[m], parts[m].reduce_op, gen)):
                        nxt[k + (i,)] = piece
                tree = nxt
            shard_pieces[key] = tree
        out[c] = shard_pieces[key][tuple(c[m] for m in partial_dims)].clone()
    return out


def assemble(locals_by_coord: dict, global_shape, dtype, spec: str, mesh_shape, layouts: Layouts):
    """Global tensor from per-coordinate outputs, or (None, reason) when they are inconsistent."""
    parts = spec_parts(spec)
    partial_dims = [m for m, part in enumerate(parts) if part.kind.pending]
    groups = {}
    for c, t in locals_by_coord.items():
        shape, offset = layouts(global_shape, mesh_shape, spec, c)
        if list(t.shape) != list(shape):
            return None, f"coord {list(c)}: local output shape {list(t.shape)}, expected {shape}"
        if t.dtype != dtype:
            return None, f"coord {list(c)}: local output dtype {t.dtype}, expected {dtype}"
        key = tuple(c[m] for m in range(len(c)) if m not in partial_dims)
        groups.setdefault(key, (shape, offset, {}))[2][tuple(c[m] for m in partial_dims)] = t
    result = torch.zeros(global_shape, dtype=dtype)
    written = torch.zeros(global_shape, dtype=torch.bool)
    for key, (shape, offset, members) in groups.items():
        # reduce Partial mesh dims innermost first: each is a reduction over one mesh dim
        vals = members
        for level in range(len(partial_dims) - 1, -1, -1):
            how = parts[partial_dims[level]].reduce_op
            merged = {}
            for k, v in vals.items():
                merged.setdefault(k[:level], []).append((k[level], v))
            vals = {k: reduce([v for _, v in sorted(lst, key=lambda p: p[0])], how) for k, lst in merged.items()}
        value = vals[()]
        region = tuple(slice(o, o + s) for o, s in zip(offset, shape))
        if region and value.numel() == 0:
            continue
        prev_written = written[region] if region else written
        if bool(prev_written.any()):
            prev = result[region] if region else result
            if not close(value, prev):
                return None, f"replicas disagree at coord group {list(key)} (region offset {offset})"
            continue
        if region:
            result[region] = value
            written[region] = True
        else:
            result, written = value.clone(), torch.ones((), dtype=torch.bool)
    if not bool(written.all()):
        return None, "the output shards do not cover the global tensor"
    return result, ""


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the rounding of b's dtype (Partial pieces are exact, see split)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        rtol, atol = TOLERANCE.get(b.dtype, (RTOL, ATOL))
        scale = float(b.abs().max()) if b.numel() else 0.0
        return torch.allclose(a, b, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True)
    return torch.equal(a, b)


# Cases run in float64; ops that compute in a narrower dtype (casts inside norms) round
# per shard differently from the whole (other summation order), so the bound follows the
# output dtype.
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-2, 2e-2), torch.bfloat16: (5e-2, 5e-2)}
