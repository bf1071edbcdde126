"""Collectives merged into flat buffers: DDP's gradient buckets, FSDP2's flat gathers and
reduce-scatters.

C++ (core/collective_buckets.h) decides which collectives of a rank program share a
bucket -- one kind, reduce op, group and dtype, packed in the order their inputs become
ready, up to a byte cap, never two whose results feed each other. This module describes
the graph to it (one call per graph) and rewrites each bucket: the members' inputs are
copied into one flat buffer, one collective runs on it, and each member's result is a
view of (all-gather: a copy out of) the result, as DDP's reducer and FSDP2's copy-in /
copy-out do. The nodes added are
data movement for the overlap schedule (schedule.py, run after this): the copy-in
travels with the collective, the unpacking with the wait.

Reductions (all-reduce, reduce-scatter) are bucketed in the order their inputs --
gradients -- become ready; nothing waits for them until the step ends. An all-reduce's
first bucket holds 1 MiB, as DDP's does, so it is issued while backward still runs. An
average joins a bucket of sums and is divided after. So are the gathers
whose results only the graph's outputs read (a weight gradient sharded by its matmul and
gathered to its replicated parameter). Parameter
all-gathers are all ready at the start of a graph, so that packing would gather every
parameter up front and leave nothing to overlap: they are bucketed per unit instead, as
FSDP2 wraps one block at a time -- a unit is the parameter's FQN up to its first list
index ("layers.3" of "layers.3.attention.wq.weight"), else its module; a unit too small to
pay for a collective joins its neighbour's (_units) -- and the unit's bucket sits where its
first gather was, so the overlap schedule prefetches units in the
order they are used (forward: first layer first; backward: last layer first).

Gradient reduce-scatters (FSDP2's plan) are bucketed per unit too, as FSDP2 reduces each
unit's gradients once its backward is done: a bucket of several units keeps their
unsharded gradients alive until the last is made, plus the flat buffer (and on gloo, the
backend's copy of it) -- on FSDP2's plan of the padded MLP over 2x2, 121 MiB a rank against
FSDP2's 71 MiB. Gradient all-reduces (DDP's plan) keep DDP's byte-capped buckets across
modules: their gradients are held whole either way.
"""
from __future__ import annotations

import heapq
import operator

import torch
import torch.fx as fx

from .. import _C
from .._torch_private import fake_tensors
from .groups import group_size
from .schedule import REGION_META, SAME_VALUES, apply_order, describe, is_wait, node_bytes
from .recompile import recompile

aten = torch.ops.aten
_c10d = torch.ops._c10d_functional
_KINDS = {_c10d.all_reduce.default: "all_reduce", _c10d.reduce_scatter_tensor.default: "reduce_scatter",
          _c10d.all_gather_into_tensor.default: "all_gather"}

# DDP's default bucket_cap_mb: large enough to amortise a collective's fixed cost, small
# enough that the first buckets are issued while backward still computes.
DEFAULT_BUCKET_CAP_MB = 25
DEFAULT_BUCKET_BYTES = DEFAULT_BUCKET_CAP_MB * 2**20
# DDP's first gradient bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES, 1 MiB): the
# last layers' gradients are reduced while the rest of backward runs, instead of every
# gradient of a small model waiting for one bucket at the end.
FIRST_BUCKET_BYTES = 2**20
# A gather unit below this many bytes shares a neighbour's bucket (_units; the rule and its
# reason: core/gather_units.h, which the cost model prices gathers with too).
SMALL_UNIT_BYTES = _C.SMALL_UNIT_BYTES


def gather_unit(fqn: str) -> str:
    """The unit whose parameters are gathered together: the FQN up to its first list index
    (a ModuleList / Sequential item: a transformer block), else the parameter's module."""
    return _C.gather_unit(fqn)


# What lies between a parameter and its gather: views and copies, and on a rank whose shard
# is shorter than the others (uneven sizes) the zero padding that evens it out. The walk must
# reach the parameter on every rank alike: a gather bucketed on some ranks and issued on its
# own on others is a collective mismatch (gloo: "Received data size doesn't match").
_TO_GATHERED_PARAM = SAME_VALUES | {aten.constant_pad_nd.default}


def _source_param(node: fx.Node, params: dict):
    """The parameter FQN `node` is a view, copy or padded shard of, or None."""
    while node.op == "call_function" and node.target in _TO_GATHERED_PARAM:
        node = node.args[0]
    return params.get(node.name) if node.op == "placeholder" else None


def _relayout(user: fx.Node, node: fx.Node) -> bool:
    """`user` reads `node` alone and keeps its elements (a view, cast, transpose or copy)."""
    out, src = user.meta.get("val"), node.meta.get("val")
    inputs = [a for a in user.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
    return (user.op == "call_function" and inputs == [node] and isinstance(out, torch.Tensor)
            and isinstance(src, torch.Tensor) and out.numel() == src.numel())


def _only_feeds_outputs(node: fx.Node, seen: dict) -> bool:
    """Whether every reader of `node`, through re-layouts of it (_relayout), is the graph's
    output: nothing in the graph waits for its value (a gradient)."""
    if node not in seen:
        seen[node] = False  # a DAG: only guards the recursion
        seen[node] = bool(node.users) and all(
            user.op == "output" or (_relayout(user, node) and _only_feeds_outputs(user, seen)) for user in node.users)
    return seen[node]


def _gradient_unit(node: fx.Node, grad_params: dict):
    """The gather unit of the parameter whose gradient `node`'s result becomes -- the graph
    output it reaches through ops that read it alone (waits, views, a cut-off padding: the
    same path on every rank) -- or None where it reaches no parameter's gradient, or
    several units'."""
    units, frontier, seen = set(), [node], set()
    while frontier:
        x = frontier.pop()
        for user in x.users:
            if user.op == "output":
                units |= {gather_unit(grad_params[j]) for j, a in enumerate(user.args[0])
                          if a is x and j in grad_params}
            elif user.op == "call_function" and user not in seen and [
                    a for a in user.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)] == [x]:
                seen.add(user)
                frontier.append(user)
    return units.pop() if len(units) == 1 else None


def _units(nodes, params: dict, grad_params: dict) -> dict:
    """{collective: its unit's bucket label} for parameter gathers (the parameter's gather
    unit) and gradient reduce-scatters (the unit whose gradient it makes).

    A unit too small to pay for a collective of its own shares its neighbour's: in the order
    each kind's units first appear in the graph (the order they are used, or their gradients
    made), a unit joins the group before it when either holds under SMALL_UNIT_BYTES. A
    model's root-level modules (position table, norm, a small head) are units of their own,
    and each cost a gather in forward, another in backward and a reduce-scatter: on the
    step-time MoE over 4 gloo ranks, 10 gathers and 6 reduce-scatters a step against
    FSDP2's 6 and 3 (its root wrap holds them together), our program on FSDP2's plan 1.07x
    its step. Large units (a big vocabulary's embedding) keep their own bucket, so nothing
    large is gathered earlier or held longer. Sizes are the gathered output and the full
    gradient, the same on every rank (uneven shards are padded), so every rank groups alike."""
    unit_of, order = {}, {}  # order: kind -> {unit: bytes}, units in first-appearance order
    for n in nodes:
        kind = _KINDS.get(n.target)
        if kind == "all_gather" and n.args and isinstance(n.args[0], fx.Node):
            fqn = _source_param(n.args[0], params)
            unit, nbytes = (None, 0) if fqn is None else (gather_unit(fqn), node_bytes(n))
        elif kind == "reduce_scatter" and grad_params and n.args and isinstance(n.args[0], fx.Node):
            unit, nbytes = _gradient_unit(n, grad_params), node_bytes(n.args[0])
        else:
            continue
        if unit is not None:
            unit_of[n] = (kind, unit)
            sizes = order.setdefault(kind, {})
            sizes[unit] = sizes.get(unit, 0) + nbytes
    label = {}
    for kind, sizes in order.items():
        units = list(sizes)
        for unit, first in zip(units, _C.small_unit_groups(list(sizes.values()))):
            label[(kind, unit)] = units[first]
    return {n: label[k] for n, k in unit_of.items()}


def _key(node: fx.Node, seen: dict, grad_params: dict, units: dict):
    """What must be equal for two collectives to share a bucket (None: never bucketed)."""
    kind = _KINDS.get(node.target)
    val = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], fx.Node) else None
    if kind is None or not isinstance(val, torch.Tensor) or node.kwargs:
        return None
    if node.meta.get("tlm_unbucketed"):  # issued on its own, early (deferred_loss.py)
        return None
    args = tuple(node.args[1:])  # reduce op and group name (all-reduce); group size and name
    if kind == "all_reduce" and _averages_as_sum(node):  # one bucket with the sums (divided after)
        args = ("sum",) + args[1:]
    key = (kind, val.dtype, val.device.type) + args
    if kind == "all_gather":
        if node in units:  # a parameter's gather: one bucket per unit (_units)
            return key + (units[node],)
        # A gradient gathered into its parameter's placement (a sharded weight gradient to a
        # replicated parameter): bucketed in the order backward makes them, as reductions are,
        # which is how the cost model prices it (core/cost_tables.cpp, gradient_tails).
        return key + ("gradient",) if _only_feeds_outputs(node, seen) else None
    if kind == "reduce_scatter" and grad_params:
        return key + (units[node],) if node in units else key
    return key


def _averages_as_sum(node: fx.Node) -> bool:
    """An all-reduce "avg" over a runtime group of known size: reduced as a sum in a bucket
    of sums and divided by the group size after (a loss's average and its sums in one
    collective instead of two)."""
    val = node.args[0].meta.get("val")
    return (node.args[1] == "avg" and group_size(node.args[2]) is not None and isinstance(val, torch.Tensor)
            and val.is_floating_point())  # an integer average would come back as a float


def bucket_collectives(gm: fx.GraphModule, cap_bytes: int = DEFAULT_BUCKET_BYTES, params=None,
                       grad_params=None) -> int:
    """Merges `gm`'s collectives into buckets of at most `cap_bytes` (in place; recompiles).
    `params`: placeholder name -> parameter FQN (their gathers are bucketed per unit; none
    without it). `grad_params`: a backward graph's output position -> the FQN of the
    parameter whose gradient it is (their reduce-scatters are bucketed per unit). A bucket's flat
    buffer is read by its collective only, so eager programs reduce it in place
    (reduce_in_place.py). Returns the number of buckets formed."""
    params, grad_params = dict(params or {}), dict(grad_params or {})
    nodes, kinds, offsets, inputs, nbytes = describe(gm)
    key_ids, keys, seen = {}, [], {}
    units = _units(nodes, params, grad_params)
    for n, k in zip(nodes, kinds):
        key = _key(n, seen, grad_params, units) if k == "S" else None
        keys.append(-1 if key is None else key_ids.setdefault(key, len(key_ids)))
    if not key_ids:
        return 0
    # The cap counts the larger of a collective's input and output, as DDP and FSDP2 count a
    # bucket by its full gradients and the cost model prices a member's share of it
    # (core/cost_tables.cpp): by its output alone, a reduce-scatter bucket took world-size
    # times the cap and every gradient waited for the end of backward.
    nbytes = [max(b, node_bytes(n.args[0])) if b and n.args and isinstance(n.args[0], fx.Node) else b
              for n, b in zip(nodes, nbytes)]
    first_caps = [FIRST_BUCKET_BYTES if key[0] == "all_reduce" and cap_bytes > FIRST_BUCKET_BYTES else 0
                  for key in key_ids]  # dicts keep insertion order: index = key id
    bucket_of = _C.collective_buckets(kinds, offsets, inputs, nbytes, keys, int(cap_bytes), first_caps)
    buckets: dict = {}
    for n, b in zip(nodes, bucket_of):
        if b >= 0:
            buckets.setdefault(b, []).append(n)
    if not buckets:
        return 0
    wait_of = {n.args[0]: n for n in nodes if is_wait(n)}
    mode = fake_tensors.fake_mode_of([n.meta["val"] for n in nodes if isinstance(n.meta.get("val"), torch.Tensor)])
    for b in sorted(buckets):  # positions afresh: a bucket's input may be an earlier bucket's result
        _merge(gm.graph, buckets[b], wait_of, {n: i for i, n in enumerate(gm.graph.nodes)}, mode)
    _stable_topological_order(gm.graph)
    gm.graph.lint()
    recompile(gm)
    return len(buckets)


class _Builder:
    """Adds nodes after an anchor, each with its fake value and marked as data movement."""

    def __init__(self, graph: fx.Graph, anchor: fx.Node, mode, like: fx.Node):
        self.graph, self.anchor, self.mode = graph, anchor, mode
        self.meta = {k: like.meta[k] for k in REGION_META if k in like.meta}  # from the bucket's first member

    def __call__(self, target, *args, move=True):
        with self.graph.inserting_after(self.anchor):
            node = self.graph.call_function(target, args)
        self.anchor = node
        vals = fx.node.map_arg(args, lambda a: a.meta["val"])
        with self.mode:
            node.meta["val"] = target(*vals)
        node.meta.update(self.meta)
        if move:
            node.meta["tlm_move"] = True  # schedule.node_kind: travels with its collective or wait
        return node

    def flat(self, x: fx.Node, shape) -> fx.Node:
        if not x.meta["val"].is_contiguous():
            x = self(aten.clone.default, x)
        return self(aten.view.default, x, list(shape))


def _merge(graph: fx.Graph, members: list, wait_of: dict, position: dict, mode) -> None:
    kind = _KINDS[members[0].target]
    xs = [m.args[0] for m in members]
    vals = [x.meta["val"] for x in xs]
    # Where the first member was issued, unless a later member's input comes after that:
    # the overlap schedule issues collectives that are ready together in graph order.
    first = min(members, key=lambda m: position[m]).prev
    b = _Builder(graph, max(xs + [first], key=lambda x: position[x]), mode, members[0])
    rest = tuple(members[0].args[1:])
    averaged = {m for m in members if kind == "all_reduce" and _averages_as_sum(m)}  # _key: averages join sums
    if averaged:
        rest = ("sum",) + rest[1:]
    if kind == "reduce_scatter":  # rows: the group's ranks; each rank keeps its row of every member
        world = int(rest[1])
        flats = [b.flat(x, (world, -1)) for x in xs]
        buf = b(aten.view.default, b(aten.cat.default, flats, 1), [-1])
        sizes = [v.numel() // world for v in vals]
    else:
        buf = b(aten.cat.default, [b.flat(x, (-1,)) for x in xs])
        sizes = [v.numel() for v in vals]
    out = b(_c10d.wait_tensor.default, b(members[0].target, buf, *rest, move=False), move=False)
    if kind == "all_gather":  # rows: the ranks' buffers; a member's result is its column of every row
        pieces = b(aten.split_with_sizes.default, b(aten.view.default, out, [int(rest[0]), -1]), sizes, 1)
    else:
        pieces = b(aten.split_with_sizes.default, out, sizes)
    for k, m in enumerate(members):
        piece = b(operator.getitem, pieces, k)
        if kind == "all_gather":
            piece = b(aten.clone.default, piece)  # the column is strided: one copy out, as FSDP2 does
        result = b(aten.view.default, piece, list(wait_of[m].meta["val"].shape))
        if m in averaged:
            result = b(aten.div.Tensor, result, group_size(m.args[2]))
        wait_of[m].replace_all_uses_with(result)
        graph.erase_node(wait_of[m])
        graph.erase_node(m)


def _stable_topological_order(graph: fx.Graph) -> None:
    """Reorders the graph so every node follows its inputs, keeping the present order
    wherever it is already valid (the merged buckets sit after their last input, their
    former users may sit before it)."""
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    missing = {n: len(set(n.all_input_nodes)) for n in nodes}
    ready = [index[n] for n in nodes if missing[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = nodes[heapq.heappop(ready)]
        order.append(n)
        for u in n.users:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, index[u])
    if len(order) != len(nodes):
        raise RuntimeError("internal error: merging collectives into buckets made the rank program cyclic")
    apply_order(order)
