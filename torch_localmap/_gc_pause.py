"""Python's cyclic garbage collector paused while the planner's glue builds its bulk data.

Each time enough new container objects have been made, the collector walks the young
generations, and now and then every live object. A traced 70B graph and its IR hold millions
of them, so exporting the IR, parsing the plan document and stamping the traced layers spent
more than half their time in collections that found nothing to free (70B plan call: the
export 0.84 -> 0.30 s, the plan document's json.loads 0.48 -> 0.12 s). What those phases
build stays alive, so pausing frees nothing later than it would have been freed.
"""
from __future__ import annotations

import contextlib
import gc

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused():
    """Disables the cyclic collector inside the block and restores its previous state after
    (nested uses leave it as the outermost found it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
