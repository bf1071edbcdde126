"""One all-gather over several mesh dims instead of one per dim.

A parameter FSDP2-sharded over a 2-D mesh is S(d) on both mesh dims (its dim d cut by mesh
dim 0, each piece cut again by mesh dim 1). DTensor gathers it one mesh dim at a time: over
the inner dim's group, a copy that folds the pieces into dim d, then over the outer dim's
group. Where every piece is whole (no padding), the pieces a rank holds are numbered
outer x inner in row-major order -- the order of the runtime's combined group over both
dims (groups.py) -- so one all-gather there of the rank's own piece, folded once, is the
same tensor: one collective instead of two and no intermediate copy, as FSDP2 gathers
over its flattened mesh. Runs before bucketing, so the merged gathers bucket together.

Where the outer dim cuts evenly and the inner one does not (510 rows over 2x2: outer
pieces of 255, inner ones of 128 and 127, the short one padded to 128), every rank still
sends one padded inner piece of the same size: one gather over both dims, viewed as
outer x (inner x piece) and cut back to the outer piece, is the same tensor, with the one
copy the two gathers made between them. Where the outer dim cuts unevenly, ranks of the
longest outer piece see no padding of their own while the others pad: each rank would
decide differently, so such gathers are never merged. That is decided from what every
rank's graph shares -- the gathered tensor cut back to its true size after the outer
gather -- never from a rank's own piece.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .groups import nested_group_name
from .schedule import is_wait, node_shape as _shape
from .recompile import recompile

_all_gather = torch.ops._c10d_functional.all_gather_into_tensor.default
_aten = torch.ops.aten
# A gather's fold is movedim(0, d) (permute, shape from its input), a copy, and a flatten
# (a view to a shape it names); unsqueeze(0) readies the next gather. Any other op between
# two gathers (padding, narrowing) keeps both.
_SHAPE_KEEPING = frozenset({_aten.permute.default, _aten.clone.default, _aten.alias.default})
_SHAPE_GIVEN = frozenset({_aten.view.default, _aten._unsafe_view.default, _aten.reshape.default})
_REFOLD = _SHAPE_KEEPING | _SHAPE_GIVEN  # the fold after the last gather
# Between two gathers: the fold, the inner gather's padding cut off (a slice), unsqueeze(0).
_FOLD = _REFOLD | {_aten.unsqueeze.default, _aten.slice.Tensor}


def _gathered_dim(inner_in: tuple, outer_in: tuple, n_inner: int, cut: bool) -> int | None:
    """The tensor dim d the inner gather folded into (outer_in = inner_in with dim d times
    n_inner, less the last piece's padding where `cut`; both shapes carry the gather's
    leading 1), or None."""
    if len(inner_in) != len(outer_in) or inner_in[:1] != (1,) or outer_in[:1] != (1,):
        return None
    diff = [i for i, (a, b) in enumerate(zip(inner_in, outer_in)) if a != b]
    if len(diff) != 1:
        return None
    whole, got = n_inner * inner_in[diff[0]], outer_in[diff[0]]
    if got != whole if not cut else not (whole - inner_in[diff[0]] < got < whole):
        return None
    return diff[0] - 1


def _movedim_perm(ndim: int, d: int) -> list:
    return list(range(1, d + 1)) + [0] + list(range(d + 1, ndim))


def _chain(outer: fx.Node):
    """(inner gather, the fold nodes between its wait and `outer`, nearest to `outer` first,
    the wait last, d, cut) when `outer`'s input is the folded result of another all-gather
    with nothing else reading it; `cut`: the inner pieces were padded and the fold cuts
    the padding off (then only d = 0 merges). Else None."""
    between, x = [], outer.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target in _FOLD and len(x.users) == 1:
        between.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and is_wait(x) and len(x.users) == 1):
        return None
    inner = x.args[0]
    if inner.target is not _all_gather or len(inner.users) != 1:
        return None
    slices = [n for n in between if n.target is _aten.slice.Tensor]
    cut = bool(slices)
    d = _gathered_dim(_shape(inner.args[0]) or (), _shape(outer.args[0]) or (), int(inner.args[1]), cut)
    if d is None or (cut and (d != 0 or len(slices) != 1 or not _cuts_end_of_dim(slices[0], 0))):
        return None
    ndim = len(_shape(x) or ())
    perms = [n for n in between if n.target is _aten.permute.default]
    for n in perms:  # the fold moves the gathered dim 0 to d and nothing else
        if list(n.args[1]) != _movedim_perm(ndim, d):
            return None
    if d != 0 and len(perms) != 1:  # views alone only merge the pieces into dim 0
        return None
    return inner, between + [x], d, cut


def _cuts_end_of_dim(node: fx.Node, d: int) -> bool:
    """`node` (aten.slice.Tensor) keeps the start of dim d: x[..., 0:end] with step 1."""
    dim, start, _end, step = (list(node.args[1:]) + [0, 0, None, 1][len(node.args) - 1:])[:4]
    return dim == d and start in (0, None) and step == 1


def _outer_cut_evenly(outer_wait: fx.Node) -> bool:
    """True when the fold after the outer gather is not cut back to a shorter tensor: the
    outer pieces had no padding, on any rank (the fold's shape is the same on every rank,
    unlike a rank's own piece)."""
    node = outer_wait
    while True:
        if any(u.op == "call_function" and u.target is _aten.slice.Tensor for u in node.users):
            return False
        if len(node.users) != 1:
            return True
        node = next(iter(node.users))
        if node.op != "call_function" or node.target not in _REFOLD:
            return True


def _folded_into(wait: fx.Node, n: int, piece: tuple) -> int | None:
    """The tensor dim the fold after an all-gather's `wait` puts its `n` pieces (each of
    shape `piece`, without the leading 1) into: movedim(0, d) then a view, or a view alone
    for d = 0. None when its one reader is anything else."""
    if len(wait.users) != 1:
        return None
    user = next(iter(wait.users))
    if user.op != "call_function":
        return None
    if user.target is _aten.permute.default:
        perm = list(user.args[1])
        d = perm.index(0) if 0 in perm else -1
        return d if d >= 0 and perm == _movedim_perm(len(perm), d) else None
    if user.target in _SHAPE_GIVEN and _shape(user) == (n * piece[0],) + tuple(piece[1:]):
        return 0
    return None


def _refresh(node: fx.Node) -> None:
    """Recomputes `node`'s meta value from its inputs' (on the meta device)."""
    def meta(a):
        return torch.empty(a.meta["val"].shape, dtype=a.meta["val"].dtype, device="meta") \
            if isinstance(a, fx.Node) else a
    args = fx.node.map_aggregate(node.args, meta)
    kwargs = fx.node.map_aggregate(node.kwargs, meta)
    old = node.meta["val"]
    out = node.target(*args, **kwargs)
    node.meta["val"] = old.new_empty(out.shape) if hasattr(old, "new_empty") else out


def _cut_padding(gm: fx.GraphModule, wait: fx.Node, n_outer: int, piece: tuple) -> None:
    """After a merged gather of padded inner pieces (d = 0): its n_outer x n_inner padded
    pieces viewed as n_outer rows of inner pieces, each cut to the outer piece's length
    and made contiguous -- what the outer gather returned, so its fold reads it as before."""
    _refresh(wait)
    readers = list(wait.users)
    total = _shape(wait)
    rows = [n_outer, total[0] * total[1] // n_outer] + list(total[2:])
    with gm.graph.inserting_after(wait):
        view = gm.graph.call_function(_aten.view.default, (wait, rows))
    with gm.graph.inserting_after(view):
        cut = gm.graph.call_function(_aten.slice.Tensor, (view, 1, 0, piece[0]))
    with gm.graph.inserting_after(cut):
        whole = gm.graph.call_function(_aten.clone.default, (cut,), {"memory_format": torch.contiguous_format})
    for n in (view, cut, whole):
        n.meta["val"] = wait.meta["val"]
        _refresh(n)
    for r in readers:
        r.replace_input_with(wait, whole)


def fuse_mesh_dim_gathers(gm: fx.GraphModule) -> int:
    """Merges chained per-mesh-dim all-gathers of `gm` (in place; recompiles). Returns how
    many gathers were saved."""
    saved = 0
    for outer in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_gather]:
        found = _chain(outer)
        if found is None:
            continue
        inner, between, d, cut = found
        outer_wait = next(iter(outer.users))
        # The outer gather must fold into the same tensor dim (S(d) on both mesh dims; S(d)
        # on one and S(d') on the other is two gathers of different dims).
        if _folded_into(outer_wait, int(outer.args[1]), _shape(outer.args[0])[1:]) != d:
            continue
        if not _outer_cut_evenly(outer_wait):
            continue
        group = nested_group_name(outer.args[2], inner.args[2])
        if group is None:
            continue
        n_outer, piece = int(outer.args[1]), _shape(outer.args[0])[1:]  # the outer piece (cut to size)
        outer.args = (inner.args[0], int(inner.args[1]) * n_outer, group)
        _refresh(outer)
        for n in between:
            gm.graph.erase_node(n)
        gm.graph.erase_node(inner)
        saved += 1
        if cut:
            _cut_padding(gm, outer_wait, n_outer, piece)
            continue
        # The fold after the merged gather: the same ops, now over n_outer x n_inner
        # pieces. Shapes change up to the flatten (a view to the whole tensor's shape).
        node = outer_wait
        _refresh(node)
        while len(node.users) == 1:
            node = next(iter(node.users))
            if node.op != "call_function" or node.target not in _REFOLD:
                break
            _refresh(node)
            if node.target in _SHAPE_GIVEN:
                break
    if saved:
        gm.graph.lint()
        recompile(gm)
    return saved
