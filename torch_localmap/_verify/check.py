"""Checking one case on one mesh: every strategy C++ emits, run per coordinate on local inputs
and compared with the op on the global inputs."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

import torch

from .. import _C
from .._ir_export import decode_arg
from .._runtime.random_ops import is_random, run_sharded
from .op_case import OpCase
from .oracle import Layouts, assemble, close, local_inputs


# Ops whose outputs cannot be compared value by value, with the reason. (Random ops the
# runtime runs sharded -- _runtime/random_ops.py -- are verified: every coordinate and
# the reference draw from the same generator state.)
EXCLUDED_OPS = {
    "aten.bernoulli.default": "random: draws from the RNG",
    "aten.randint_like.default": "random: draws from the RNG",
}


# Ops whose output memory is uninitialized: only shapes and dtypes are compared.
SHAPE_ONLY_OPS = {
    "aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default",
    "aten.new_empty_strided.default", "aten.empty_strided.default",
}


def op_callable(op: str):
    ns, name, overload = op.split(".", 2) if op.count(".") >= 2 else (*op.split("."), "default")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload)


def _outputs_of(result, node: dict) -> list:
    if isinstance(result, torch.Tensor):
        return [result]
    positions = (node.get("extra") or {}).get("output_positions")
    if positions is None:
        positions = [i for i, r in enumerate(result) if isinstance(r, torch.Tensor)]
    return [result[p] for p in positions]


@dataclass
class CaseResult:
    strategies: int = 0
    failures: list = field(default_factory=list)
    family: str = ""
    fell_back: bool = False
    skipped: str = ""


def enumerate_case(case: OpCase, mesh_shape) -> dict:
    """Every rule row of the case's node (no planner pruning of Partial inputs)."""
    doc = json.dumps(case.doc(mesh_shape), separators=(",", ":"))
    return json.loads(_C.enumerate_strategies(doc, True, False))[case.node_index]


def verify_case(case: OpCase, mesh_shape, seed: int = 0, strategies: list | None = None,
                layouts: Layouts | None = None) -> CaseResult:
    """Checks every strategy C++ emits for `case` on `mesh_shape` (or the given `strategies`)."""
    res = CaseResult()
    if case.op in EXCLUDED_OPS:
        res.skipped = EXCLUDED_OPS[case.op]
        return res
    layouts = layouts or Layouts()
    ir_json = json.dumps(case.doc(mesh_shape), separators=(",", ":"))
    if strategies is None:
        try:
            # prune_partials=False: on a one-op graph the placeholders never emit a Partial, so
            # the planner's pruning would hide every Partial-input row of the rule.
            entry = json.loads(_C.enumerate_strategies(ir_json, True, False))[case.node_index]
        except (ValueError, RuntimeError) as e:
            res.failures.append(f"FAIL {case.describe()} mesh={list(mesh_shape)}: enumerate_strategies raised "
                                f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            return res
        res.family, res.fell_back = entry.get("family", ""), bool(entry.get("fell_back"))
        strategies = entry["strategies"]
        if res.fell_back:  # replicate-only: no rule to verify
            return res
    fn = op_callable(case.op)
    ref_args, ref_kwargs = _decode(case.node, case.inputs)
    random = is_random(case.op)
    rng_seed = seed + 7919
    if random:
        torch.manual_seed(rng_seed)
    ref_outs = _outputs_of(fn(*ref_args, **ref_kwargs), case.node)
    if case.op in SHAPE_ONLY_OPS:
        ref_outs = [torch.zeros_like(o) for o in ref_outs]
    coords = list(itertools.product(*[range(n) for n in mesh_shape]))
    gen = torch.Generator().manual_seed(seed)
    local_cache = {}
    for s in strategies:
        res.strategies += 1
        label = f"{case.describe()} strategy in={s['inputs']} out={s['outputs']} mesh={list(mesh_shape)}"
        try:
            per_input = []
            for i, (value, spec) in enumerate(zip(case.inputs, s["inputs"])):
                key = (i, spec)
                if key not in local_cache:
                    local_cache[key] = local_inputs(value, spec, mesh_shape, layouts, gen)
                per_input.append(local_cache[key])
            s_json = json.dumps(s)
            outs_by_coord = [dict() for _ in ref_outs]
            for c in coords:
                call = json.loads(_C.local_call_args(ir_json, case.node_index, s_json, list(c)))
                locals_ = [per_input[i][c] for i in range(len(case.inputs))]
                args = decode_arg(call["args"], lambda r: locals_[r[0]])
                kwargs = {k: decode_arg(v, lambda r: locals_[r[0]]) for k, v in call["kwargs"].items()}
                if random:  # the same generator state as the reference: the same global numbers
                    torch.manual_seed(rng_seed)
                    out_shapes = [o["shape"] for o in case.node["outputs"]]
                    result = run_sharded(case.op, fn, args, kwargs, out_shapes, s["outputs"], mesh_shape, c)
                else:
                    result = fn(*args, **kwargs)
                outs = _outputs_of(result, case.node)
                if case.op in SHAPE_ONLY_OPS:  # uninitialized memory: only shapes and dtypes count
                    outs = [torch.zeros_like(o) for o in outs]
                for j, o in enumerate(outs):
                    outs_by_coord[j][c] = o
            for j, (ref, spec) in enumerate(zip(ref_outs, s["outputs"])):
                got, why = assemble(outs_by_coord[j], list(ref.shape), ref.dtype, spec, mesh_shape, layouts)
                if got is None:
                    res.failures.append(f"FAIL {label}: output {j}: {why}")
                    break
                if case.op in SHAPE_ONLY_OPS:
                    continue
                if not close(got, ref):
                    err = (got.double() - ref.double()).abs().max().item() if ref.numel() else 0.0
                    res.failures.append(f"FAIL {label}: output {j} differs from the global op (max abs err {err:.3g})")
                    break
        except Exception as e:  # a strategy whose local call raises is a failed strategy
            res.failures.append(f"FAIL {label}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return res


def _decode(node: dict, inputs: list):
    args = decode_arg(node["args"], lambda r: inputs[r[0]])
    kwargs = {k: decode_arg(v, lambda r: inputs[r[0]]) for k, v in node["kwargs"].items()}
    return args, kwargs
