"""torch's own local_map inside a model we trace: its regions are sent to our handler.

Written for torch 2.13 (torch.distributed.tensor.experimental._func_map).
"""
from __future__ import annotations

import contextlib


def _forward_to_localmap_handler(func, out_placements, in_placements, in_grad_placements, device_mesh,
                                 redistribute_inputs, *args, **kwargs):
    # Runs as the code of torch's _local_map_wrapped, so the name below is looked up in
    # that function's module globals (set by torch_local_map_calls_go_to).
    return _tlm_local_map_handler(func, out_placements, in_placements,  # noqa: F821
                                  in_grad_placements, device_mesh, redistribute_inputs, *args, **kwargs)


@contextlib.contextmanager
def torch_local_map_calls_go_to(handler):
    """While active, every region made by torch.distributed.tensor.experimental.local_map
    calls handler(original, func, out_placements, in_placements, in_grad_placements,
    device_mesh, redistribute_inputs, *args, **kwargs), `original` being torch's own.

    torch 2.13's local_map returns functools.partial(_func_map._local_map_wrapped, ...);
    partials made earlier (at module construction) hold that function object, so its code
    is swapped for a forwarding stub for the duration (same signature, no closure)."""
    import types

    from torch.distributed.tensor.experimental import _func_map as fm

    fn = fm._local_map_wrapped
    saved = fn.__code__
    original = types.FunctionType(saved, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    fn.__globals__["_tlm_local_map_handler"] = lambda *a, **k: handler(original, *a, **k)
    fn.__code__ = _forward_to_localmap_handler.__code__
    try:
        yield
    finally:
        fn.__code__ = saved
        fn.__globals__.pop("_tlm_local_map_handler", None)
