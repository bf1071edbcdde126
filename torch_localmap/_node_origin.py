"""Where each planned node comes from: the module call or local_map region that made it,
its phase (forward / backward) and its autograd sequence number, read from the traced
graph's node meta (recorded by _trace._module_stack) and kept in the plan for reports."""
from __future__ import annotations

import dataclasses

from ._torch_private import node_meta
from ._trace import MODULE_ANNOTATION


def _owner_of(fqn: str) -> str:
    return fqn.rpartition(".")[0]


def label_plan_document(doc_nodes: list, exported) -> None:
    """Sets region / module / phase / seq_nr (placeholders: role and target too) on every node
    of a plan document the planner just wrote for `exported`, before the Plan is built from it:
    one dict update a node (building the plan's nodes and then replacing each took 0.3 s of a
    70B plan call)."""
    from ._local_map.nodes import region_of  # noqa: PLC0415  (loads the HOP machinery)

    fx_nodes = exported.fx_nodes
    for i, (node, ir) in enumerate(zip(doc_nodes, exported.nodes)):
        fx_node = fx_nodes[i] if i < len(fx_nodes) else None
        if ir.op == "placeholder":
            region = _owner_of(ir.target) if ir.role in ("param", "buffer") else ""
            node.update(region=region, module=region, phase="input", role=ir.role, target=str(ir.target))
        elif ir.op == "output" or fx_node is None:
            node["phase"] = "output"
        else:
            module = node_meta.node_annotations(fx_node).get(MODULE_ANNOTATION) or ""
            region = region_of(fx_node)
            node.update(region=f"local_map:{region.name}" if region is not None else module, module=module,
                        phase="backward" if node_meta.is_backward_node(fx_node) else "forward",
                        seq_nr=node_meta.autograd_sequence_nr(fx_node))


def module_calls_of(joint) -> list:
    """The traced module calls, in call order, as the plan keeps them (dicts)."""
    return [dataclasses.asdict(c) for c in getattr(joint, "module_calls", ())]
