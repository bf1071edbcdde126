"""One reduction over several mesh dims instead of one per dim.

A value that is Partial on mesh dims a and b and needed Replicate on both (a data-parallel
gradient on a 2-D mesh, above all) is redistributed one mesh dim at a time, as DTensor
does: an all-reduce over dim a's group, then one over dim b's. One all-reduce over the
ranks of both dims gives the same sum (or mean, max, min) in one collective -- what DDP
does over all its ranks -- and moves about half the data. This pass finds such chains in a
rank program (an all-reduce whose input is, through views, copies or transposes, the waited
result of another all-reduce with the same reduce op and no other user) and merges them onto the
runtime's combined group (groups.combined_group_name). Runs before bucketing, so the
merged reductions are bucketed together.

A scaling by a value every rank of both groups holds alike (a number, or the result of an
all-reduce over a group that spans them) may sit between the two: the planner divides a loss's
sum, reduced over one mesh dim, by the global token count, then reduces over the other (the
MoE's planned 2x2 program: three forward reductions, each waiting for the one before).
sum_b(s * sum_a(x)) is s * sum_ab(x), and the same for a mean: the merged reduction takes x
and the scaling follows its wait, so the loss's sums and count go out in one collective.

The same holds for reduce-scatters: a gradient Partial on mesh dims a < b and wanted
S(0) on both (FSDP2's plan on a 2-D mesh) is reduce-scattered over a's group (rank i
keeps piece i of dim 0), then that piece over b's (piece j of it). Where the pieces are
whole, that is piece i x n_b + j of one reduce-scatter over both dims' combined group,
whose ranks are numbered row-major over ascending mesh dims: one collective, moving
(n_a n_b - 1) / (n_a n_b) of the buffer instead of (n_a - 1) / n_a plus (n_b - 1) / (n_a n_b).
Where a's pieces are whole and b cuts them unevenly (a 255-row piece padded to 2 x 128),
every piece of a is padded alike before the one reduce-scatter: the same pieces, the same
padding. Where a cuts unevenly (the gradient padded before a's reduce-scatter), ranks of
a's longest piece pad nothing for b while the others do: they would decide differently,
so such chains are never merged -- decided from the full gradient's padding, which every
rank's graph shares.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .groups import combined_group_name, nested_group_name
from .schedule import MOVES_ELEMENTS, REGION_META, SAME_VALUES, is_wait, node_shape as _shape
from .recompile import recompile

_all_reduce = torch.ops._c10d_functional.all_reduce.default
_reduce_scatter = torch.ops._c10d_functional.reduce_scatter_tensor.default
_aten = torch.ops.aten
# Between two reduce-scatters of whole pieces: squeeze the gathered dim, split dim 0 again.
_RESPLIT = frozenset({_aten.squeeze.dim, _aten.view.default, _aten._unsafe_view.default, _aten.reshape.default,
                      _aten.clone.default, _aten.alias.default, _aten.permute.default})
_PAD = _aten.constant_pad_nd.default


# Between two chained all-reduces, besides SAME_VALUES: MOVES_ELEMENTS. A weight gradient
# computed as a transposed product (transposed_products.py) is reduced over one mesh dim,
# transposed, then reduced over the other -- the same as transposed, then reduced once over
# both.
_BETWEEN_REDUCTIONS = SAME_VALUES | MOVES_ELEMENTS
# Scalings that commute with a sum or a mean over ranks where every rank scales alike.
_SCALINGS = frozenset({_aten.mul.Tensor, _aten.div.Tensor})


def _same_on_every_rank(v, groups) -> bool:
    """Whether operand `v` is alike on every rank of `groups`' ranks taken together: a number,
    or (through views) the waited result of an all-reduce over a group spanning them."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    while isinstance(v, fx.Node) and v.op == "call_function" and v.target in SAME_VALUES:
        v = v.args[0]
    if not (isinstance(v, fx.Node) and is_wait(v)):
        return False
    r = v.args[0]
    return isinstance(r, fx.Node) and r.target is _all_reduce and \
        combined_group_name([r.args[2], *groups]) == r.args[2]


def _is_scaling(node: fx.Node) -> bool:
    """`node` scales its first operand by a one-element second one, keeping its shape and dtype."""
    if node.target not in _SCALINGS or len(node.args) != 2 or node.kwargs:
        return False
    out, x, s = node.meta.get("val"), node.args[0], node.args[1]
    xv = x.meta.get("val") if isinstance(x, fx.Node) else None
    sv = s.meta.get("val") if isinstance(s, fx.Node) else s
    if not (isinstance(out, torch.Tensor) and isinstance(xv, torch.Tensor)):
        return False
    one = not isinstance(sv, torch.Tensor) or sv.numel() == 1
    return one and out.shape == xv.shape and out.dtype == xv.dtype and out.dtype.is_floating_point


def _chained_reduction(ar: fx.Node):
    """The all-reduce whose waited result, through value-keeping, element-moving or scaling
    ops with one user each, is `ar`'s input; None if there is none. Returns (that
    all-reduce, the nodes between, nearest to `ar` first, its wait last). Scalings only
    with no element-moving op, by a value alike on both reductions' ranks, in a sum or mean."""
    between, x = [], ar.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and len(x.users) == 1 and (
            x.target in _BETWEEN_REDUCTIONS or _is_scaling(x)):
        between.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and is_wait(x) and len(x.users) == 1):
        return None
    first = x.args[0]
    if first.target is not _all_reduce or len(first.users) != 1 or first.args[1] != ar.args[1]:
        return None
    scalings = [n for n in between if n.target in _SCALINGS]
    if scalings and (ar.args[1] not in ("sum", "avg") or any(n.target in MOVES_ELEMENTS for n in between)
                     or not all(_same_on_every_rank(n.args[1], (first.args[2], ar.args[2])) for n in scalings)):
        return None
    return first, between + [x]  # in erasing order: the node next to `ar` first


def _scale_after(gm: fx.GraphModule, ar: fx.Node, scalings) -> bool:
    """Applies `scalings` (in the order given) to `ar`'s waited result, for every reader of
    it. False (nothing changed) where `ar` has no single wait."""
    waits = list(ar.users)
    if len(waits) != 1 or not is_wait(waits[0]):
        return False
    (wait,) = waits
    readers = list(wait.users)
    out = wait
    for m in scalings:
        with gm.graph.inserting_after(out):
            scaled = gm.graph.call_function(m.target, (out, m.args[1]))
        scaled.meta.update({k: wait.meta[k] for k in ("val", *REGION_META) if k in wait.meta})
        out = scaled
    for r in readers:
        r.replace_input_with(wait, out)
    return True


def fuse_mesh_dim_reductions(gm: fx.GraphModule) -> int:
    """Merges chained per-mesh-dim all-reduces of `gm` (in place; recompiles). Returns how
    many reductions were saved."""
    saved = 0
    for ar in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_reduce]:
        found = _chained_reduction(ar)
        if found is None:
            continue
        first, between = found
        group = combined_group_name([first.args[2], ar.args[2]])
        if group is None:
            continue
        wait = between[-1]
        scalings = [n for n in reversed(between) if n.target in _SCALINGS]  # in the order applied
        if scalings and not _scale_after(gm, ar, scalings):
            continue
        if any(n.target in MOVES_ELEMENTS for n in between):
            # The ops between keep their place and now move the unreduced value; the one
            # reduction after them sums what the two did.
            wait.replace_all_uses_with(first.args[0])
            x, erase = ar.args[0], [wait]
        else:  # values in the same order: the first reduction's input, viewed to `ar`'s shape
            val = ar.args[0].meta.get("val")
            x = first.args[0]
            if val is not None and tuple(x.meta["val"].shape) != tuple(val.shape):
                with gm.graph.inserting_before(ar):
                    x = gm.graph.call_function(_aten.view.default, (x, list(val.shape)))
                    x.meta["val"] = val
            erase = between
        ar.args = (x, ar.args[1], group)
        for n in erase:
            gm.graph.erase_node(n)
        gm.graph.erase_node(first)
        saved += 1
    if saved:
        gm.graph.lint()
        recompile(gm)
    return saved


def _end_padding_of_dim0(pad_node: fx.Node) -> int | None:
    """How many elements `pad_node` (constant_pad_nd) appends to dim 0 of its input, padding
    nothing else; None if it pads anything else."""
    pad, ndim = list(pad_node.args[1]), len(_shape(pad_node.args[0]) or ())
    if len(pad) != 2 * ndim or any(pad[:-1]) or pad[-1] < 0:
        return None
    return int(pad[-1])


def _padded_before(scatter: fx.Node) -> bool:
    """Whether the tensor `scatter` cuts was padded (through re-layouts) to cut it evenly."""
    x = scatter.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target in _RESPLIT:
        x = x.args[0]
    return isinstance(x, fx.Node) and x.op == "call_function" and x.target is _PAD


def _chained_scatter(inner: fx.Node):
    """(outer reduce-scatter, the nodes between, nearest to `inner` first, its wait last,
    the padding's node or None) when `inner`'s input is the outer one's waited piece split
    again along dim 0 (whole pieces, or padded at the end, no other reader); else None."""
    between, x, pad = [], inner.args[0], None
    while isinstance(x, fx.Node) and x.op == "call_function" and (x.target in _RESPLIT or x.target is _PAD) \
            and len(x.users) == 1:
        if x.target is _aten.permute.default and list(x.args[1]) != list(range(len(x.args[1]))):
            return None  # a piece of another dim than 0
        if x.target is _PAD:
            if pad is not None or _end_padding_of_dim0(x) is None:
                return None
            pad = x
        between.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and is_wait(x) and len(x.users) == 1):
        return None
    outer = x.args[0]
    if outer.target is not _reduce_scatter or len(outer.users) != 1 or outer.args[1] != inner.args[1]:
        return None
    n0, n1 = int(outer.args[2]), int(inner.args[2])
    a, b = _shape(outer.args[0]), _shape(inner.args[0])
    if not a or not b or len(a) != len(b) or a[0] != n0 or b[0] != n1 or a[2:] != b[2:]:
        return None
    added = _end_padding_of_dim0(pad) if pad is not None else 0
    if a[1] + added != n1 * b[1] or added >= b[1] or _padded_before(outer):
        return None
    return outer, between + [x], pad


def fuse_mesh_dim_scatters(gm: fx.GraphModule) -> int:
    """Merges chained per-mesh-dim reduce-scatters of `gm` (in place; recompiles). Returns
    how many were saved."""
    saved = 0
    for inner in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _reduce_scatter]:
        found = _chained_scatter(inner)
        if found is None:
            continue
        outer, between, pad = found
        group = nested_group_name(outer.args[3], inner.args[3])
        if group is None:
            continue
        n = int(outer.args[2]) * int(inner.args[2])
        src = outer.args[0]
        shape = [n] + list(_shape(inner.args[0])[1:])
        region = {k: inner.args[0].meta[k] for k in REGION_META if k in inner.args[0].meta}
        if pad is not None:  # the same padding on every piece of the outer dim: dim 1 of [n_a, piece, ...]
            with gm.graph.inserting_before(inner):
                padded = gm.graph.call_function(_PAD, (src, list(pad.args[1])) + tuple(pad.args[2:]))
            padded.meta.update(region)
            a = list(_shape(src))
            a[1] += _end_padding_of_dim0(pad)
            padded.meta["val"] = src.meta["val"].new_empty(a)
            src = padded
        with gm.graph.inserting_before(inner):
            pieces = gm.graph.call_function(_aten.reshape.default, (src, shape))
        # The region of the node it replaces (Inductor's remat needs backward's nodes in one run).
        pieces.meta.update(region)
        pieces.meta["val"] = src.meta["val"].new_empty(shape)
        inner.args = (pieces, inner.args[1], n, group)
        for node in between:
            gm.graph.erase_node(node)
        gm.graph.erase_node(outer)
        saved += 1
    if saved:
        gm.graph.lint()
        recompile(gm)
    return saved
