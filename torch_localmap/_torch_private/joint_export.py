"""The joint forward+backward graph planning starts from (aot_autograd's export) and the
decompositions applied while it is traced.

Written for torch 2.13 (torch._functorch.aot_autograd, torch._decomp).
"""
from __future__ import annotations

import contextlib

import torch


def export_joint(stack: contextlib.ExitStack, module: torch.nn.Module, args: tuple, kwargs: dict):
    """Joint forward+backward aten graph of `module(*args, **kwargs)` with descriptors.

    torch._functorch.aot_autograd.aot_export_joint_with_descriptors (2.13). The graph's
    placeholders carry meta["desc"] (ParamAOTInput / BufferAOTInput / PlainAOTInput(idx:
    position in the flat leaves of (args, kwargs)) / TangentAOTInput(output)); the output
    node's meta["desc"] lists InputMutationAOTOutput (buffers written in forward, first),
    PlainAOTOutput(idx), GradAOTOutput. Under torch.no_grad() the graph is forward-only.
    The result's `out_spec` is the pytree spec of the module's output.
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    from torch.fx import traceback as fx_traceback

    # Node annotations (node_annotation) are kept only while node meta is preserved; the
    # autograd path turns that on itself, the forward-only (no_grad) path does not.
    stack.enter_context(fx_traceback.preserve_node_meta())
    return aot_export_joint_with_descriptors(stack, module, args, kwargs, decompositions=_planning_decompositions())


def _nll_loss_mean_as_sum(forward):
    def decompose(self, target, weight, reduction, ignore_index):
        if reduction != 1:  # only the mean is rewritten
            return NotImplemented
        total, total_weight = forward(self, target, weight, 2, ignore_index)
        return total / total_weight, total_weight

    return decompose


def _planning_decompositions() -> dict:
    """Rewrites applied while tracing for planning.

    nll_loss with reduction='mean' divides by a total weight that depends on the targets,
    so no rule can shard its batch: planned as is, it makes the log-probabilities whole on
    every rank (for Llama-3-8B at batch 16 x seq 8192, a 62.6 GiB fp32 tensor). As the sum
    over the batch divided by the total weight (what the mean kernel computes), both sums
    shard over the batch (Partial scalars) and only the two scalars are reduced."""
    aten = torch.ops.aten
    from torch._decomp import get_decompositions

    # mse_loss and its backward divide by the element count inside one kernel, so a shard
    # would divide by its own count; as torch's decompositions (sub, pow, mean; the
    # backward's division by the global count) every piece has a rule that shards.
    table = get_decompositions([aten.mse_loss.default, aten.mse_loss_backward.default])
    table.update({aten.nll_loss_forward.default: _nll_loss_mean_as_sum(aten.nll_loss_forward.default),
                  aten.nll_loss2d_forward.default: _nll_loss_mean_as_sum(aten.nll_loss2d_forward.default)})
    return table
