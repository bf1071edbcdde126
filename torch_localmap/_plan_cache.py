"""The planned call signatures of a parallel module or a compiled graph (issue 31).

Training feeds batches whose sizes change: the sequence length every step, the last batch
of an epoch, evaluation. Each size needs a program of its own (the rank programs have
static shapes), but not a plan of its own: a call whose signature differs from a planned
one only in sizes (its *family*) carries that plan to its sizes -- C++ transfer_plan keeps
every node's strategy, prices it at the new sizes and keeps it unless a short search finds
a plan cheaper by more than the tolerance -- so a stream of lengths solves once, not once
per length. Entries are kept least recently used first, at most `size` of them (each holds
a traced program), and every decision is counted and logged in one line.
"""
from __future__ import annotations

import collections
import gc

from ._torch_private import graph_module
from ._log import get_logger

__all__ = ["PlanCache"]

_log = get_logger(__name__)


class PlanCache:
    """Signature -> planned entry (anything with a `.plan`), bounded, with counts."""

    def __init__(self, size: int):
        self.size = size
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._families: dict = {}  # family -> (latest plan, its input shapes)
        self._code: dict = {}  # key -> the generated-source keys of the GraphModules its planning made
        self.stats = {"hits": 0, "misses": 0, "solved": 0, "carried": 0, "evictions": 0}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key, describe, make):
        """The entry of `key`; on a miss `make(previous_plan_or_None)` plans it, given the
        latest plan of its family. `describe()` -- asked only on a miss, so a hit costs one
        lookup -- returns (family, shape per input, name per input); shapes and names word
        the log line."""
        entry = self._entries.get(key)
        if entry is not None:
            self.stats["hits"] += 1
            self._entries.move_to_end(key)
            return entry
        self.stats["misses"] += 1
        family, shapes, names = describe()
        previous, previous_shapes = self._families.get(family, (None, None))
        before = graph_module.graph_code_keys()
        entry = make(previous)
        self._code[key] = graph_module.graph_code_keys() - before
        transfer = getattr(entry.plan, "transfer", None)
        self.stats["carried" if transfer and not transfer["replanned"] else "solved"] += 1
        if transfer:
            _log_transfer(transfer, previous_shapes, shapes, names)
        self._entries[key] = entry
        self._families[family] = (entry.plan, shapes)
        if len(self._entries) > self.size:
            while len(self._entries) > self.size:
                old, _ = self._entries.popitem(last=False)
                # torch.fx keeps every GraphModule's source for tracebacks; the evicted
                # program's would otherwise pile up over a run of ever new sizes (the
                # graphs its planning made are gone with it; a kept family plan's joint
                # graph is never run again, only its traceback lines would go).
                graph_module.forget_graph_code(self._code.pop(old, ()))
                self.stats["evictions"] += 1
            gc.collect()  # a program is a web of cycles (graphs, nodes, closures): free it now
        return entry


def _log_transfer(transfer: dict, before, after, names) -> None:
    changed = [f"{names[i] if i < len(names) else i} dim {d}: {a} -> {b}"
               for i, (x, y) in enumerate(zip(before or [], after)) if x is not None and y is not None
               for d, (a, b) in enumerate(zip(x, y)) if a != b]
    what = ", ".join(changed) or "sizes changed"
    if transfer["replanned"]:
        _log.info("re-planned for new sizes (%s): %s; the previous plan would cost %.4g s there", what,
                  transfer["reason"], transfer["previous_cost_s"])
    else:
        _log.info("kept the plan at new sizes (%s): %.4g s there; the best plan found %.4g s, bound %.4g s", what,
                  transfer["previous_cost_s"], transfer["best_cost_s"], transfer["bound_s"])
