"""Cases from torch's OpInfo sample inputs, for the rules the models and hand programs miss."""
from __future__ import annotations

import warnings
import zlib

import torch

from .op_case import cases_from_graph


def opinfo_cases(wanted: set, seed: int, samples_per_op: int = 2) -> tuple[list, str]:
    """Instances of the ops in `wanted` from torch's OpInfo sample inputs, traced like the
    hand programs: first to aten (forward, and the backward ops through autograd), then
    for ops that tracing decomposes (reshape, square, ...) at pre-dispatch level, where they
    stay whole. Returns (cases, note): the note says why no OpInfo could be used (then the
    caller reports it loudly)."""
    from .._torch_private.opinfo import opinfo_database

    try:
        db = opinfo_database()
    except ImportError as e:
        return [], f"torch's OpInfo database is not importable ({e}); install expecttest"
    with warnings.catch_warnings():  # deprecation notices of the sampled ops are not ours to show
        warnings.simplefilter("ignore")
        cases = [c for c in _opinfo_pass(db, wanted, seed, samples_per_op, pre_dispatch=False) if c.op in wanted]
        left = wanted - {c.op for c in cases}
        if left:
            cases += [c for c in _opinfo_pass(db, left, seed, samples_per_op, pre_dispatch=True) if c.op in left]
    return cases, ""


def _opinfo_pass(db, wanted: set, seed: int, samples_per_op: int, pre_dispatch: bool) -> list:
    from .._torch_private.tracing import make_fx

    bases = {op.split(".")[1].lstrip("_") for op in wanted}
    cases = []
    for info in db:
        name = info.name.replace("nn.functional.", "").replace(".", "_")
        if not any(b and (b == name or b in name or name in b) for b in bases):
            continue
        # Seeded per OpInfo, so an op's samples are the same whichever other ops are sampled (--op).
        torch.manual_seed(seed + zlib.crc32(info.name.encode()))
        dtype = next((d for d in (torch.float64, torch.int64, torch.bool) if d in info.dtypes), None)
        if dtype is None:
            continue
        diff = info.supports_autograd and not pre_dispatch and dtype.is_floating_point
        try:
            # Run to the end here, outside tracing: a half-consumed generator (or one it
            # delegates to) collected later would run its cleanup under whatever trace is
            # active then (a no_grad exit inside make_fx).
            samples = list(info.sample_inputs("cpu", dtype, requires_grad=diff))[:samples_per_op]
        except Exception:  # noqa: BLE001  (a sample generator that needs more than CPU float64)
            continue
        for sample in samples:
            leaves, spec = torch.utils._pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
            tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            values = [leaves[i].detach().clone() for i in tensors]

            def program(*ts, _leaves=leaves, _tensors=tensors, _spec=spec, _op=info.op, _diff=diff):
                flat = list(_leaves)
                for k, i in enumerate(_tensors):
                    flat[i] = ts[k]
                x, args, kwargs = torch.utils._pytree.tree_unflatten(flat, _spec)
                out = _op(x, *args, **kwargs)
                outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
                grads = ()
                need = [t for t in ts if t.requires_grad]
                floating = [o for o in outs if o.is_floating_point() and o.requires_grad]
                if _diff and need and floating:
                    g = [torch.cos(torch.arange(o.numel(), dtype=o.dtype) * 1.3).reshape(o.shape) for o in floating]
                    grads = tuple(x for x in torch.autograd.grad(floating, need, g, allow_unused=True)
                                  if x is not None)
                return tuple(outs) + grads

            try:
                inputs = [v.requires_grad_() if diff and v.is_floating_point() else v for v in values]
                gm = make_fx(program, pre_dispatch=pre_dispatch)(*inputs)
                cases += cases_from_graph(gm, [v.detach().clone() for v in values], f"opinfo:{info.name}")
            except Exception:  # noqa: BLE001  (samples torch itself marks as failing for some ops)
                continue
    return cases
