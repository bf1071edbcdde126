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

from ._torch_private import descriptors, node_meta, op_types
from ._torch_private.pytrees import pytree


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple
    dtype: str  # "float32", as in the IR


@dataclass(frozen=True)
class IrNode:
    """One node of the planner IR, typed (what the runtime and reports read)."""

    name: str
    op: str  # "placeholder", "output", or an overload name such as "aten.mm.default"
    role: str  # placeholders: "param" | "buffer" | "input" | "tangent" | "constant"; "" otherwise
    target: str  # placeholders: parameter/buffer FQN, flat input index, constant attribute; "" otherwise
    args: list  # IR argument encoding (module docstring)
    kwargs: dict
    outputs: tuple  # TensorMeta per tensor output
    output_positions: tuple = ()  # multi-output ops: tuple position of each tensor output
    fixed: dict | None = None  # local_map regions: pinned placements (local_map.node_fixed_placements)
    # The output node: per graph output its role ("mutation" | "output" | "grad" | "input_grad"
    # | "none") and target (buffer FQN, output index, parameter FQN, input index).
    output_roles: tuple = ()
    output_targets: tuple = ()
    extra: dict = field(default_factory=dict)  # other exporter fields, passed to C++ as is

    def document(self) -> dict:
        """This node in the IR document (csrc/core/graph.h)."""
        d = {"name": self.name, "op": self.op}
        if self.role:
            d["role"] = self.role
        d["args"] = self.args
        d["kwargs"] = self.kwargs
        d["outputs"] = [{"shape": list(m.shape), "dtype": m.dtype} for m in self.outputs]
        extra = dict(self.extra)
        if self.target:
            extra["target"] = self.target
        if self.output_positions:
            extra["output_positions"] = list(self.output_positions)
        if self.op == "output":
            extra["roles"], extra["targets"] = list(self.output_roles), list(self.output_targets)
        if self.fixed is not None:
            d["fixed"] = self.fixed
        if extra:
            d["extra"] = extra
        return d


@dataclass
class ExportedGraph:
    """The planner IR of an FX graph (typed nodes) plus the mapping back to FX nodes."""

    nodes: list  # IrNode per IR node, in graph order; the output node last
    mesh_shape: tuple
    mesh_dim_names: tuple | None
    fx_nodes: list  # IR node index -> fx.Node
    index_of: dict  # fx.Node -> IR node index
    # fx.Node -> {tuple position -> IR output index} for multi-output nodes
    output_slots: dict = field(default_factory=dict)
    subgraphs: set = field(default_factory=set)  # get_attr nodes of HOP subgraphs (not exported)
    constants: dict = field(default_factory=dict)  # get_attr nodes of tensor constants -> attribute name

    def document(self) -> dict:
        mesh = {"shape": list(self.mesh_shape)}
        if self.mesh_dim_names:
            mesh["dim_names"] = list(self.mesh_dim_names)
        return {"mesh": mesh, "nodes": [n.document() for n in self.nodes]}

    def to_json(self) -> str:
        return json.dumps(self.document(), separators=(",", ":"))

    def placeholders(self) -> list:
        """(IR index, IrNode) of every placeholder (tensor constants included), in graph order."""
        return [(i, n) for i, n in enumerate(self.nodes) if n.op == "placeholder"]

    def meta_of_output(self, k: int) -> TensorMeta:
        """Tensor meta of graph output k (the output node's k-th argument)."""
        ref = self.nodes[-1].args[0][k]["t"]
        return self.nodes[ref[0]].outputs[ref[1]]

    def outputs(self) -> list:
        """(role, target) of every graph output, in order (see IrNode.output_roles)."""
        out = self.nodes[-1]
        return list(zip(out.output_roles, out.output_targets))


_DTYPE_NAMES: dict = {}  # torch.dtype -> "float32" (str() of a dtype costs more than the rest of a meta)


def _tensor_meta(val) -> TensorMeta:
    dtype = _DTYPE_NAMES.get(val.dtype)
    if dtype is None:
        dtype = _DTYPE_NAMES[val.dtype] = str(val.dtype).replace("torch.", "")
    return TensorMeta(shape=tuple(map(int, val.shape)), dtype=dtype)


def _op_name(target) -> str:
    if isinstance(target, op_types.OpOverload):
        return str(target)  # "aten.mm.default"
    if isinstance(target, op_types.HigherOrderOperator):
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
            if all(type(x) is int for x in a):  # sizes, dims: most lists of a graph (70B: 0.2 s of its export)
                return list(a)
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
    "fixed" placements of local_map regions, or an "extra" dict) without this module
    knowing them.
    """
    ex = ExportedGraph(nodes=[], mesh_shape=tuple(int(s) for s in mesh_shape),
                       mesh_dim_names=tuple(mesh_dim_names) if mesh_dim_names else None, fx_nodes=[], index_of={})
    enc = _Encoder(ex)
    block_names = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            continue  # folded into references
        if node.op == "get_attr" and isinstance(_attr(gm, node.target), fx.GraphModule):
            ex.subgraphs.add(node)
            continue  # a HOP's subgraph: referenced by name from the HOP node's args
        fields = {"name": node.name}
        if node.op == "placeholder":
            if not isinstance(node.meta.get("val"), torch.Tensor):
                if node.users:
                    raise ValueError(f"graph input '{node.name}' is not a tensor but the graph computes with it")
                continue  # a non-tensor argument: specialized into the graph (a constant of the plan)
            role, target = descriptors.describe_input(node.meta.get("desc"))
            fields.update(op="placeholder", role=role, target=target or "", args=[], kwargs={})
            if role == "tangent":  # the gradient of forward output `target`
                fields.update(target="", extra={"output": target})
        elif node.op == "get_attr":
            if not isinstance(_attr(gm, node.target), torch.Tensor):
                raise ValueError(f"graph attribute '{node.target}' is neither a subgraph nor a tensor")
            ex.constants[node] = node.target  # a tensor constant: the program takes it as an input
            fields.update(op="placeholder", role="constant", target=str(node.target), args=[], kwargs={})
        elif node.op == "output":
            outs = node.args[0]
            flat = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            descs = node.meta.get("desc") or [None] * len(flat)
            roles, targets = [], []
            for v, d in zip(flat, descs):
                role, target = descriptors.describe_output(d) if d is not None else ("output", "")
                if v is None:
                    role, target = "none", ""
                roles.append(role)
                targets.append(target)
            fields.update(op="output", role="", target="", args=[[enc.arg(v) for v in flat]], kwargs={},
                          output_roles=tuple(roles), output_targets=tuple(targets))
        elif node.op == "call_function":
            fields.update(op=_op_name(node.target), role="", target="", args=enc.arg(list(node.args)),
                          kwargs={k: enc.arg(v) for k, v in node.kwargs.items()})
            # Only a HOP takes a subgraph; the pytree walk of every node's arguments cost 0.5 s of
            # a 70B export.
            takes_subgraph = bool(ex.subgraphs) and any(a in ex.subgraphs for a in node.all_input_nodes)
            reads = _subgraph_reads(gm, node, ex.subgraphs) if takes_subgraph else {}
            if reads:
                fields["extra"] = {"subgraph_reads": reads,
                                   "subgraph_index_buffers": _subgraph_index_buffers(gm, node, ex.subgraphs)}
            if node_meta.is_backward_node(node):  # the planner's recompute choices need the phase
                fields["extra"] = {**fields.get("extra", {}), "backward": True}
            if fields["op"] in STORAGE_READING_OPS:
                fields["extra"] = {**fields.get("extra", {}), "contiguous_inputs": _contiguous_inputs(node)}
        else:
            raise ValueError(f"unsupported FX node '{node.name}' ({node.op}); the planner takes flat aten graphs")
        fields["outputs"] = () if node.op == "output" else _outputs(ex, node, fields)
        block = _block_of(node, fields, block_names)
        if block:  # repeated blocks are placed alike (core/symmetry.h)
            fields["extra"] = {**fields.get("extra", {}), "block": block}
        if node_extra is not None and node.op != "output":
            more = dict(node_extra(node) or {})
            if "fixed" in more:
                fields["fixed"] = more.pop("fixed")
            fields["extra"] = {**fields.get("extra", {}), **(more.pop("extra", {}) or {})}
            if more:
                raise ValueError(f"node_extra returned unknown IR fields {sorted(more)} for node '{node.name}'")
        ex.nodes.append(IrNode(**fields))
        ex.fx_nodes.append(node)
        ex.index_of[node] = len(ex.nodes) - 1
    return ex


def _block_of(node: fx.Node, fields: dict, block_names: dict) -> str:
    """The repeated block ("layers.3") a node or parameter belongs to, or "". `block_names`
    memoizes it per module path (a block's nodes share a few paths)."""
    from ._trace import MODULE_ANNOTATION  # noqa: PLC0415

    if node.op == "placeholder":
        path = (fields.get("target") or "") if fields.get("role") in ("param", "buffer") else ""
    elif node.op == "call_function":
        path = node_meta.node_annotations(node).get(MODULE_ANNOTATION) or ""
    else:
        return ""
    block = block_names.get(path)
    if block is None:
        from ._ac_policy import block_of  # noqa: PLC0415

        block = block_names[path] = block_of(path)
    return block


# Ops whose result depends on their inputs' memory layout, not only their values: the
# IR records whether each tensor input was contiguous when traced (C++ shards them only
# then; the runtime keeps those inputs contiguous, _spmd.py).
STORAGE_READING_OPS = frozenset({"aten.as_strided.default", "aten.as_strided_scatter.default"})


def _contiguous_inputs(node: fx.Node) -> list:
    """Per tensor input occurrence (the IR's tensor_inputs order): contiguous when traced."""
    flags = []

    def visit(a):
        if isinstance(a, fx.Node):
            v = a.meta.get("val")
            flags.append(bool(isinstance(v, torch.Tensor) and v.is_contiguous() and v.storage_offset() == 0))
        elif isinstance(a, (list, tuple)):
            for x in a:
                visit(x)
        elif isinstance(a, dict):
            for x in a.values():
                visit(x)

    visit(list(node.args))
    visit(dict(node.kwargs))
    return flags


def _subgraph_reads(gm: fx.GraphModule, node: fx.Node, subgraphs: set) -> dict:
    """For each subgraph a HOP node takes (its attribute name), whether each of the
    subgraph's inputs is read: flex_attention's score_mod / mask_mod see the rank's local
    batch and head indices, so its rule shards a dim only where no subgraph reads its index."""
    out = {}
    for a in pytree.tree_leaves((node.args, node.kwargs)):
        if isinstance(a, fx.Node) and a in subgraphs:
            body = _attr(gm, a.target)
            out[str(a.target)] = [bool(p.users) for p in body.graph.nodes if p.op == "placeholder"]
    return out


def _subgraph_index_buffers(gm: fx.GraphModule, node: fx.Node, subgraphs: set) -> dict:
    """For each subgraph a HOP node takes, per input: the [input, dim] pairs of the buffers
    it indexes when it is read only as index `dim` of aten.index.Tensor on other inputs that
    are themselves indexed only with it at that dim (a document mask's `ids[b, q_idx]`);
    else None. Sharding those buffers on `dim` as the index's own dim keeps each local index
    pointing at the same value, so flex_attention's rule may shard a dim whose index is read
    this way."""
    out = {}
    for a in pytree.tree_leaves((node.args, node.kwargs)):
        if isinstance(a, fx.Node) and a in subgraphs:
            body = _attr(gm, a.target)
            inputs = [p for p in body.graph.nodes if p.op == "placeholder"]
            out[str(a.target)] = [_indexed_buffers(p, inputs) for p in inputs]
    return out


def _indexed_buffers(index: fx.Node, inputs: list):
    def positions(use, of):
        return [d for d, x in enumerate(use.args[1]) if x is of] if use.target is torch.ops.aten.index.Tensor else []

    pairs = set()
    for use in index.users:
        dims = positions(use, index)
        buf = use.args[0] if dims else None
        if len(dims) != 1 or buf is index or buf not in inputs:
            return None
        if any(positions(other, index) != dims or other.args[0] is not buf for other in buf.users):
            return None
        pairs.add((inputs.index(buf), dims[0]))
    return [list(p) for p in sorted(pairs)] if pairs else None


def _outputs(ex: ExportedGraph, node: fx.Node, fields: dict) -> tuple:
    """Tensor metas of a node's value; records tuple positions of multi-output nodes."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return (_tensor_meta(val),)
    if isinstance(val, (list, tuple)):
        metas, slots = [], {}
        for pos, v in enumerate(val):
            if isinstance(v, torch.Tensor):
                slots[pos] = len(metas)
                metas.append(_tensor_meta(v))
        ex.output_slots[node] = slots
        fields["output_positions"] = tuple(sorted(slots))
        return tuple(metas)
    return ()  # None or a non-tensor value (a scalar): the planner treats it as constant


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
