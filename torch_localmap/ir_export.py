"""FX graph -> planner IR (one JSON document, handed to C++ in one call).

The document format is described in csrc/core/graph.h. Arguments keep their aten
schema positions; tensors become references {"t": [node, output]} and
`operator.getitem` nodes are folded into those references, so every IR node is
a real op. Non-JSON values are tagged: {"dtype": ...}, {"device": ...},
{"float": "inf"}, {"enum": ...}.
"""
from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import _torch_private


@dataclass
class ExportedGraph:
    """The IR document plus the mapping back to FX nodes."""

    doc: dict
    fx_nodes: list  # IR node index -> fx.Node
    index_of: dict  # fx.Node -> IR node index
    # fx.Node -> {tuple position -> IR output index} for multi-output nodes
    output_slots: dict = field(default_factory=dict)
    subgraphs: set = field(default_factory=set)  # get_attr nodes of HOP subgraphs (not exported)

    def to_json(self) -> str:
        return json.dumps(self.doc, separators=(",", ":"))


def _tensor_meta(val) -> dict:
    return {"shape": [int(s) for s in val.shape], "dtype": str(val.dtype).replace("torch.", "")}


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.mm.default"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    mod = getattr(target, "__module__", None) or ""
    return f"{mod}.{getattr(target, '__qualname__', repr(target))}".lstrip(".")


class _Encoder:
    def __init__(self, exported: ExportedGraph):
        self.g = exported

    def ref(self, node: fx.Node) -> dict:
        if node.op == "call_function" and node.target is operator.getitem:
            src, pos = node.args
            slots = self.g.output_slots.get(src)
            if slots is None or pos not in slots:
                raise ValueError(f"node '{node.name}' selects output {pos} of '{src.name}', which is not a tensor")
            return {"t": [self.g.index_of[src], slots[pos]]}
        if node not in self.g.index_of:
            raise ValueError(f"node '{node.name}' is used before it is defined or is not a tensor")
        return {"t": [self.g.index_of[node], 0]}

    def arg(self, a):
        if isinstance(a, fx.Node) and a in self.g.subgraphs:
            return {"subgraph": str(a.target)}  # a HOP's body (local_map regions); not a tensor
        if isinstance(a, fx.Node):
            return self.ref(a)
        if isinstance(a, (list, tuple)):
            return [self.arg(x) for x in a]
        if isinstance(a, bool) or a is None or isinstance(a, str):
            return a
        if isinstance(a, int):
            return int(a)
        if isinstance(a, float):
            if math.isinf(a):
                return {"float": "inf" if a > 0 else "-inf"}
            if math.isnan(a):
                return {"float": "nan"}
            return a
        if isinstance(a, torch.dtype):
            return {"dtype": str(a).replace("torch.", "")}
        if isinstance(a, torch.device):
            return {"device": str(a)}
        if isinstance(a, (torch.layout, torch.memory_format)):
            return {"enum": str(a)}
        if isinstance(a, dict):
            return {"dict": {str(k): self.arg(v) for k, v in a.items()}}
        if isinstance(a, torch.SymInt):
            raise ValueError("dynamic shapes are not supported by the planner; trace with static shapes")
        return {"repr": repr(a)}


def _attr(root, target: str):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


def export_graph(gm: fx.GraphModule, mesh_shape, mesh_dim_names=None, node_extra=None) -> ExportedGraph:
    """Exports `gm` (nodes must carry meta["val"], e.g. from make_fx / aot tracing).

    `node_extra(fx_node) -> dict | None` lets callers attach fields (such as
    "fixed" placements of local_map regions) without this module knowing them.
    """
    ex = ExportedGraph(doc={}, fx_nodes=[], index_of={})
    enc = _Encoder(ex)
    nodes = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            continue  # folded into references
        if node.op == "get_attr" and isinstance(_attr(gm, node.target), fx.GraphModule):
            ex.subgraphs.add(node)
            continue  # a HOP's subgraph: referenced by name from the HOP node's args
        val = node.meta.get("val")
        entry = {"name": node.name}
        if node.op == "placeholder":
            role, name = _torch_private.describe_input(node.meta.get("desc"))
            entry.update(op="placeholder", role=role, args=[], kwargs={})
            if name:
                entry["extra"] = {"target": name}
        elif node.op == "output":
            outs = node.args[0]
            flat = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            descs = node.meta.get("desc") or [None] * len(flat)
            roles, targets = [], []
            for v, d in zip(flat, descs):
                role, name = _torch_private.describe_output(d) if d is not None else ("output", "")
                if v is None:
                    role, name = "none", ""
                roles.append(role)
                targets.append(name)
            entry.update(op="output", args=[[enc.arg(v) for v in flat]], kwargs={},
                         extra={"roles": roles, "targets": targets})
            nodes.append(entry)
            ex.fx_nodes.append(node)
            ex.index_of[node] = len(nodes) - 1
            continue
        elif node.op == "call_function":
            entry.update(op=_op_name(node.target), args=enc.arg(list(node.args)),
                         kwargs={k: enc.arg(v) for k, v in node.kwargs.items()})
        else:
            raise ValueError(f"unsupported FX node '{node.name}' ({node.op}); the planner takes flat aten graphs")

        if isinstance(val, torch.Tensor):
            entry["outputs"] = [_tensor_meta(val)]
        elif isinstance(val, (list, tuple)):
            metas, slots = [], {}
            for pos, v in enumerate(val):
                if isinstance(v, torch.Tensor):
                    slots[pos] = len(metas)
                    metas.append(_tensor_meta(v))
            entry["outputs"] = metas
            ex.output_slots[node] = slots
            entry.setdefault("extra", {})["output_positions"] = sorted(slots)
        elif val is None:
            entry["outputs"] = []
        else:
            entry["outputs"] = []  # a non-tensor value (scalar); the planner treats it as constant
        if node_extra is not None:
            more = node_extra(node)
            if more:
                more = dict(more)
                extra = more.pop("extra", None)
                entry.update(more)
                if extra:  # merge: the exporter's own extra fields (output_positions) stay
                    entry.setdefault("extra", {}).update(extra)
        nodes.append(entry)
        ex.fx_nodes.append(node)
        ex.index_of[node] = len(nodes) - 1

    mesh = {"shape": [int(s) for s in mesh_shape]}
    if mesh_dim_names:
        mesh["dim_names"] = list(mesh_dim_names)
    ex.doc = {"mesh": mesh, "nodes": nodes}
    return ex


def decode_arg(a, tensor_of):
    """Inverse of the argument encoding; `tensor_of([node, output])` supplies tensors."""
    if isinstance(a, list):
        return [decode_arg(x, tensor_of) for x in a]
    if isinstance(a, dict):
        if "t" in a:
            return tensor_of(a["t"])
        if "dtype" in a:
            return getattr(torch, a["dtype"])
        if "device" in a:
            return torch.device(a["device"])
        if "float" in a:
            return float(a["float"])
        if "enum" in a:
            return getattr(torch, a["enum"].replace("torch.", ""))
        if "dict" in a:
            return {k: decode_arg(v, tensor_of) for k, v in a["dict"].items()}
        if "subgraph" in a:
            return a["subgraph"]  # a HOP body's attribute name (local_map regions)
        raise ValueError(f"cannot decode IR argument {a!r}")
    return a
