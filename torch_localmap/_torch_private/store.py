"""The default process group's key-value store (failure records between ranks).

Written for torch 2.13 (torch.distributed.distributed_c10d).
"""
from __future__ import annotations


def default_store():
    """The key-value store of the default process group (torch.distributed.distributed_c10d.
    _get_default_store, 2.13): ranks leave failure records there (runtime/failures.py)."""
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store()
