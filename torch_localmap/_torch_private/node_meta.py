"""Tags on graph nodes (node.meta): which plan node, module and autograd node a traced node
came from, forward or backward, and recompute requests to the partitioner.

Written for torch 2.13 (torch.fx.traceback, torch.fx.proxy._COPY_META_FIELDS, the
partitioner's tags).
"""
from __future__ import annotations

import contextlib

import torch.fx as fx


def tag_plan_node(node: fx.Node, index: int) -> None:
    """Records the plan node's index in node.meta["custom"], one of the fields traced
    nodes copy from the current node (torch.fx.proxy._COPY_META_FIELDS, 2.13)."""
    node.meta["custom"] = {**(node.meta.get("custom") or {}), "tlm_plan_node": index}


def plan_node_of(node: fx.Node):
    """The plan node index tag_plan_node recorded on the node a traced node came from."""
    return (node.meta.get("custom") or {}).get("tlm_plan_node")


@contextlib.contextmanager
def node_meta_preserved():
    """While active, nodes traced by make_fx copy the "current" node's meta fields that
    torch.fx.proxy._COPY_META_FIELDS lists (2.13: partitioner_tag, nn_module_stack,
    recompute, ...) -- torch.fx.traceback.preserve_node_meta."""
    from torch.fx import traceback as fx_traceback

    with fx_traceback.preserve_node_meta():
        yield


def as_current_node(node: fx.Node):
    """Context in which traced nodes inherit `node`'s meta (torch.fx.traceback.set_current_meta,
    2.13; effective inside node_meta_preserved)."""
    from torch.fx import traceback as fx_traceback

    return fx_traceback.set_current_meta(node)


def node_annotation(key: str, value):
    """Context: nodes traced inside it get node.meta["custom"][key] = value; aot_autograd
    copies a forward node's "custom" onto the backward nodes of the same autograd node
    (torch.fx.traceback.annotate, 2.13; gradient accumulations stay unannotated)."""
    from torch.fx import traceback as fx_traceback

    return fx_traceback.annotate({key: value})


def node_annotations(node: fx.Node) -> dict:
    """What node_annotation recorded on `node` (empty when nothing was)."""
    custom = node.meta.get("custom")
    return custom if isinstance(custom, dict) else {}


def autograd_sequence_nr(node: fx.Node) -> int:
    """The autograd sequence number recorded at trace time: a backward node has the number
    of the forward node it differentiates (-1: none recorded)."""
    nr = node.meta.get("seq_nr")
    return int(nr) if isinstance(nr, int) else -1


def is_forward_node(node: fx.Node) -> bool:
    """Whether a traced joint-graph node belongs to forward (the partitioner's tag,
    torch._functorch.partitioners._has_tag_is_forward, 2.13)."""
    from torch._functorch.partitioners import _has_tag_is_forward

    return _has_tag_is_forward(node)


def is_backward_node(node: fx.Node) -> bool:
    return node.meta.get("partitioner_tag") == "is_backward" or bool(node.meta.get("autograd_backward"))


def drop_recompute_tags(gm: fx.GraphModule) -> None:
    """Removes the partitioner's recompute tags (node.meta "recompute" and "ac_graph_id")
    from an already partitioned graph. Once forward and backward are split the tags have
    done their work, but Inductor (2.13) still reads them: compiling a graph with tags on
    nodes its backward reads, it runs its forward-loss-backward rematerialization, which
    fails where backward has several such regions (the re-gathers of a plan that reshards
    after forward: "Detected 6 disjoint backward regions that require recomputation")."""
    for node in gm.graph.nodes:
        node.meta.pop("recompute", None)
        node.meta.pop("ac_graph_id", None)


def mark_must_recompute(node: fx.Node) -> None:
    """Asks the partitioner to recompute `node` in backward rather than save it
    (node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE, honoured by
    default_partition in 2.13)."""
    from torch.utils.checkpoint import CheckpointPolicy

    node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
