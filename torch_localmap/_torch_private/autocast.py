"""torch.autocast around planned calls: the state a call is traced under, and the rank
programs run with autocast off.

A call made under torch.autocast traces autocast's casts into its joint graph (the copies
to the lower precision before a product, to float32 before a reduction; backward traced
under the same state, aot_autograd's default `backward_pass_autocast="same_as_forward"`),
so the planned program already holds them. Run under autocast again, its ops would be cast
a second time at run time -- a program traced without autocast would make bfloat16 products
in forward where its backward graph expects float32 -- so the programs run with autocast
off, as aot_autograd runs its compiled graphs (`disable_amp` in its runtime wrappers).

Written for torch 2.13 (torch._C._autocast_supported_devices, torch._C._is_any_autocast_enabled).
"""
from __future__ import annotations

import contextlib

import torch


def _device_types() -> tuple:
    return tuple(torch._C._autocast_supported_devices())


def _enabled() -> list:
    """The device types whose autocast is on now. Called on every step: the common case (none)
    is one C call, not one per device type (~0.1 against ~3 us)."""
    if not torch._C._is_any_autocast_enabled():
        return []
    return [d for d in _device_types() if torch.is_autocast_enabled(d)]


def autocast_state() -> tuple:
    """((device type, dtype), ...) for every device type whose autocast is on now: part of a
    call's signature, as each state traces another program."""
    return tuple((d, torch.get_autocast_dtype(d)) for d in _enabled())


@contextlib.contextmanager
def autocast_off():
    """Autocast off on every device type for the duration (a no-op when none is on)."""
    on = _enabled()
    with contextlib.ExitStack() as stack:
        for d in on:
            stack.enter_context(torch.autocast(d, enabled=False))
        yield
