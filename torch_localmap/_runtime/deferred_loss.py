"""The loss's reduction over ranks waited for when the loss is read, not at the end of forward.

A rank program returns the single-device loss: the sum of the token losses over the global
batch divided by the global token count, so its forward ends in an all-reduce of the sum and
the count, and every rank waits there for the slowest one's forward. DDP and FSDP2 return each
rank's own mean and have no such point. On CPU ranks sharing cores that wait costs what a
barrier does, 1.1-1.16x of a short step (benchmarks/forward_sync.py); waited later, 1.05x.

Two rewrites of an eager CPU program take the loss's own wait out of forward without giving
up the exact loss (the token count's remains, as the first point says):

- Where backward divides the gradients by the global count late (late_loss_scale.py), the
  count is reduced with the loss's sum at forward's end and nothing waits for it there.
  Elsewhere the count is taken from the targets as the step starts (`count_targets_early`): the
  token count an `nll_loss_forward` without class weights returns is the number of targets
  other than its ignore_index. Its all-reduce is issued before any compute and stays out of
  buckets, so the loss's own reduction is not waited for in forward. Backward's first op
  reads the count, so forward's end still waits for it: a rendezvous with every rank's
  start of forward, which on ranks sharing cores costs about what waiting at once does
  (benchmarks/forward_sync.py, `count` row; docs/benchmarks.md, 2026-12-03).
- The small tail of scalar ops after the loss's wait (the wait itself, the bucket's unpacking,
  sum / count, scalings) leaves the forward graph (`split_output_tails`). The forward returns
  the tail's inputs instead, and the loss the user holds is a `PendingTensor` that runs the
  tail when first read. Autograd's seed gradient (`torch.ones_like(loss)`) only needs the
  loss's shape, so backward starts without it; `loss.item()`, printing or any arithmetic run
  the tail and see the exact value. Before backward issues its first collective the pending
  loss is settled (on gloo two collectives in flight at once have corrupted heaps:
  schedule.GLOO_INFLIGHT_COLLECTIVES), and a program's next call settles whatever is left.
"""
from __future__ import annotations

import contextlib
import operator
import threading

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .._torch_private import autocast, fake_tensors
from .schedule import MOVES_ELEMENTS, REGION_META, SAME_VALUES, is_collective, is_wait
from .recompile import recompile

aten = torch.ops.aten
_all_reduce_kinds = (torch.ops._c10d_functional.all_reduce.default, torch.ops._c10d_functional.all_reduce_.default)

# The ops a loss's tail is made of: the wait, the bucket's unpacking, views and scalar arithmetic.
_TAIL_OPS = frozenset({
    torch.ops._c10d_functional.wait_tensor.default, aten.split_with_sizes.default, aten.split.Tensor,
    operator.getitem, aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.squeeze.dim,
    aten.squeeze.default, aten.unsqueeze.default, aten.alias.default, aten.clone.default, aten.div.Tensor,
    aten.div.Scalar, aten.mul.Tensor, aten.mul.Scalar, aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor,
    aten.neg.default, aten.sum.default, aten.mean.default, aten._to_copy.default,
})
# Views, copies and transposes that keep every element (and only those) of their input.
_SAME_ELEMENTS = SAME_VALUES | MOVES_ELEMENTS | {aten.squeeze.dim, aten.squeeze.default}
# A tail moves scalars (a bucket of a loss's few sums at most); anything larger stays in forward.
_TAIL_MAX_ELEMENTS = 64


def count_targets_early(gm: fx.GraphModule) -> int:
    """Where forward's only collectives reduce a few numbers (data-parallel plans), replaces
    the token count of every `nll_loss_forward` without class weights (its second output) by
    a count of the targets other than ignore_index, computed right after the targets exist,
    and marks that count's all-reduce to stay out of buckets. In place; returns how many
    counts were replaced."""
    if any(is_collective(n) and not is_wait(n) and
           (n.target not in _all_reduce_kinds or not _small(n.args[0].meta.get("val"))) for n in gm.graph.nodes):
        # Gathers or activations' collectives in forward: on gloo they go one at a time in the
        # order their results are read, so the count's reduction would still be issued last,
        # and waited for before backward as part of the loss's bucket it now leaves.
        return 0
    replaced = 0
    for nll in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is aten.nll_loss_forward.default]:
        args = list(nll.args) + [None] * (5 - len(nll.args))
        _, target, weight, reduction, ignore_index = args[:5]
        if weight is not None or reduction not in (1, 2) or not isinstance(target, fx.Node):
            continue
        counts = [u for u in nll.users if u.target is operator.getitem and u.args[1] == 1]
        if len(counts) != 1 or not counts[0].users:
            continue
        (old,) = counts
        val = old.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        ignore = -100 if ignore_index is None else ignore_index
        # A count of all elements: the same through any view of the targets, so from their source.
        while target.op == "call_function" and target.target in _SAME_ELEMENTS and len(target.args) >= 1 \
                and isinstance(target.args[0], fx.Node):
            target = target.args[0]
        where = _after_definition(gm.graph, target)
        mode = fake_tensors.fake_mode_of([target.meta["val"]])
        with gm.graph.inserting_after(where):
            kept = gm.graph.call_function(aten.ne.Scalar, (target, ignore))
        with gm.graph.inserting_after(kept):
            count = gm.graph.call_function(aten.sum.default, (kept,), {"dtype": val.dtype})
        with mode:
            kept.meta["val"] = aten.ne.Scalar(target.meta["val"], ignore)
            count.meta["val"] = aten.sum.default(kept.meta["val"], dtype=val.dtype)
        for n in (kept, count):
            n.meta.update({k: nll.meta[k] for k in REGION_META if k in nll.meta})
        old.replace_all_uses_with(count)
        gm.graph.erase_node(old)
        _mark_reductions_alone(count)
        replaced += 1
    if replaced:
        gm.graph.lint()
        recompile(gm)
    return replaced


def _after_definition(graph: fx.Graph, node: fx.Node) -> fx.Node:
    """Where a node computed from `node` can go first: after it, and after every placeholder."""
    last_placeholder = None
    for n in graph.nodes:
        if n.op == "placeholder":
            last_placeholder = n
    if node.op == "placeholder":
        return last_placeholder
    return node


def _mark_reductions_alone(node: fx.Node) -> None:
    """Marks the all-reduces `node` feeds through views (bucketing.py leaves them unbucketed)."""
    todo = [node]
    while todo:
        n = todo.pop()
        for u in n.users:
            if u.target in _all_reduce_kinds:  # and the reductions after it over other mesh dims
                u.meta["tlm_unbucketed"] = True
                todo.append(u)
            elif is_wait(u) or u.target in SAME_VALUES:
                todo.append(u)


class OutputTail:
    """A forward output computed after the forward graph returns: `graph_module` maps the
    forward's extra outputs `inputs` (their positions among the forward's outputs) to it."""

    def __init__(self, slot: int, graph_module: fx.GraphModule, inputs: list, val: torch.Tensor):
        self.slot, self.graph_module, self.inputs, self.val = slot, graph_module, inputs, val


def _small(val) -> bool:
    vals = val if isinstance(val, (list, tuple)) else [val]
    return all(isinstance(v, torch.Tensor) and v.numel() <= _TAIL_MAX_ELEMENTS for v in vals) and bool(vals)


def split_output_tails(gm: fx.GraphModule, num_fwd_outputs: int) -> list:
    """Moves each forward output's tail (the scalar ops after a collective's wait that only
    make that output) out of `gm` (in place; recompiles). `gm`'s outputs then end with the
    tails' inputs; a moved output's own slot holds None. Returns the OutputTails."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    tails, extra = [], []
    for slot in range(num_fwd_outputs):
        v = outs[slot]
        if not isinstance(v, fx.Node) or outs.count(v) != 1 or not _small(v.meta.get("val")):
            continue
        if v.op != "call_function" or v.target not in _TAIL_OPS or set(v.users) != {output}:
            continue
        members = {v}
        for u in sorted((n for n in position if position[n] < position[v]), key=position.get, reverse=True):
            if u.op == "call_function" and u.target in _TAIL_OPS and u.users and set(u.users) <= members \
                    and _small(u.meta.get("val")):
                members.add(u)
        if not any(is_wait(u) for u in members):
            continue  # nothing to wait for later
        inputs = []
        for u in sorted(members, key=position.get):
            for a in pytree.tree_leaves((u.args, u.kwargs)):
                if isinstance(a, fx.Node) and a not in members and a not in inputs:
                    inputs.append(a)
        tail = fx.Graph()
        env = {}
        for k, a in enumerate(inputs):
            env[a] = tail.placeholder(f"input_{k}")
            env[a].meta.update(a.meta)
        for u in sorted(members, key=position.get):
            env[u] = tail.node_copy(u, lambda n: env[n])
        tail.output(env[v])
        first = len(outs) + len(extra)
        extra += inputs
        tails.append(OutputTail(slot, fx.GraphModule(gm, tail), list(range(first, first + len(inputs))),
                                v.meta["val"]))
        outs[slot] = None
        output.args = (tuple(outs) + tuple(extra),)
        for u in sorted(members, key=position.get, reverse=True):
            gm.graph.erase_node(u)
    if tails:
        gm.graph.lint()
        recompile(gm)
    return tails


def settle_before_first_collective(gm: fx.GraphModule, settle) -> bool:
    """Calls `settle()` in `gm` right before its first collective is issued (in place;
    recompiles). False where `gm` issues none."""
    first = next((n for n in gm.graph.nodes if is_collective(n) and not is_wait(n)), None)
    if first is None:
        return False
    with gm.graph.inserting_before(first):
        gm.graph.call_function(settle, ())
    gm.graph.lint()
    recompile(gm)
    return True


class _Tail:
    """One pending output's tail and inputs; computed once, by whoever reads it first."""

    def __init__(self, graph_module, inputs):
        self._gm, self._inputs, self._value = graph_module, inputs, None
        self._lock = threading.Lock()

    def value(self) -> torch.Tensor:
        with self._lock:
            if self._value is None:
                with torch.no_grad(), autocast.autocast_off():  # read anywhere: the tail's casts are its own
                    self._value = self._gm(*self._inputs)
                self._inputs = None
            return self._value


_SEEDS = frozenset({aten.ones_like.default, aten.zeros_like.default, aten.empty_like.default})
_VIEWS = frozenset({aten.view.default, aten.alias.default, aten._unsafe_view.default, aten.detach.default})
_lazy_views = threading.local()


@contextlib.contextmanager
def lazy_views():
    """Within it, views of a PendingTensor stay pending (DTensor.from_local views the local
    tensor it wraps); anywhere else a view reads the value, so users get plain tensors."""
    before = getattr(_lazy_views, "on", False)
    _lazy_views.on = True
    try:
        yield
    finally:
        _lazy_views.on = before


class PendingTensor(torch.Tensor):
    """A tensor whose value a `_Tail` computes when first read. Only its metadata is known
    before: ones_like / zeros_like / empty_like of it (autograd's seed gradient) do not read it."""

    @staticmethod
    def __new__(cls, tail: _Tail, shape, dtype, device, compute=None):
        r = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device=device)
        r._tail, r._compute = tail, compute
        return r

    def __init__(self, *args, **kwargs):
        super().__init__()

    def value(self) -> torch.Tensor:
        v = self._tail.value()
        return v if self._compute is None else self._compute(v)

    def __repr__(self, *, tensor_contents=None):
        return repr(self.value())

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = args[0] if args else None
        if func in _SEEDS and isinstance(first, PendingTensor):
            return func(torch.empty(first.shape, dtype=first.dtype, device=first.device), *args[1:], **kwargs)
        if func in _VIEWS and isinstance(first, PendingTensor) and getattr(_lazy_views, "on", False):
            meta = func(torch.empty(first.shape, dtype=first.dtype, device="meta"), *args[1:], **kwargs)
            prior = first._compute
            rest = args[1:]

            def compute(v, prior=prior, rest=rest):
                return func(v if prior is None else prior(v), *rest, **kwargs)

            return PendingTensor(first._tail, meta.shape, meta.dtype, first.device, compute)

        def read(x):
            return x.value() if isinstance(x, PendingTensor) else x

        return func(*pytree.tree_map(read, args), **pytree.tree_map(read, kwargs))


def pending_outputs(outs: list, tails: list, lazy: bool) -> tuple:
    """The forward's outputs with each tail's slot filled (`outs`: the forward graph's
    outputs, the tails' inputs at their end): a PendingTensor if `lazy`, else the value now.
    Returns (outputs without the tails' inputs, the pending _Tails)."""
    if not tails:
        return list(outs), []
    n_extra = sum(len(t.inputs) for t in tails)
    body = list(outs[: len(outs) - n_extra])
    pending = []
    for t in tails:
        tail = _Tail(t.graph_module, [outs[i] for i in t.inputs])
        if lazy:
            body[t.slot] = PendingTensor(tail, t.val.shape, t.val.dtype, outs[t.inputs[0]].device)
            pending.append(tail)
        else:
            body[t.slot] = tail.value()
    return body, pending
