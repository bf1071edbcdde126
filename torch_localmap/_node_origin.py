"""Where each planned node comes from: the module call or local_map region that made it,
its phase (forward / backward) and its autograd sequence number, read from the traced
graph's node meta (recorded by _trace._module_stack) and kept in the plan for reports."""
from __future__ import annotations

import dataclasses

from ._torch_private import node_meta
from ._trace import MODULE_ANNOTATION


def _region_label(fx_node) -> str | None:
    from ._local_map.nodes import region_of  # noqa: PLC0415  (loads the HOP machinery)

    region = region_of(fx_node)
    return f"local_map:{region.name}" if region is not None else None


def _owner_of(fqn: str) -> str:
    return fqn.rpartition(".")[0]


def label_plan_nodes(plan, exported, joint) -> None:
    """Sets region / phase / seq_nr on every planned node and the plan's module calls."""
    labelled = []
    for i, (node, ir) in enumerate(zip(plan.nodes, exported.nodes)):
        fx_node = exported.fx_nodes[i] if i < len(exported.fx_nodes) else None
        if ir.op == "placeholder":
            region = _owner_of(ir.target) if ir.role in ("param", "buffer") else ""
            labelled.append(dataclasses.replace(node, region=region, module=region, phase="input", role=ir.role,
                                                target=str(ir.target)))
            continue
        if ir.op == "output" or fx_node is None:
            labelled.append(dataclasses.replace(node, phase="output"))
            continue
        module = node_meta.node_annotations(fx_node).get(MODULE_ANNOTATION) or ""
        region = _region_label(fx_node) or module
        phase = "backward" if node_meta.is_backward_node(fx_node) else "forward"
        labelled.append(dataclasses.replace(node, region=region, module=module, phase=phase,
                                            seq_nr=node_meta.autograd_sequence_nr(fx_node)))
    plan.nodes = labelled
    plan.module_calls = [dataclasses.asdict(c) for c in getattr(joint, "module_calls", ())]
