"""Checks sharding strategies numerically in one process (test helper).

For one IR node and one strategy: random global inputs are cut into each mesh
coordinate's local inputs per the strategy's input placements (Partial inputs
as random pieces that reduce back to the value), the op runs per coordinate
with the C++ per-rank call arguments, the local outputs are reassembled per
the output placements and compared with the op on the global inputs.

Local extents follow torch.distributed.tensor (torch.chunk-style, uneven tails
and empty shards, nested sharding in mesh-dim order) via our own small
chunking below, independent of the C++ code under test.
"""
from __future__ import annotations

import itertools
import json
import re

import torch

from torch_localmap import _C
from torch_localmap._ir_export import decode_arg

_PLACEMENT = re.compile(r"R|S\((-?\d+)\)|P\((sum|avg|max|min)\)")


def parse_spec(spec: str):
    out = []
    for m in _PLACEMENT.finditer(spec):
        if m.group(0) == "R":
            out.append(("R", None))
        elif m.group(1) is not None:
            out.append(("S", int(m.group(1))))
        else:
            out.append(("P", m.group(2)))
    return out


def chunk_extent(size: int, parts: int, index: int):
    step = -(-size // parts)
    off = min(index * step, size)
    return off, max(0, min(step, size - off))


def random_tensor(meta, gen):
    shape, dtype = meta["shape"], getattr(torch, meta["dtype"])
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float64)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(0, 4, shape, generator=gen, dtype=dtype)


def _split_partial(value, kind, parts, gen):
    """`parts` random tensors whose `kind`-reduction is `value`."""
    if kind in ("sum", "avg"):
        pieces = [torch.randn(value.shape, generator=gen, dtype=value.dtype) for _ in range(parts - 1)]
        total = value * (parts if kind == "avg" else 1)
        pieces.append(total - sum(pieces))
        return pieces
    sign = -1.0 if kind == "max" else 1.0  # others stay below (max) / above (min) the value
    owner = torch.randint(0, parts, value.shape, generator=gen)
    pieces = []
    for r in range(parts):
        noise = torch.rand(value.shape, generator=gen, dtype=value.dtype) + 0.1
        pieces.append(torch.where(owner == r, value, value + sign * noise))
    return pieces


def shard_locals(value, spec, mesh_shape, gen):
    """{coord: local tensor} for a global value under a placement spec."""
    locals_ = {(): value}
    for m, (kind, arg) in enumerate(spec):
        n = mesh_shape[m]
        nxt = {}
        for prefix, t in locals_.items():
            if kind == "R":
                pieces = [t] * n
            elif kind == "S":
                pieces = []
                for i in range(n):
                    off, ln = chunk_extent(t.shape[arg], n, i)
                    pieces.append(t.narrow(arg, off, ln))
            else:
                pieces = _split_partial(t, arg, n, gen)
            for i, p in enumerate(pieces):
                nxt[prefix + (i,)] = p
        locals_ = nxt
    return locals_


def assemble(locals_, spec, mesh_shape):
    """Inverse of shard_locals: the global value from every coordinate's piece."""
    cur = dict(locals_)
    for m in reversed(range(len(spec))):
        kind, arg = spec[m]
        nxt = {}
        for prefix in {c[:m] for c in cur}:
            pieces = [cur[prefix + (i,)] for i in range(mesh_shape[m])]
            if kind == "R":
                for p in pieces[1:]:
                    # Partial pieces on other mesh dims were drawn per replica, so
                    # replicas agree up to rounding only.
                    same = torch.allclose(p, pieces[0], atol=1e-6, rtol=1e-6) if p.is_floating_point() else torch.equal(p, pieces[0])
                    if not same:
                        raise AssertionError("replicated output differs across ranks")
                v = pieces[0]
            elif kind == "S":
                v = torch.cat(pieces, dim=arg)
            elif arg == "sum":
                v = sum(pieces[1:], pieces[0])
            elif arg == "avg":
                v = sum(pieces[1:], pieces[0]) / len(pieces)
            elif arg == "max":
                v = torch.stack(pieces).amax(0)
            else:
                v = torch.stack(pieces).amin(0)
            nxt[prefix] = v
        cur = nxt
    return cur[()]


def _decode_call(args, kwargs, tensors):
    """Decodes IR args/kwargs, giving the k-th tensor reference tensors[k]."""
    counter = iter(range(10**9))
    a = decode_arg(args, lambda ref: tensors[next(counter)])
    kw = {k: decode_arg(v, lambda ref: tensors[next(counter)]) for k, v in kwargs.items()}
    return a, kw


def _as_list(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [o for o in out if isinstance(o, torch.Tensor)]


def resolve_op(name: str):
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


# Tolerances per output dtype: inputs are float64, but casts inside the op
# (e.g. _to_copy to float32 of a Partial) round each rank's piece separately.
_TOL = {torch.float64: (1e-9, 1e-7), torch.float32: (1e-5, 1e-5), torch.bfloat16: (5e-2, 5e-2), torch.float16: (5e-3, 5e-3)}


def check_node(doc: dict, ir_json: str, node: int, strategy: dict, seed: int = 0):
    """Raises AssertionError when `strategy` is numerically wrong for `node`."""
    gen = torch.Generator().manual_seed(seed)
    mesh_shape = doc["mesh"]["shape"]
    entry = doc["nodes"][node]
    op = resolve_op(entry["op"])
    refs = []

    def collect(a):
        if isinstance(a, dict) and "t" in a:
            refs.append(a["t"])
        elif isinstance(a, list):
            for x in a:
                collect(x)
        elif isinstance(a, dict):
            for x in a.values():
                collect(x)

    collect(entry["args"])
    collect(entry["kwargs"])
    metas = [doc["nodes"][n]["outputs"][o] for n, o in refs]
    inputs = [random_tensor(m, gen) for m in metas]
    args, kwargs = _decode_call(entry["args"], entry["kwargs"], inputs)
    expected = _as_list(op(*args, **kwargs))

    in_specs = [parse_spec(s) for s in strategy["inputs"]]
    out_specs = [parse_spec(s) for s in strategy["outputs"]]
    local_ins = [shard_locals(x, sp, mesh_shape, gen) for x, sp in zip(inputs, in_specs)]
    coords = list(itertools.product(*[range(n) for n in mesh_shape]))
    sjson = json.dumps(strategy)
    local_outs = {}
    for c in coords:
        call = json.loads(_C.local_call_args(ir_json, node, sjson, list(c)))
        a, kw = _decode_call(call["args"], call["kwargs"], [li[c] for li in local_ins])
        local_outs[c] = _as_list(op(*a, **kw))
    for k, (exp, sp) in enumerate(zip(expected, out_specs)):
        got = assemble({c: local_outs[c][k] for c in coords}, sp, mesh_shape)
        if got.shape != exp.shape:
            raise AssertionError(f"output {k}: shape {tuple(got.shape)} != {tuple(exp.shape)}")
        if exp.dtype.is_floating_point:
            atol, rtol = _TOL.get(exp.dtype, (1e-9, 1e-7))
            ok = torch.allclose(got.to(exp.dtype), exp, atol=atol, rtol=rtol, equal_nan=True)
        else:
            ok = torch.equal(got.to(exp.dtype), exp)
        if not ok:
            raise AssertionError(f"output {k} differs (max abs err {(got.double() - exp.double()).abs().max()})")
