"""Which rules go unverified and why, and the audit of the (position, name) argument reads
rules make against torch's op schemas."""
from __future__ import annotations

from .. import _C


# Rules no CPU instance can exercise (their kernels run on CUDA only), with the reason.
CUDA_ONLY_OPS = {
    "aten._fused_rms_norm_backward.default": "no CPU kernel (CPU autograd decomposes rms_norm)",
    "aten._scaled_dot_product_flash_attention.default": "flash attention has a CUDA kernel only",
    "aten._scaled_dot_product_flash_attention_backward.default": "flash attention has a CUDA kernel only",
    "aten._scaled_dot_product_efficient_attention.default": "memory-efficient attention has a CUDA kernel only",
    "aten._scaled_dot_product_efficient_attention_backward.default": "memory-efficient attention has a CUDA kernel only",
}


# Higher-order ops take subgraph arguments, which these single-op cases cannot carry; their
# rules are checked strategy by strategy against the unsharded op in the named test.
VERIFIED_BY_TESTS = {
    "higher_order.flex_attention": "test/python/test_flex_attention.py checks every strategy on a (2, 2) mesh",
    "higher_order.flex_attention_backward": "no CPU backward (torch 2.13); its GPU test is in "
                                            "test/python/test_flex_attention.py",
}


def unverified_rules(cases: list) -> dict:
    """{op: why} for ops with a C++ rule but no verification case among `cases`."""
    have = {c.op for c in cases}
    out = {}
    for op in _C.ops_with_rules():
        if op in have or op in VERIFIED_BY_TESTS:
            continue
        out[op] = CUDA_ONLY_OPS.get(op, "no instance of the op in the reference models, the hand-made programs "
                                        "or torch's OpInfo samples")
    return out


def schema_mismatches(records) -> list:
    """Lines for rule argument reads whose (position, name) disagree with the op's real schema.

    `records` are `_C.arg_audit_records()` triples (op, position, name): rules read an
    argument by name, and its position comes from the checked-in op_schemas.inc; torch
    (its FunctionSchema, or a higher-order op's signature) is the authority on both.
    """
    from .._op_schemas import load_op_libraries, op_arguments

    load_op_libraries()
    out = []
    for op, pos, name in records:
        if op.startswith(("localmap.", "tlm.")) or "." not in op:
            continue  # our own graph nodes (regions, markers) have no aten schema
        args = op_arguments(op)
        if args is None:
            out.append(f"{op}: rule reads argument {name!r} at position {pos}, but torch has no such op")
            continue
        actual = args[pos].name if pos < len(args) else None
        if actual != name:
            where = f"is {actual!r}" if actual is not None else f"does not exist ({len(args)} arguments)"
            out.append(f"{op}: rule reads argument {name!r} at position {pos}; the schema's argument {pos} {where}")
    return out
