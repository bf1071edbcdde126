"""Tracing a module into its joint forward+backward aten graph, with fake tensors."""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch
import torch.fx as fx

from . import _torch_private
from ._hop import RegionMutationError


@dataclass
class JointGraph:
    gm: fx.GraphModule
    num_fwd_outputs: int
    param_names: list  # fqn per "param" placeholder, in placeholder order
    buffer_names: list
    num_user_inputs: int


def check_example_inputs(module: torch.nn.Module, example_inputs) -> tuple:
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(module).__name__} ({module!r:.80}); wrap a "
                        f"function in a Module whose forward calls it")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise TypeError(f"example_inputs must be a tuple of tensors, got {type(example_inputs).__name__}")
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example_inputs[{i}] must be a torch.Tensor, got {type(x).__name__}")
    try:
        inspect.signature(module.forward).bind(*example_inputs)
    except TypeError as e:
        raise ValueError(f"example_inputs: {type(module).__name__}.forward{inspect.signature(module.forward)} "
                         f"cannot take {len(example_inputs)} positional inputs ({e})") from None
    return tuple(example_inputs)


def trace_joint(module: torch.nn.Module, example_inputs) -> JointGraph:
    """Joint graph of module(*example_inputs), traced with fake tensors (no real compute).

    The module's output must be a tensor or a tuple of tensors; for training, a scalar loss.
    Shape mismatches between the model and the example inputs surface here as a
    ValueError naming the failing op.
    """
    example_inputs = check_example_inputs(module, example_inputs)
    with contextlib.ExitStack() as stack:
        try:
            joint = _torch_private.export_joint(stack, module, example_inputs)
        except RegionMutationError:
            raise  # already names the region and what to do
        except RuntimeError as e:  # shape errors from the model's own ops
            raise ValueError(
                f"tracing {type(module).__name__} with example inputs of shapes "
                f"{[tuple(x.shape) for x in example_inputs]} failed: {e}"
            ) from e
        gm = joint.graph_module
    out = next(n for n in gm.graph.nodes if n.op == "output")
    descs = out.meta.get("desc") or []
    num_fwd = sum(1 for d in descs if _torch_private.describe_output(d)[0] == "output")
    params, buffers, n_inputs = [], [], 0
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        role, name = _torch_private.describe_input(n.meta.get("desc"))
        if role == "param":
            params.append(name)
        elif role == "buffer":
            buffers.append(name)
        elif role == "input":
            n_inputs += 1
    return JointGraph(gm=gm, num_fwd_outputs=num_fwd, param_names=params, buffer_names=buffers,
                      num_user_inputs=n_inputs)
