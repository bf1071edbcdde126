"""Argument schemas of the ops with C++ rules, as torch defines them.

The C++ core is torch-free, so rules decode arguments with a checked-in copy
(csrc/core/strategies/op_schemas.inc, written by tools/gen_op_schemas.py from this
module). The strategy verifier's audit compares what the rules read against this
module, i.e. against torch itself.
"""
from __future__ import annotations

import inspect
import json
import math
import re
from typing import NamedTuple

import torch


class Argument(NamedTuple):
    name: str
    type: str  # torch's schema spelling: "int[]?", "Scalar", "Tensor?"; "Subgraph" / "Any[]" for HOPs
    kwarg_only: bool
    default: str | None  # JSON in the IR's argument encoding (csrc/core/graph.h); None: no default


def load_op_libraries() -> None:
    """Registers the ops outside aten that have rules (when their library is installed)."""
    import torch._higher_order_ops.flex_attention  # noqa: F401
    try:
        import transformers.integrations.moe  # noqa: F401  (registers transformers::grouped_mm_fallback)
    except ImportError:
        pass


def _type(t) -> str:
    """torch's Python spelling of an argument type -> its schema spelling."""
    s = str(t)
    while True:  # innermost first: Optional[List[int]] -> int[]?
        new = re.sub(r"Optional\[([^\[\]]*(?:\[\])*)\]", r"\1?", s)
        new = re.sub(r"List\[([^\[\]]*)\]", r"\1[]", new)
        if new == s:
            break
        s = new
    return s.replace("number", "Scalar")


def _encode(v):
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)  # dtype / layout / memory-format defaults: rules do not read them


def _hop_type(annotation) -> str:
    """A higher-order op's Python annotation -> a schema spelling."""
    s = inspect.formatannotation(annotation)
    if "Callable" in s or "GraphModule" in s:
        return "Subgraph"
    if s.startswith("tuple"):
        return "Any[]"
    return {"torch.Tensor": "Tensor", "torch.Tensor | None": "Tensor?", "float": "float", "int": "int",
            "bool": "bool"}.get(s, "Any")


def _hop_arguments(hop) -> list:
    # HOPs have no FunctionSchema; their __call__ signature is the authority on names.
    params = list(inspect.signature(type(hop).__call__).parameters.values())[1:]  # drop self
    return [Argument(p.name, _hop_type(p.annotation), p.kind == p.KEYWORD_ONLY,
                     None if p.default is p.empty else json.dumps(_encode(p.default))) for p in params]


def op_returns(op: str) -> int | None:
    """How many values `op` returns, or None when that count is not fixed: a `Tensor[]`
    return (split, unbind), an op torch does not know, or a higher-order op. HOPs have
    no FunctionSchema, and their output tuples grew across torch versions (flex_attention
    gained max_scores); their rules iterate over the outputs the node has."""
    if op.count(".") == 1:
        return None
    ns, name, overload = op.split(".", 2)
    try:
        returns = getattr(getattr(getattr(torch.ops, ns), name), overload)._schema.returns
    except (AttributeError, RuntimeError):
        return None
    if any(isinstance(r.type, torch.ListType) for r in returns):
        return None
    return len(returns)


def op_arguments(op: str) -> list | None:
    """The arguments of `op` ("aten.mm.default", "higher_order.flex_attention"), or None when torch has no such op."""
    if op.count(".") == 1:
        ns, name = op.split(".")
        hop = getattr(getattr(torch.ops, ns, None), name, None) if ns == "higher_order" else None
        return _hop_arguments(hop) if hop is not None else None
    ns, name, overload = op.split(".", 2)
    try:
        args = getattr(getattr(getattr(torch.ops, ns), name), overload)._schema.arguments
    except (AttributeError, RuntimeError):
        return None
    return [Argument(a.name, _type(a.type), a.kwarg_only,
                     json.dumps(_encode(a.default_value)) if a.has_default_value() else None) for a in args]
