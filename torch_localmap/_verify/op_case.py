"""One op instance to verify (an `OpCase`: its IR node plus real global inputs), cut out of an
FX graph run on real tensors."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch
import torch.fx as fx


@dataclass
class OpCase:
    op: str
    source: str                 # where the instance came from ("llama", "edge:vit", "hand:mm", ...)
    node: dict                  # the op's IR node; tensor refs point at placeholders 0..k-1
    inputs: list                # global input tensors, one per tensor argument occurrence
    input_shapes: list = field(default_factory=list)

    def doc(self, mesh_shape) -> dict:
        nodes = [{"name": f"in{i}", "op": "placeholder", "role": "input", "args": [], "kwargs": {},
                  "outputs": [tensor_meta(t)]} for i, t in enumerate(self.inputs)]
        k = len(nodes)
        nodes.append(self.node)
        outs = [{"t": [k, i]} for i in range(len(self.node["outputs"]))]
        nodes.append({"name": "output", "op": "output", "args": [outs], "kwargs": {}})
        return {"mesh": {"shape": list(mesh_shape)}, "nodes": nodes}

    @property
    def node_index(self) -> int:
        return len(self.inputs)

    def describe(self) -> str:
        return f"{self.op} inputs {self.input_shapes} ({self.source})"


def tensor_meta(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}


def _remap_refs(arg, occurrences: list):
    """Replaces every tensor ref by a fresh placeholder index (one per occurrence, depth first,
    args before kwargs: the IR's tensor_inputs order)."""
    if isinstance(arg, list):
        return [_remap_refs(a, occurrences) for a in arg]
    if isinstance(arg, dict):
        if "t" in arg:
            occurrences.append(tuple(arg["t"]))
            return {"t": [len(occurrences) - 1, 0]}
        if "dict" in arg:
            return {"dict": {k: _remap_refs(v, occurrences) for k, v in arg["dict"].items()}}
    return arg


def _run_graph(gm: fx.GraphModule, placeholder_values: list) -> dict:
    """Runs an FX graph on real tensors, returning every node's value."""
    env = {}
    it = iter(placeholder_values)
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(it)
        elif n.op == "call_function":
            args = fx.node.map_arg(n.args, lambda a: env[a])
            kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
            env[n] = n.target(*args, **kwargs)
        elif n.op == "output":
            break
        else:
            raise ValueError(f"unexpected FX node {n.op} {n.name}")
    return env


def cases_from_graph(gm: fx.GraphModule, placeholder_values: list, source: str) -> list:
    """One OpCase per op node of `gm`, with the values the graph computes on `placeholder_values`."""
    from .._ir_export import export_graph

    env = _run_graph(gm, placeholder_values)
    ex = export_graph(gm, [1])

    def value(ref):
        node_idx, out_idx = ref
        fxn = ex.fx_nodes[node_idx]
        v = env[fxn]
        if isinstance(v, (tuple, list)):
            slots = ex.output_slots[fxn]
            pos = next(p for p, o in slots.items() if o == out_idx)
            return v[pos]
        return v

    cases = []
    for i, node in enumerate(ex.document()["nodes"]):
        if node["op"] in ("placeholder", "output") or not node.get("outputs"):
            continue
        occ: list = []
        new = dict(node)
        new["args"] = _remap_refs(node["args"], occ)
        new["kwargs"] = {k: _remap_refs(v, occ) for k, v in node["kwargs"].items()}
        new["kwargs"] = dict(new["kwargs"])
        inputs = [value(r) for r in occ]
        if not all(isinstance(t, torch.Tensor) for t in inputs):
            continue
        cases.append(OpCase(op=node["op"], source=source, node=new, inputs=[t.detach().clone() for t in inputs],
                            input_shapes=[list(t.shape) for t in inputs]))
    return cases


def case_key(c: OpCase) -> str:
    node = {k: c.node[k] for k in ("op", "args", "kwargs", "outputs")}
    return json.dumps([node, [tensor_meta(t) for t in c.inputs]], sort_keys=True)
