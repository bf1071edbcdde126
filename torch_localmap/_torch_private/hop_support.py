"""Everything the local_map HOP (torch_localmap/_local_map/hop.py) needs beyond the public
HigherOrderOperator / py_impl surface: dispatch keys and modes, tracing its body as a
subgraph, and functionalization's bookkeeping.

Written for torch 2.13 (torch._higher_order_ops.utils, torch.fx.experimental.proxy_tensor,
torch._subclasses.functional_tensor).
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx
from torch._C import DispatchKey  # noqa: F401
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode  # noqa: F401


@contextlib.contextmanager
def tracing_suspended():
    """Run plain (fake) tensor code while an outer make_fx / functionalization trace is active.

    torch._dispatch.python.suspend_functionalization,
    torch._subclasses.functional_tensor.disable_functional_mode and
    torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing (2.13).
    """
    from torch._dispatch.python import suspend_functionalization
    from torch._subclasses.functional_tensor import disable_functional_mode
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with suspend_functionalization(), disable_functional_mode(), disable_proxy_modes_tracing():
        yield


def proxy_tracing_disabled():
    """torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing (2.13)."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    return disable_proxy_modes_tracing()


def trace_subgraph(fn, *args) -> fx.GraphModule:
    """Trace `fn` as a subgraph of the current make_fx session, with its settings.

    torch._higher_order_ops.utils.reenter_make_fx (2.13).
    """
    from torch._higher_order_ops.utils import reenter_make_fx

    return reenter_make_fx(fn)(*args)


def trace_standalone(fn, *args) -> fx.GraphModule:
    """A fresh make_fx trace of fn(*args) (args may be fake tensors)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*args)


def add_subgraph(proxy_mode, gm: fx.GraphModule, prefix: str) -> str:
    """Registers `gm` on the traced root module under a fresh name; returns the name.

    torch._higher_order_ops.utils.unique_graph_id (2.13).
    """
    from torch._higher_order_ops.utils import unique_graph_id

    _, name = unique_graph_id(proxy_mode, prefix=prefix)
    proxy_mode.tracer.root.register_module(name, gm)
    return name


def track_outputs(example_out, out_proxy, tracer):
    """torch.fx.experimental.proxy_tensor.track_tensor_tree (2.13)."""
    from torch.fx.experimental.proxy_tensor import track_tensor_tree

    return track_tensor_tree(example_out, out_proxy, constant=None, tracer=tracer)


def clone_if_aliasing(inputs):
    """fn(t) -> t, or a clone when t shares storage with one of `inputs`.

    torch._higher_order_ops.utils.clone_outputs_aliasing_inputs (2.13); HOP outputs must
    not alias HOP inputs (functionalization and aot_autograd assume fresh outputs).
    """
    from torch._higher_order_ops.utils import clone_outputs_aliasing_inputs

    return clone_outputs_aliasing_inputs(inputs)


def interpreted(fn):
    """Runs a GraphModule through fx.Interpreter when node meta is being preserved.

    torch._higher_order_ops.utils._maybe_run_with_interpreter (2.13).
    """
    from torch._higher_order_ops.utils import _maybe_run_with_interpreter

    return _maybe_run_with_interpreter(fn)


def functional_input_mutated(t) -> bool:
    """Whether a functionalized input saw an in-place write (data or metadata).

    torch._subclasses.functional_tensor.FunctionalTensor (Python functionalization) or a C++
    functional tensor (torch.func.functionalize), torch._functionalize_has_data_mutation /
    _functionalize_has_metadata_mutation (2.13)."""
    from torch._subclasses.functional_tensor import FunctionalTensor

    if isinstance(t, FunctionalTensor):
        t = t.elem
    if not (isinstance(t, torch.Tensor) and torch._is_functional_tensor(t)):
        return False
    return bool(torch._functionalize_has_data_mutation(t) or torch._functionalize_has_metadata_mutation(t))


def below_autograd():
    """torch._C._AutoDispatchBelowAutograd (2.13): dispatch the next call past the Autograd key."""
    return torch._C._AutoDispatchBelowAutograd()
