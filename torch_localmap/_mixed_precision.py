"""Mixed precision as FSDP2 users set it (torch.distributed.fsdp.MixedPrecisionPolicy).

Parameters (and the optimizer state) stay in their own dtype (fp32); the traced program
casts each parameter to `param_dtype` where it is used, so compute runs in bf16 and the
planner, which prices every tensor in its traced dtype, finds it cheaper to cast a shard
before gathering it (what FSDP2 does). The cast's backward brings each gradient back to
the parameter's dtype; with `reduce_dtype` set, the planner must reduce parameter
gradients after that upcast (the upcast takes Partial inputs as Partial), so the
reduction runs in the wider dtype. `reduce_dtype=None` reduces in `param_dtype`, as in
FSDP2. `cast_forward_inputs` casts floating inputs to `param_dtype`; `output_dtype` casts
floating outputs.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

from ._module_tree import attach_tensor
from ._torch_private.pytrees import pytree

_KEEP_PARTIAL = "localmap_keep_partial_inputs"


def check_policy(policy):
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if policy is not None and not isinstance(policy, MixedPrecisionPolicy):
        raise TypeError(f"mp_policy must be a torch.distributed.fsdp.MixedPrecisionPolicy, got "
                        f"{type(policy).__name__}")
    return policy


class CastParameters(nn.Module):
    """`module` with its parameters cast to `policy.param_dtype` inside forward. It holds the
    module's own parameters and buffers under the module's FQNs, so tracing it gives the
    model's graph with a cast after each parameter placeholder.

    Where the module holds a stack of alike layers (_trace_stamp.find_layer_stack: a
    transformer's blocks), each layer's parameters are cast as that layer's forward starts,
    as FSDP2 does with one fully_shard per block; the rest at the root's forward. The values
    are the same either way; the casts then belong to the layers, so a stack traced four
    layers deep stamps (_trace.py) instead of being traced whole. `layers` names the layers
    to cast in (None: find the stack)."""

    def __init__(self, module: nn.Module, policy, layers=None):
        super().__init__()
        object.__setattr__(self, "_inner", module)  # not a submodule: its state is registered below
        object.__setattr__(self, "policy", policy)
        self.training = module.training
        for name, p in module.named_parameters():
            attach_tensor(self, name, p, True)
        for name, b in module.named_buffers():
            attach_tensor(self, name, b, False)
        if layers is None:
            from ._trace_stamp import find_layer_stack

            stack = find_layer_stack(module)
            layers = stack.layers if stack is not None else []
        object.__setattr__(self, "_cast_layers", list(layers))
        ids = {id(p) for layer in self._cast_layers for p in layer.parameters()}
        self._cast_at_root = [n for n, p in module.named_parameters() if id(p) not in ids]

    @property
    def _tlm_traced_module(self) -> nn.Module:
        """The model whose submodules run in forward (tracing labels nodes with their calls)."""
        return self._inner

    def _tlm_rewrap(self, layers) -> "CastParameters":
        """The same cast around `_inner` as it is now (a stack truncated for tracing), casting
        inside `layers`."""
        return CastParameters(self._inner, self.policy, layers)

    def forward(self, *args, **kwargs):
        pd, policy = self.policy.param_dtype, self.policy
        state = dict(self.named_parameters())
        if pd is not None:
            for n in self._cast_at_root:
                if state[n].is_floating_point():
                    state[n] = state[n].to(pd)
        state.update(dict(self.named_buffers()))
        if pd is not None and policy.cast_forward_inputs:
            args, kwargs = pytree.tree_map_only(torch.Tensor, lambda x: x.to(pd) if x.is_floating_point() else x,
                                                (args, kwargs))
        self._inner.train(self.training)
        with _cast_inside(self._cast_layers if pd is not None else [], pd):
            out = torch.func.functional_call(self._inner, state, args, kwargs)
        if policy.output_dtype is not None:
            out = pytree.tree_map_only(torch.Tensor,
                                       lambda x: x.to(policy.output_dtype) if x.is_floating_point() else x, out)
        return out


@contextlib.contextmanager
def _cast_inside(layers, dtype):
    """While active, each of `layers` runs its forward with its floating parameters cast to
    `dtype` (the cast is made as the layer starts, so it is the layer's own node)."""
    from ._torch_private import tracing

    open_casts = []

    def enter(layer, _args):
        cast = {n: p.to(dtype) if p.is_floating_point() else p for n, p in layer.named_parameters()}
        ctx = tracing.reparametrized(layer, cast)
        ctx.__enter__()
        open_casts.append(ctx)

    def leave(*_args):
        if open_casts:
            open_casts.pop().__exit__(None, None, None)

    handles = []
    for layer in layers:
        handles.append(layer.register_forward_pre_hook(enter))
        handles.append(layer.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        while open_casts:
            open_casts.pop().__exit__(None, None, None)
        for h in handles:
            h.remove()


def mark_gradient_upcasts(joint, policy) -> int:
    """Marks the nodes that bring parameter gradients to `policy.reduce_dtype` (the cast's
    backward) so the planner reduces after them. Returns how many it marked."""
    if policy is None or policy.reduce_dtype is None or policy.param_dtype is None:
        return 0
    from ._torch_private import descriptors

    out_node = next(n for n in joint.gm.graph.nodes if n.op == "output")
    outs = out_node.args[0]
    flat = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    descs = out_node.meta.get("desc") or [None] * len(flat)
    marked = 0
    for g, desc in zip(flat, descs):
        if desc is None or descriptors.describe_output(desc)[0] != "grad" or not isinstance(g, torch.fx.Node):
            continue
        val = g.meta.get("val")
        is_cast = g.op == "call_function" and any(k in str(g.target) for k in ("convert_element_type", "_to_copy"))
        if is_cast and isinstance(val, torch.Tensor) and val.dtype == policy.reduce_dtype:
            # The cast and the layout-only ops between it and the op that makes the gradient
            # (transposes, views, casts): a pending sum may not be reduced on any of their
            # input edges, or it would be reduced in the narrow dtype before the upcast.
            node = g
            while True:
                node.meta[_KEEP_PARTIAL] = True
                marked += 1
                src = node.args[0] if node.args else None
                if not (isinstance(src, torch.fx.Node) and src.op == "call_function"
                        and _op_name(src) in _CARRIES_PARTIAL):
                    break
                node = src
    return marked


# Single-input ops that only move or retype elements: a Partial input passes through them.
_CARRIES_PARTIAL = frozenset({
    "_to_copy", "_unsafe_view", "clone", "contiguous", "convert_element_type", "permute", "reshape", "squeeze",
    "t", "transpose", "unsqueeze", "view",
})


def _op_name(node: torch.fx.Node) -> str:
    """aten.t.default -> "t"; prims.convert_element_type.default -> "convert_element_type"."""
    parts = str(node.target).split(".")
    return parts[1] if len(parts) >= 2 else parts[0]


def node_extra_with_upcasts(base):
    """node_extra that adds the planner's keep_partial_inputs flag to marked nodes."""

    def extra(fx_node):
        more = base(fx_node) if base is not None else None
        if fx_node.meta.get(_KEEP_PARTIAL):
            more = dict(more or {})
            more["extra"] = {**(more.get("extra") or {}), "keep_partial_inputs": True}
        return more

    return extra


@contextlib.contextmanager
def root_hooks_of(module: nn.Module, keep: bool):
    """Tracing `module` through CastParameters: the checks trace_joint makes on the module it
    traces (submodule hooks, Python attributes written in forward) apply to `module`, and its
    root hooks stay out of the trace unless `keep`."""
    from ._trace import _check_python_state, _python_state, _refuse_submodule_hooks, _root_hooks_off

    _refuse_submodule_hooks(module)
    before = _python_state(module)
    with contextlib.ExitStack() as stack:
        if not keep:
            stack.enter_context(_root_hooks_off(module))
        yield
    _check_python_state(module, before)
