"""Fake tensors: the mode planning traces under, finding it, and stepping out of it.

Written for torch 2.13 (torch._subclasses.fake_tensor, torch._guards).
"""
from __future__ import annotations

from torch._subclasses.fake_tensor import FakeTensorMode


def fake_mode_of(values):
    """The FakeTensorMode of `values`, or a fresh one (real inputs): torch._guards.detect_fake_mode (2.13)."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode(values)
    return mode if mode is not None else FakeTensorMode(allow_non_fake_inputs=True)


def outside_fake_mode():
    """Context that suspends an active FakeTensorMode (torch._subclasses.fake_tensor, 2.13).

    aot_autograd calls our partition function with fake mode active; sending the plan
    between ranks must move real bytes.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()
