"""One code generation for a chain of graph passes.

Each runtime pass edits a GraphModule's graph and must leave it callable when used on its
own, so it regenerates the Python code (`GraphModule.recompile`). RankProgram runs a dozen
of them over the same two graphs; on a graph of 7,000 nodes each regeneration takes about a
third of a second, all but the last thrown away. Inside `recompile_once()` a pass's
`recompile(gm)` only marks `gm`, and each marked graph is regenerated once on leaving it.
Nothing inside the block may run or read the code of a graph it has edited."""
from __future__ import annotations

import contextlib
import threading

from torch import fx

_state = threading.local()


def recompile(gm: fx.GraphModule) -> None:
    """Regenerates `gm`'s code now, or on leaving the innermost `recompile_once()`."""
    pending = getattr(_state, "pending", None)
    if pending is None:
        gm.recompile()
    else:
        pending.setdefault(id(gm), gm)


@contextlib.contextmanager
def recompile_once():
    """Defers every `recompile(gm)` in the block to its end: one regeneration per graph.
    Nested blocks join the outermost one."""
    if getattr(_state, "pending", None) is not None:
        yield
        return
    _state.pending = {}
    try:
        yield
    finally:
        pending, _state.pending = _state.pending, None
        for gm in pending.values():  # in the order they were first marked
            gm.recompile()
