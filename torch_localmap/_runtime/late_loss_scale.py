"""The mean loss's gradients divided by the global token count late in backward, not at its start.

A rank program's loss is the single-device one: the token losses' sum over the global batch
divided by the global token count. Its backward starts with `nll_loss_backward`, which
divides by that count, so the count's all-reduce is waited for as backward starts: every
rank waits there for the slowest one's forward, a rendezvous DDP and FSDP2 (each rank its
own mean) do not have. On ranks sharing cores it cost 1.10x of a short step, where one
all-reduce waited after the gradients cost nothing (benchmarks/forward_sync.py).

Backward is linear in its seed. So `nll_loss_backward` here divides by the rank's own count
instead, and every gradient that flows only from it is this rank's exact gradient times
global / local count ("scaled"). Ops linear in their scaled inputs (views, products with a
saved value, sums of scaled gradients, the activations' backward formulas) keep a gradient
scaled; before anything else reads one (a sum with another gradient, such as an auxiliary
loss's, a collective, backward's outputs) it is multiplied by local / global count. The
forward no longer waits for the count: it hands backward the all-reduce's unwaited result,
and backward waits for it at the first such multiplication, after the loss head's backward
at least and, on a data-parallel plan, at the first gradient bucket.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .._torch_private import fake_tensors
from .recompile import recompile
from .schedule import REGION_META, is_collective, is_wait

aten = torch.ops.aten

# Ops linear in their first argument when every other tensor argument is no gradient (a
# saved activation or parameter): views and copies, reductions, and the backward formulas
# of pointwise activations, softmax, norms and embeddings.
_LINEAR_IN_FIRST = frozenset({
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default, aten.clone.default,
    aten.t.default, aten.transpose.int, aten.permute.default, aten.expand.default, aten.squeeze.dim,
    aten.squeeze.default, aten.squeeze.dims, aten.unsqueeze.default, aten.slice.Tensor, aten.select.int,
    aten.contiguous.default, aten._to_copy.default, aten.neg.default, aten.sum.default, aten.sum.dim_IntList,
    aten.div.Tensor, aten.div.Scalar, aten.mul.Scalar, aten.threshold_backward.default, aten.tanh_backward.default,
    aten.sigmoid_backward.default, aten.silu_backward.default, aten.gelu_backward.default,
    aten._softmax_backward_data.default, aten._log_softmax_backward_data.default,
    aten.native_layer_norm_backward.default, aten.embedding_dense_backward.default,
    aten.slice_backward.default, aten.select_backward.default, aten.split_with_sizes.default, aten.split.Tensor,
    operator.getitem,
})
# Ops linear in either argument where the other is no gradient.
_LINEAR_IN_EITHER = frozenset({aten.mul.Tensor, aten.mm.default, aten.bmm.default, aten.matmul.default})
# Ops linear in all their tensor arguments together: scaled only when every one is scaled.
_LINEAR_IN_ALL = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.cat.default})

_SCALED, _GRADIENT, _OTHER = "scaled", "gradient", "other"


def _mean_nll_backward(bw: fx.GraphModule):
    """The backward's only `nll_loss_backward` of a mean without class weights whose token
    count is a saved value, or None."""
    found = [n for n in bw.graph.nodes if n.op == "call_function" and n.target is aten.nll_loss_backward.default]
    if len(found) != 1:
        return None
    nll = found[0]
    if len(nll.args) != 7:
        return None
    grad, _, target, weight, reduction, _, total_weight = nll.args
    if weight is not None or reduction != 1 or not isinstance(target, fx.Node):
        return None
    if not isinstance(total_weight, fx.Node) or total_weight.op != "placeholder" or set(total_weight.users) != {nll}:
        return None  # the saved count is what forward reduced, read by the loss's backward alone
    return nll


def _saved_position(bw: fx.GraphModule, placeholder: fx.Node) -> int | None:
    """`placeholder`'s position among the backward's saved values (its inputs before the tangents)."""
    saved = [n for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    return saved.index(placeholder) if placeholder in saved else None


def _waited_chain(value):
    """For a forward value made from a collective's result by its wait and views or splits
    alone: (the collective, those ops from the wait on); else None."""
    chain = []
    node = value
    while isinstance(node, fx.Node) and node.op == "call_function" and not is_wait(node):
        if node.target not in (aten.view.default, aten._unsafe_view.default, aten.reshape.default,
                               aten.alias.default, aten.split_with_sizes.default, aten.split.Tensor,
                               operator.getitem):
            return None
        if any(isinstance(a, fx.Node) for a in list(node.args[1:]) + list(node.kwargs.values())):
            return None
        chain.append(node)
        node = node.args[0]
    if not (isinstance(node, fx.Node) and is_wait(node) and isinstance(node.args[0], fx.Node)
            and is_collective(node.args[0])):
        return None
    chain.append(node)
    return node.args[0], chain[::-1]


def _forward_count(fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int):
    """(the backward's mean nll_loss_backward, the forward's output slot of its count, that
    count's collective and waited chain), or None where the count is not read that way."""
    nll = _mean_nll_backward(bw)
    if nll is None:
        return None
    k = _saved_position(bw, nll.args[6])
    if k is None:
        return None
    output = next(n for n in fw.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    slot = num_fwd_outputs + k
    if slot >= len(outs):
        return None
    found = _waited_chain(outs[slot])
    if found is None:
        return None
    return nll, slot, found[0], found[1]


def scales_late(fw: fx.GraphModule, bw: fx.GraphModule) -> bool:
    """Whether `scale_loss_gradients_late` can apply once the collectives are bucketed: the
    backward has one mean nll_loss_backward whose count is saved from a reduction's wait (so
    the count need not be reduced early, deferred_loss.count_targets_early)."""
    nll = _mean_nll_backward(bw)
    return nll is not None and _saved_position(bw, nll.args[6]) is not None


def _rescaled_reads(bw: fx.GraphModule, nll: fx.Node):
    """Per backward node that reads a scaled value it must not (in graph order), those
    scaled inputs; None where a scaled value reaches a read that cannot be rescaled (a tuple
    read whole). Each node is scaled, another gradient, or no gradient."""
    kind, rescale = {}, {}
    for n in bw.graph.nodes:
        if n.op == "placeholder":
            kind[n] = _GRADIENT if n.name.startswith("tangents") else _OTHER
            continue
        if n is nll:
            kind[n] = _SCALED
            continue
        inputs = list(n.all_input_nodes)
        kinds = {kind[a] for a in inputs}
        if _SCALED not in kinds:
            kind[n] = _GRADIENT if _GRADIENT in kinds else _OTHER
            continue
        if n.op == "call_function" and _keeps_scaled(n, kind):
            kind[n] = _SCALED
            continue
        # Every scaled input read here is rescaled first (a tuple cannot be).
        if any(kind[a] == _SCALED and isinstance(a.meta.get("val"), (list, tuple)) for a in inputs):
            return None
        rescale[n] = [a for a in inputs if kind[a] == _SCALED]
        kind[n] = _GRADIENT if n.op != "output" else _OTHER
    return rescale


def _keeps_scaled(n: fx.Node, kind: dict) -> bool:
    """Whether `n`'s result is scaled when its scaled inputs are: linear in them, and reading
    no unscaled gradient."""
    if is_collective(n):
        return False  # each rank's scale differs: a reduction over ranks mixes them
    node_args = [a for a in n.args if isinstance(a, fx.Node)]
    if any(isinstance(v, fx.Node) for v in n.kwargs.values()):
        return False
    if any(kind[a] == _GRADIENT for a in n.all_input_nodes):
        return False
    reads = [a for a in pytree.tree_leaves((n.args, n.kwargs)) if isinstance(a, fx.Node)]
    if n.target in _LINEAR_IN_FIRST:
        first = n.args[0] if n.args else None
        # The scaled value read once, first: div(g, g) or mul(g, g) is no linear map of g.
        return isinstance(first, fx.Node) and kind[first] == _SCALED and \
            sum(1 for a in reads if kind[a] == _SCALED) == 1
    if n.target in _LINEAR_IN_EITHER:
        scaled = [a for a in node_args if kind[a] == _SCALED]
        return len(scaled) == 1 and node_args.count(scaled[0]) == 1 and len(n.args) == 2
    if n.target in _LINEAR_IN_ALL:
        if n.target is aten.cat.default:
            parts = n.args[0]
            return all(isinstance(p, fx.Node) and kind[p] == _SCALED for p in parts)
        a, b = n.args[0], n.args[1]
        alpha_ok = all(not isinstance(v, fx.Node) for v in list(n.args[2:]) + list(n.kwargs.values()))
        return isinstance(a, fx.Node) and isinstance(b, fx.Node) and kind[a] == _SCALED and kind[b] == _SCALED \
            and alpha_ok
    return False


def scale_loss_gradients_late(fw: fx.GraphModule, bw: fx.GraphModule, num_fwd_outputs: int) -> bool:
    """Rewrites `fw` and `bw` (in place; recompiles) as the module docstring says. False, and
    nothing changed, where the loss is not a single mean nll_loss whose count the forward
    reduces and saves, or a scaled gradient reaches a read that cannot be rescaled."""
    found = _forward_count(fw, bw, num_fwd_outputs)
    if found is None:
        return False
    nll, slot, collective, chain = found
    rescale = _rescaled_reads(bw, nll)
    if rescale is None:
        return False
    saved_count = nll.args[6]
    graph = bw.graph
    count_val = saved_count.meta.get("val")
    if not isinstance(count_val, torch.Tensor):
        return False
    mode = fake_tensors.fake_mode_of([count_val])

    def meta_from(node, like):
        node.meta.update({k: like.meta[k] for k in REGION_META if k in like.meta})

    # The rank's own count of targets other than ignore_index (at least 1: a rank whose every
    # target is ignored has zero gradients either way), read by nll_loss_backward instead.
    target, ignore = nll.args[2], nll.args[5]
    with graph.inserting_before(nll):
        kept = graph.call_function(aten.ne.Scalar, (target, ignore))
        local = graph.call_function(aten.sum.default, (kept,), {"dtype": count_val.dtype})
        local_at_least_1 = graph.call_function(aten.clamp_min.default, (local, 1))
    with mode:
        kept.meta["val"] = aten.ne.Scalar(target.meta["val"], ignore)
        local.meta["val"] = aten.sum.default(kept.meta["val"], dtype=count_val.dtype)
        local_at_least_1.meta["val"] = aten.clamp_min.default(local.meta["val"], 1)
    for x in (kept, local, local_at_least_1):
        meta_from(x, nll)
    nll.args = nll.args[:6] + (local_at_least_1,)

    # The forward saves the count's reduction unwaited; backward rebuilds the count from it
    # (its wait, then the bucket's split and views) right before the first rescaling.
    output = next(n for n in fw.graph.nodes if n.op == "output")
    outs = list(output.args[0])
    outs[slot] = collective
    output.args = (tuple(outs),) + tuple(output.args[1:])
    for c in reversed(chain):  # a wait nothing else reads would still hold the forward
        if not c.users:
            fw.graph.erase_node(c)
    saved_count.meta["val"] = collective.meta.get("val")
    first = next(iter(rescale), None)  # readers are listed in graph order
    ratio = None
    if first is not None:
        env = {collective: saved_count}
        with graph.inserting_before(first):
            for c in chain:
                env[c] = graph.node_copy(c, lambda a: env[a])
            count = env[chain[-1]]
            count_at_least_1 = graph.call_function(aten.clamp_min.default, (count, 1))
            ratio = graph.call_function(aten.div.Tensor, (local_at_least_1, count_at_least_1))
        with mode:
            count_at_least_1.meta["val"] = aten.clamp_min.default(count_val, 1)
            ratio.meta["val"] = aten.div.Tensor(local_at_least_1.meta["val"], count_at_least_1.meta["val"])
        for x in (count_at_least_1, ratio):
            meta_from(x, first)

    rescaled = {}
    for reader, inputs in rescale.items():
        for a in inputs:
            if a not in rescaled:
                with graph.inserting_before(reader):
                    m = graph.call_function(aten.mul.Tensor, (a, ratio))
                with mode:
                    m.meta["val"] = aten.mul.Tensor(a.meta["val"], ratio.meta["val"])
                meta_from(m, a)
                rescaled[a] = m
            reader.replace_input_with(a, rescaled[a])
    graph.lint()
    fw.graph.lint()
    recompile(bw)
    recompile(fw)
    return True
