"""torchtitan's activation checkpointing modes as fixed recompute policies.

`recompute="full"` or `"selective"` names, per traced graph, the forward values the
planner recomputes (core/recompute.h, BoundaryPolicy::recompute_only) instead of letting
the solver choose (`recompute=True`). They follow torchtitan's modes, which checkpoint
each transformer block (a module under a list index, "layers.3"):
- "full": everything a block makes is recomputed in backward except what leaves it (its
  output, which the next block reads): only block inputs are kept;
- "selective": as "full", but the outputs of matmuls and attention -- the expensive ops,
  torchtitan's op-level save list -- are kept too.
The planner can recompute only some values (core/recompute.h says which); the others are
kept, so a policy is at most as aggressive as torchtitan's (SDPA's several outputs, for one,
are always kept). The plan says what was recomputed.
"""
from __future__ import annotations

import operator

from ._torch_private import node_meta
from ._trace import MODULE_ANNOTATION

MODES = ("full", "selective")

# Ops whose outputs torchtitan's selective (op) mode saves: matmuls and attention.
_SAVED_BY_SELECTIVE = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten._scaled_dot_product_", "aten.linear.")
# Views: a view of a saved output is saved with it (it is the same storage).
_VIEWS = ("aten.view.", "aten._unsafe_view.", "aten.reshape.", "aten.t.", "aten.transpose.", "aten.permute.",
          "aten.expand.", "aten.unsqueeze.", "aten.squeeze.", "aten.alias.", "aten.detach.", "aten.slice.",
          "aten.select.")


def block_of(module: str) -> str:
    """The checkpointed block a module call belongs to: its FQN up to the first list index
    ("layers.3" of "layers.3.attention.wq"), or "" outside any block."""
    parts = module.split(".")
    for i, p in enumerate(parts):
        if p.split("@")[0].isdigit():
            return ".".join(parts[: i + 1]).split("@")[0]
    return ""


def _forward_users(node):
    """Users of `node`'s value, seen through the getitems of a multi-output node."""
    for u in node.users:
        if u.op == "call_function" and u.target is operator.getitem:
            yield from _forward_users(u)
        else:
            yield u


def recompute_policy_nodes(exported, mode: str) -> list:
    """IR node names the policy `mode` recomputes (the planner keeps those it cannot)."""
    if mode not in MODES:
        raise ValueError(f"recompute: expected True, False or one of {list(MODES)}, got {mode!r}")
    block = {}
    for fx_node in exported.fx_nodes:
        if fx_node.op == "call_function" and node_meta.is_forward_node(fx_node):
            block[fx_node] = block_of(node_meta.node_annotations(fx_node).get(MODULE_ANNOTATION) or "")
    names, saved = [], set()
    for ir, fx_node in zip(exported.nodes, exported.fx_nodes):
        if mode == "selective" and (ir.op.startswith(_SAVED_BY_SELECTIVE) or (
                ir.op.startswith(_VIEWS) and any(a in saved for a in fx_node.all_input_nodes))):
            saved.add(fx_node)  # a matmul's or attention's output, or a view of one
        b = block.get(fx_node)
        if not b or fx_node in saved:
            continue
        if any(u.op == "output" or (u in block and block[u] != b) for u in _forward_users(fx_node)):
            continue  # the block's output: the next block's input, kept
        names.append(ir.name)
    return names
