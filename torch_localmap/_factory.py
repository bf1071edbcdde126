"""Planning a user's own model by its factory, on the meta device.

    plan = torch_localmap.plan_factory("mypkg.models:build", (8, 8))
    plan = torch_localmap.plan_factory(build, (8, 8), inputs=["16x8192:int64"], n_layers=32)

A factory is a callable returning the module, `(module, example_args)` or
`(module, example_args, example_kwargs)`. It is called with the default device set to
"meta", so an 8B model's parameters take no memory; tracing uses fake tensors, so its
example inputs can be meta tensors too (`inputs` makes them from shape specs). This is
what `python -m torch_localmap plan --model pkg.module:factory` runs.
"""
from __future__ import annotations

import importlib
import inspect
import re

import torch

__all__ = ["load_factory", "parse_input_spec", "build_from_factory", "plan_factory"]

_SPEC = re.compile(r"^\s*(\d+(?:x\d+)*|scalar)\s*(?::\s*(\w+))?\s*$")


def load_factory(spec: str):
    """'package.module:function' (or 'package.module:Class.method') -> the callable."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"model factory: expected 'package.module:function', got {spec!r}")
    module_name, attr = spec.split(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"model factory {spec!r}: cannot import {module_name!r} ({e}); expected a module on "
                         f"sys.path (the current directory is on it for `python -m torch_localmap`)") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"model factory {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"model factory {spec!r}: {attr!r} is a {type(obj).__name__}, expected a callable")
    return obj


def parse_input_spec(text: str, device="meta") -> torch.Tensor:
    """'16x8192:int64' -> an int64 tensor of shape (16, 8192) on `device` (default dtype
    float32; 'scalar' is a 0-d tensor)."""
    m = _SPEC.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"input spec {text!r}: expected sizes joined by 'x' and an optional dtype, e.g. "
                         f"'16x8192:int64' or '16x1024x4096:bfloat16'")
    shape = () if m.group(1) == "scalar" else tuple(int(s) for s in m.group(1).split("x"))
    name = m.group(2) or "float32"
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"input spec {text!r}: {name!r} is not a torch dtype; expected e.g. float32, bfloat16, "
                         f"int64, bool")
    return torch.empty(shape, dtype=dtype, device=device)


def _check_factory_kwargs(factory, kwargs: dict) -> None:
    """A keyword the factory does not take (a typo in --arg) is a ValueError naming the ones it does,
    raised before the factory runs rather than as a TypeError from inside it."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable without a signature: the call itself checks
        return
    try:
        sig.bind_partial(**kwargs)
    except TypeError as e:
        taken = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        name = getattr(factory, "__qualname__", repr(factory))
        raise ValueError(f"model factory {name}: {e}; expected keyword arguments among {taken}") from None


def build_from_factory(factory, inputs=None, device="meta", **factory_kwargs):
    """(module, example_args, example_kwargs) from a factory called under `device`.
    `inputs` (shape specs or tensors) replaces the example arguments the factory returned."""
    if isinstance(factory, str):
        factory = load_factory(factory)
    _check_factory_kwargs(factory, factory_kwargs)
    with torch.device(device):
        result = factory(**factory_kwargs)
    args, kwargs = (), {}
    if isinstance(result, torch.nn.Module):
        module = result
    elif isinstance(result, tuple) and 2 <= len(result) <= 3 and isinstance(result[0], torch.nn.Module):
        module, args = result[0], result[1]
        kwargs = result[2] if len(result) == 3 else {}
        args = args if isinstance(args, tuple) else (args,)
        if not isinstance(kwargs, dict):
            raise ValueError(f"model factory returned {type(kwargs).__name__} as example kwargs; expected a dict")
    else:
        raise ValueError(f"model factory returned {type(result).__name__}; expected a module, (module, "
                         f"example_args) or (module, example_args, example_kwargs)")
    if inputs is not None:
        args = tuple(parse_input_spec(x, device) if isinstance(x, str) else x for x in inputs)
    if not args and not kwargs:
        raise ValueError("model factory returned a module without example inputs; expected inputs (shape specs "
                         "such as '16x8192:int64', --inputs on the command line) or a factory returning "
                         "(module, example_args)")
    return module, args, kwargs


def plan_factory(factory, mesh, inputs=None, factory_kwargs=None, device="meta", **options):
    """Builds the model on `device` (meta: no memory) and plans it on `mesh` (a shape tuple
    simulates one); `options` are plan_module's. Returns the Plan."""
    from .plan import plan_module  # noqa: PLC0415

    module, args, kwargs = build_from_factory(factory, inputs, device, **(factory_kwargs or {}))
    return plan_module(module, mesh, args, kwargs, **options)
