"""Freeing an autograd.Function's saved tensors during its own backward.

Written for torch 2.13 (the same name in 2.11-2.15): the autograd context's
maybe_clear_saved_tensors, which aot_autograd's compiled backward calls for the same reason.
"""
from __future__ import annotations


def release_saved_tensors(ctx) -> None:
    """Drops autograd's references to `ctx`'s saved tensors now, unless this backward keeps
    the graph (retain_graph=True: a later backward reads them again). Read ctx.saved_tensors
    first; after this, the caller's references are the only ones left."""
    ctx.maybe_clear_saved_tensors()
