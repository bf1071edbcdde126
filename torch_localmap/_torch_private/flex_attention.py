"""flex_attention in a model we trace: its closures' tensors as HOP buffers, its BlockMask
as a pytree.

Written for torch 2.13 (torch.nn.attention.flex_attention).
"""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def flex_closure_tensors_lifted():
    """Context in which flex_attention's eager path (torch.nn.attention.flex_attention, 2.13:
    it calls the module's `flex_attention_hop`) passes the tensors a score_mod / mask_mod
    closure captures (a document-ids tensor of a block-causal document mask) as the HOP's
    score_mod_other_buffers / mask_mod_other_buffers, as Dynamo lifts them. Captured, they
    would be traced as graph inputs of nothing: make_fx traces the mod outside the
    functionalization the outer trace runs under and fails; as buffers they are the HOP
    node's tensor arguments, which its rule places."""
    import torch.nn.attention.flex_attention as fa

    hop = fa.flex_attention_hop

    def lifted_hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                   score_mod_other_buffers=(), mask_mod_other_buffers=()):
        score_mod, score_bufs = _lift_closure_tensors(score_mod, 5, score_mod_other_buffers)
        mask_mod, mask_bufs = _lift_closure_tensors(block_mask[-1], 4, mask_mod_other_buffers)
        return hop(query, key, value, score_mod, (*block_mask[:-1], mask_mod), scale, kernel_options,
                   score_bufs, mask_bufs)

    fa.flex_attention_hop = lifted_hop
    try:
        yield
    finally:
        fa.flex_attention_hop = hop


def _lift_closure_tensors(fn, n_indices: int, buffers: tuple):
    """`fn` taking its closure's tensors as trailing buffer arguments, and the buffers."""
    found: list = []
    rebuild = _closure_template(fn, found, set())
    if not found:
        return fn, tuple(buffers)
    n_own = len(buffers)

    def with_buffers(*args):
        indices, own, lifted = args[:n_indices], args[n_indices:n_indices + n_own], args[n_indices + n_own:]
        return rebuild(iter(lifted))(*indices, *own)

    return with_buffers, (*buffers, *found)


def _closure_template(fn, found: list, seen: set):
    """A function of an iterator of tensors rebuilding `fn` with those tensors in place of
    the ones its closure (and nested functions' / functools.partial's) holds, in the order
    appended to `found`. torch's own _extract_callable_pytree does this but not while
    export's tracing reports is_compiling()."""
    import functools
    import inspect
    import types

    def of_value(v):
        if isinstance(v, torch.Tensor):
            found.append(v)
            return lambda it: next(it)
        if callable(v) and (inspect.isfunction(v) or isinstance(v, functools.partial)) and id(v) not in seen:
            return _closure_template(v, found, seen)
        return lambda it: v

    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        func, args = of_value(fn.func), [of_value(a) for a in fn.args]
        kws = {k: of_value(v) for k, v in fn.keywords.items()}
        return lambda it: functools.partial(func(it), *[a(it) for a in args], **{k: v(it) for k, v in kws.items()})
    if not inspect.isfunction(fn) or not fn.__closure__:
        return lambda it: fn
    try:
        cells = [of_value(c.cell_contents) for c in fn.__closure__]
    except ValueError:  # an empty cell (a name assigned after the function was made)
        return lambda it: fn

    def rebuild(it):
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                 tuple(types.CellType(c(it)) for c in cells))
        new.__kwdefaults__, new.__dict__ = fn.__kwdefaults__, dict(fn.__dict__)
        return new

    return rebuild


def register_block_mask_pytree() -> None:
    """Makes flex_attention's BlockMask a pytree node when its module is loaded, so a model
    taking a BlockMask argument (torchtitan's `attention_masks`) traces with its tensors as
    inputs. torch 2.13 gives BlockMask the flatten functions (_flatten, _unflatten,
    _flatten_with_keys: the block tensors and mask_mod's closure tensors are the children)
    but registers them only inside Dynamo / export."""
    import sys

    from torch.utils import _pytree

    fa = sys.modules.get("torch.nn.attention.flex_attention")
    if fa is None or fa.BlockMask in _pytree.SUPPORTED_NODES:
        return
    _pytree.register_pytree_node(fa.BlockMask, fa.BlockMask._flatten, fa.BlockMask._unflatten,
                                 flatten_with_keys_fn=fa.BlockMask._flatten_with_keys,
                                 serialized_type_name="torch.nn.attention.flex_attention.BlockMask")
