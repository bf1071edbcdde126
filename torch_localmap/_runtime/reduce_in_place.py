"""All-reduces that reduce their input's own buffer where nothing else reads it.

`_c10d_functional.all_reduce(x)` returns a new tensor: it copies x, then reduces the copy in
place. In a rank program most of its inputs are an op's fresh output that nothing else reads
(a row-parallel product's partial sums, a loss's partial sum, a gradient bucket's flat buffer,
bucketing.py), and for those the copy is pure cost -- for a bucket, one more pass over every
gradient: `all_reduce_(x)` reduces x itself and returns it. Measured on the 2-core VM, 4 gloo
ranks, llama's planned 2x2 program: an all-reduce took about 190 us of main-thread CPU
against 100 us in place, 16 of them a step (docs/benchmarks_log.md, 2026-12-03, eleventh
session).

x qualifies when the all-reduce is its only user and its producer is an aten op whose schema
gives that output no alias annotation and mutates nothing: the op allocated it, so no view,
graph input or other value shares its memory. Anything else (a view, a placeholder, a value
read again, an op this module cannot see through) keeps the copy.

For eager programs only: Inductor (ExecutionOptions.compile) is given the functional graph
and makes its own buffer decisions.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .recompile import recompile

_c10d = torch.ops._c10d_functional


def _owns_its_memory(x: fx.Node) -> bool:
    """Whether value `x` is a fresh allocation of the aten op that made it."""
    if x.op != "call_function":
        return False
    index = 0
    producer = x
    if x.target is operator.getitem:  # one output of a multi-output op
        producer, index = x.args[0], x.args[1]
        if not isinstance(producer, fx.Node) or producer.op != "call_function" or not isinstance(index, int):
            return False
    op = producer.target
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return False
    schema = op._schema
    if schema.is_mutable:
        return False
    returns = schema.returns
    if x is producer:
        if len(returns) != 1:
            return False
        ret = returns[0]
    else:
        if index >= len(returns):
            return False  # a list output (split's views, unbind's): its items are views
        ret = returns[index]
    if ret.alias_info is not None:
        return False
    return isinstance(ret.type, torch.TensorType)


def reduce_in_place(gm: fx.GraphModule) -> int:
    """Points each qualifying `all_reduce` of `gm` at `all_reduce_` (in place; recompiles).
    Returns how many."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _c10d.all_reduce.default:
            continue
        x = node.args[0]
        if isinstance(x, fx.Node) and len(x.users) == 1 and _owns_its_memory(x):
            node.target = _c10d.all_reduce_.default
            changed += 1
    if changed:
        recompile(gm)
    return changed
