"""The joint graph reordered so values live no longer than their uses need.

Tracing records ops where the Python ran them, which is not always where a training
runtime would run them, and the planner's memory model (and the rank program) follows
the graph's order:
- a wrapper that casts every parameter up front (mixed precision, `CastParameters`) puts
  all the casts at the start of forward, so every layer's low-precision weight would be
  live at once; FSDP2 casts (and gathers) a block's weights when the block runs. A cast,
  view or slice of a parameter or buffer (or of such a node) therefore moves to just
  before its first user.
- autograd runs a cast's backward (the gradient's upcast to the reduce dtype) only after
  everything with a higher sequence number, i.e. at the end of backward, so every layer's
  unreduced gradient would be held to the end; FSDP2 reduces each block's gradients when
  the block's backward is done. A cast or view whose value only becomes a parameter's
  gradient, and which alone reads its input, therefore moves to just after that input
  (the runtime then reduces the gradient right there: core/cost_tables.cpp,
  reduced_when_made).
Only pure, deterministic ops move (no mutation, no random draw, no collective), and the
order stays topological; compute order is otherwise unchanged.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ._torch_private import descriptors, node_meta
from ._runtime.schedule import apply_order
from ._torch_private.op_types import OpOverload


def _movable(node: fx.Node) -> bool:
    if node.op != "call_function" or not node.all_input_nodes:
        return False
    t = node.target
    if t is operator.getitem:
        return True
    if not isinstance(t, OpOverload) or node.is_impure():
        return False
    if t.namespace != "aten" or t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    return True


def tighten_value_lifetimes(gm: fx.GraphModule, output_roles: list) -> int:
    """Reorders `gm` in place as the module docstring says; `output_roles`: the role of each
    graph output ("grad" for a parameter's gradient). Returns how many nodes moved."""
    graph = gm.graph
    nodes = list(graph.nodes)
    out = nodes[-1]
    pos = {n: i for i, n in enumerate(nodes)}
    grad_values = {a for a, r in zip(out.args[0], output_roles) if isinstance(a, fx.Node) and r == "grad"}
    other_outputs = {a for a, r in zip(out.args[0], output_roles) if isinstance(a, fx.Node) and r != "grad"}

    state = {n for n in nodes if n.op == "placeholder" and descriptors.describe_input(n.meta.get("desc"))[0]
             in ("param", "buffer")}
    sink = set()  # a cast, view or slice of a parameter or buffer: just before its first user
    for n in nodes:
        if _movable(n) and len(n.all_input_nodes) == 1 and (n.all_input_nodes[0] in state or n.all_input_nodes[0] in sink):
            sink.add(n)
    hoist = set()  # a cast or view that only becomes a gradient: just after its input
    for n in reversed(nodes):
        if n in sink or not _movable(n) or len(n.all_input_nodes) != 1 or n.all_input_nodes[0] in sink or not n.users:
            continue
        if len(n.all_input_nodes[0].users) != 1:  # moved up, it would free nothing and live longer
            continue
        if all((u is out and n in grad_values and n not in other_outputs) or u in hoist for u in n.users):
            hoist.add(n)
    # A graph output made from state alone (a buffer's update) stays in forward, where it is.
    sink = {n for n in sink if out not in n.users}

    # Never across forward's end: the partitioner splits the graph by each node's phase.
    before, after = {}, {}  # unmoved anchor -> moved nodes placed right before / after it
    anchor = {}
    for n in reversed(nodes):
        if n in sink:
            a = min((anchor[u] if u in sink else u for u in n.users), key=pos.__getitem__)
            if node_meta.is_backward_node(a) != node_meta.is_backward_node(n):
                sink.discard(n)
                continue
            anchor[n] = a
            before.setdefault(a, []).append(n)
    for n in nodes:
        if n in hoist:
            a = max((anchor[x] if x in hoist else x for x in n.all_input_nodes), key=pos.__getitem__)
            # Not up among the placeholders (a bias gradient summed from a tangent alone).
            if a.op == "placeholder" or node_meta.is_backward_node(a) != node_meta.is_backward_node(n):
                hoist.discard(n)
                continue
            anchor[n] = a
            after.setdefault(a, []).append(n)
    order = []
    for n in nodes:
        if n in sink or n in hoist:
            continue
        order.extend(sorted(before.get(n, ()), key=pos.__getitem__))
        order.append(n)
        order.extend(sorted(after.get(n, ()), key=pos.__getitem__))
    moved = sum(1 for i, n in enumerate(order) if n is not nodes[i])
    if moved:
        apply_order(order)
        graph.lint()
        gm.recompile()
    return moved
