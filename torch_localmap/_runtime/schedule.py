"""Overlap of communication with compute in a rank program's FX graph.

The traced program waits for each collective right where it issued it. C++
(core/overlap_schedule.h) reorders the graph so each collective is issued as early as
its inputs allow and waited just before its first use, with the bytes in flight
bounded (the next layers' gathered parameters are prefetched, not all of them at
once); compute keeps its order. This module only describes the graph to C++ and
applies the order it returns: one call per graph.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .. import _C
from .recompile import recompile

aten = torch.ops.aten

# Data movement: views, layout copies and padding -- what a redistribution adds
# around its collective, and what may travel with it.
_MOVE_OPS = frozenset({
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.permute.default, aten.t.default,
    aten.transpose.int, aten.clone.default, aten.constant_pad_nd.default, aten.slice.Tensor,
    aten.narrow.default, aten.alias.default, aten.expand.default, aten.view_as_real.default,
    aten.view_as_complex.default, aten._to_copy.default, aten.select.int, operator.getitem,
})

# Node meta a node added by a graph pass takes from the node it stands beside: which part of
# the step it belongs to. torch's rematerialization pass (run when Inductor compiles a graph)
# needs the backward's nodes to form one contiguous run of autograd_backward nodes.
REGION_META = ("autograd_backward", "custom")

# Ops whose result holds every element of their input, unchanged (views and plain copies):
# a collective commutes with them (fuse_reductions.py) and a parameter read through them is
# still that parameter (bucketing.py).
SAME_VALUES = frozenset({aten.view.default, aten._unsafe_view.default, aten.reshape.default,
                         aten.unsqueeze.default, aten.alias.default, aten.clone.default})
# Ops that only move their input's elements, the same way on every rank: a reduction over
# ranks, taken element by element, commutes with them (fuse_reductions.py,
# reduce_before_transposes.py).
MOVES_ELEMENTS = frozenset({aten.t.default, aten.transpose.int, aten.permute.default})


# On gloo (CPU) meshes, overlap keeps one collective in flight at a time. gloo runs each
# group's collectives on two worker threads at once; with several collectives in flight
# (two all-gathers of one group side by side in the core dumps), a rank died now and then
# with `malloc(): unaligned tcache chunk detected`, in a gloo worker thread. One at a time,
# each collective still overlaps the compute up to the next one, and no rank has died
# (docs/benchmarks_log.md, "The rank abort on gloo ranks"). NCCL serialises a group's
# collectives on its stream: no bound there.
GLOO_INFLIGHT_COLLECTIVES = 1


def is_collective(node: fx.Node) -> bool:
    return node.op == "call_function" and getattr(node.target, "namespace", None) == "_c10d_functional"


def is_wait(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is torch.ops._c10d_functional.wait_tensor.default


def node_shape(node) -> tuple | None:
    """The shape of an FX node's traced value; None for a non-node or a non-tensor value."""
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def node_kind(node: fx.Node) -> str:
    """F (placeholder, output), W (wait), S (collective), M (data movement) or C (compute)."""
    if node.op in ("placeholder", "output", "get_attr"):
        return "F"
    if node.meta.get("tlm_move"):  # a bucket's copy-in and unpacking (bucketing.py)
        return "M"
    if is_wait(node):
        return "W"
    if is_collective(node):
        return "S"
    return "M" if node.target in _MOVE_OPS else "C"


def node_bytes(node: fx.Node) -> int:
    val = node.meta.get("val")
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0


def collective_bytes(gm: fx.GraphModule) -> list:
    return [node_bytes(n) for n in gm.graph.nodes if is_collective(n) and not is_wait(n)]


def describe(gm: fx.GraphModule):
    """The graph as the C++ scheduling passes read it, in one call's worth of arrays: (nodes,
    kinds (one letter per node, node_kind), input offsets, flat inputs, bytes per collective)."""
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    kinds, offsets, inputs, nbytes = [], [0], [], []
    for n in nodes:
        kind = node_kind(n)
        kinds.append(kind)
        inputs.extend(sorted({index[a] for a in n.all_input_nodes}))
        offsets.append(len(inputs))
        nbytes.append(node_bytes(n) if kind == "S" else 0)
    return nodes, "".join(kinds), offsets, inputs, nbytes


def apply_order(order: list) -> None:
    """Moves a graph's nodes into `order` (every node of the graph, once)."""
    anchor = order[0]
    for n in order[1:]:
        anchor.append(n)
        anchor = n


def schedule_overlap(gm: fx.GraphModule, inflight_limit: int | None = None,
                     inflight_collectives: int | None = None) -> fx.GraphModule:
    """Reorders `gm`'s nodes in place for overlap (and recompiles it).

    `inflight_limit`: bytes of collectives issued but not yet waited for; None: twice the
    largest collective (one more in flight while the current one is used, like FSDP's
    prefetch of the next layer); < 0: unbounded. `inflight_collectives`: how many may be in
    flight at once (issuing one more first waits for the oldest); None: no bound. A bound on
    the count replaces the one on bytes (core/overlap_schedule.h says why)."""
    sizes = collective_bytes(gm)
    if not sizes:
        return gm
    nodes, kinds, offsets, inputs, nbytes = describe(gm)
    limit = 2 * max(sizes) if inflight_limit is None else int(inflight_limit)
    count = -1 if inflight_collectives is None else int(inflight_collectives)
    apply_order([nodes[i] for i in _C.overlap_order(kinds, offsets, inputs, nbytes, limit, count)])
    gm.graph.lint()
    recompile(gm)
    return gm
