"""One all-gather over several mesh dims instead of one per dim.

A parameter FSDP2-sharded over a 2-D mesh is S(d) on both mesh dims (its dim d cut by mesh
dim 0, each piece cut again by mesh dim 1). DTensor gathers it one mesh dim at a time: over
the inner dim's group, a copy that folds the pieces into dim d, then over the outer dim's
group. Where every piece is whole (no padding), the pieces a rank holds are numbered
outer x inner in row-major order -- the order of the runtime's combined group over both
dims (groups.py) -- so one all-gather there of the rank's own piece, folded once, is the
same tensor: one collective instead of two and no intermediate copy, as FSDP2 gathers
over its flattened mesh. Runs before bucketing, so the merged gathers bucket together.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .groups import nested_group_name
from .schedule import is_wait, node_shape as _shape

_all_gather = torch.ops._c10d_functional.all_gather_into_tensor.default
_aten = torch.ops.aten
# A gather's fold is movedim(0, d) (permute, shape from its input), a copy, and a flatten
# (a view to a shape it names); unsqueeze(0) readies the next gather. Any other op between
# two gathers (padding, narrowing) keeps both.
_SHAPE_KEEPING = frozenset({_aten.permute.default, _aten.clone.default, _aten.alias.default})
_SHAPE_GIVEN = frozenset({_aten.view.default, _aten._unsafe_view.default, _aten.reshape.default})
_REFOLD = _SHAPE_KEEPING | _SHAPE_GIVEN  # the fold after the last gather
_FOLD = _REFOLD | {_aten.unsqueeze.default}


def _gathered_dim(inner_in: tuple, outer_in: tuple, n_inner: int) -> int | None:
    """The tensor dim d the inner gather folded into (outer_in = inner_in with dim d times
    n_inner; both shapes carry the gather's leading 1), or None."""
    if len(inner_in) != len(outer_in) or inner_in[:1] != (1,) or outer_in[:1] != (1,):
        return None
    diff = [i for i, (a, b) in enumerate(zip(inner_in, outer_in)) if a != b]
    if len(diff) != 1 or outer_in[diff[0]] != n_inner * inner_in[diff[0]]:
        return None
    return diff[0] - 1


def _movedim_perm(ndim: int, d: int) -> list:
    return list(range(1, d + 1)) + [0] + list(range(d + 1, ndim))


def _chain(outer: fx.Node):
    """(inner gather, the fold nodes between its wait and `outer`, nearest to `outer` first,
    the wait last, d) when `outer`'s input is the folded result of another all-gather
    with nothing else reading it; else None."""
    between, x = [], outer.args[0]
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target in _FOLD and len(x.users) == 1:
        between.append(x)
        x = x.args[0]
    if not (isinstance(x, fx.Node) and is_wait(x) and len(x.users) == 1):
        return None
    inner = x.args[0]
    if inner.target is not _all_gather or len(inner.users) != 1:
        return None
    d = _gathered_dim(_shape(inner.args[0]) or (), _shape(outer.args[0]) or (), int(inner.args[1]))
    if d is None:
        return None
    ndim = len(_shape(x) or ())
    perms = [n for n in between if n.target is _aten.permute.default]
    for n in perms:  # the fold moves the gathered dim 0 to d and nothing else
        if list(n.args[1]) != _movedim_perm(ndim, d):
            return None
    if d != 0 and len(perms) != 1:  # views alone only merge the pieces into dim 0
        return None
    return inner, between + [x], d


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


def fuse_mesh_dim_gathers(gm: fx.GraphModule) -> int:
    """Merges chained per-mesh-dim all-gathers of `gm` (in place; recompiles). Returns how
    many gathers were saved."""
    saved = 0
    for outer in [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _all_gather]:
        found = _chain(outer)
        if found is None:
            continue
        inner, between, d = found
        # The outer gather must fold into the same tensor dim (S(d) on both mesh dims; S(d)
        # on one and S(d') on the other is two gathers of different dims).
        if _folded_into(next(iter(outer.users)), int(outer.args[1]), _shape(outer.args[0])[1:]) != d:
            continue
        group = nested_group_name(outer.args[2], inner.args[2])
        if group is None:
            continue
        outer.args = (inner.args[0], int(inner.args[1]) * int(outer.args[1]), group)
        _refresh(outer)
        for n in between:
            gm.graph.erase_node(n)
        gm.graph.erase_node(inner)
        # The fold after the merged gather: the same ops, now over n_outer x n_inner
        # pieces. Shapes change up to the flatten (a view to the whole tensor's shape).
        node = next(iter(outer.users))  # its wait
        _refresh(node)
        while len(node.users) == 1:
            node = next(iter(node.users))
            if node.op != "call_function" or node.target not in _REFOLD:
                break
            _refresh(node)
            if node.target in _SHAPE_GIVEN:
                break
        saved += 1
    if saved:
        gm.graph.lint()
        gm.recompile()
    return saved
