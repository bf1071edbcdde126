"""When one rank fails inside the planned program, every rank ends with an error naming it.

A rank whose own code fails there (a bad input, a bug, out of memory) records the
failure in the default process group's store (key torch_localmap/failed/<rank>) and
re-raises. Its peers are left waiting in a collective with it; the runtime's groups
time out (groups.py), and a peer that catches the timeout reads the records and
raises PeerFailureError naming the failed rank and its error. Without a record (a
peer that died outright), the collective's own error is raised unchanged.
"""
from __future__ import annotations

import contextlib

import torch.distributed as dist

from .._torch_private.store import default_store
from .groups import is_collective_failure

__all__ = ["PeerFailureError", "failure_scope", "recorded_failures"]

_KEY = "torch_localmap/failed/{}"
_MAX_MESSAGE = 2000


class PeerFailureError(RuntimeError):
    """Another rank failed inside the planned program; this rank stopped waiting for it."""

    def __init__(self, failed: dict, rank: int, cause: BaseException):
        self.failed_ranks = sorted(failed)
        first = self.failed_ranks[0]
        others = f" (and ranks {self.failed_ranks[1:]})" if len(self.failed_ranks) > 1 else ""
        reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        super().__init__(f"rank {first}{others} failed inside the planned program: {failed[first]}\n"
                         f"rank {rank} stopped waiting for it in a collective ({reason}); the runtime's process "
                         f"groups time out after parallelize(timeout=...)")


def _store():
    return default_store()


def record_failure(exc: BaseException) -> None:
    """Leaves this rank's failure where its peers look (best effort: never masks `exc`)."""
    try:
        text = f"{type(exc).__name__}: {exc}".strip()
        _store().set(_KEY.format(dist.get_rank()), text[:_MAX_MESSAGE])
    except Exception:  # the store itself may be gone; the original error still propagates
        pass


def recorded_failures() -> dict:
    """{rank: "ErrorType: message"} of every rank that recorded a failure."""
    out = {}
    try:
        store = _store()
        for r in range(dist.get_world_size()):
            key = _KEY.format(r)
            if store.check([key]):
                out[r] = store.get(key).decode("utf-8", "replace")
    except Exception:
        return out
    return out


@contextlib.contextmanager
def failure_scope():
    """Wraps code that runs collectives with the other ranks (the planned program)."""
    if not dist.is_initialized():
        yield
        return
    try:
        yield
    except PeerFailureError:
        raise
    except BaseException as e:
        if is_collective_failure(e):
            failed = {r: m for r, m in recorded_failures().items() if r != dist.get_rank()}
            if failed:
                raise PeerFailureError(failed, dist.get_rank(), e) from e
            raise
        record_failure(e)
        raise
