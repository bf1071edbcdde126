"""Reading local_map regions off FX nodes: ours (`localmap_hop` nodes, the region as a
JSON argument) and torch's own `local_map_hop` nodes (the region in node.meta)."""
from __future__ import annotations

from .._torch_private import op_types
from ..placements import spec_of
from .hop import localmap_hop
from .region import BACKWARD, FORWARD, Region


# ---- reading regions off FX nodes ---------------------------------------------------

def is_region_node(node) -> bool:
    """Whether `node` is one of our HOP nodes or an upstream torch local_map_hop node."""
    if getattr(node, "op", None) != "call_function":
        return False
    if node.target is localmap_hop:
        return True
    return _is_upstream_local_map(node)


def _is_upstream_local_map(node) -> bool:
    target = node.target
    return (isinstance(target, op_types.HigherOrderOperator) and target.name() == "local_map_hop") or (
        "local_map_kwargs" in node.meta and getattr(target, "__name__", "") == "call_local_map")


def region_of(node) -> Region | None:
    """The region of a local_map HOP node (ours or torch's local_map_hop), else None."""
    if getattr(node, "op", None) != "call_function":
        return None
    if node.target is localmap_hop:
        return Region.from_json(node.args[1])
    if _is_upstream_local_map(node) and node.meta.get("local_map_kwargs"):
        return _upstream_region(node)
    return None


def _upstream_region(node) -> Region:
    """Region of a torch 2.13 `local_map_hop` node from node.meta["local_map_kwargs"].

    Its args are (subgraph, *tensors); for joint-graph nodes (autoparallel's deferred
    inlining) the backward node's subgraph meta says is_backward and the leading
    `num_activations` inputs are saved activations with rank-local shapes (no spec).
    """
    kw = node.meta["local_map_kwargs"]
    mesh = kw.get("device_mesh")
    shape = tuple(int(s) for s in mesh.shape) if mesh is not None else ()
    names = tuple(mesh.mesh_dim_names) if mesh is not None and mesh.mesh_dim_names else None
    ins = tuple(spec_of(p) for p in kw.get("in_placements") or ())
    outs = tuple(spec_of(p) for p in kw.get("out_placements") or ())
    grads = kw.get("in_grad_placements")
    body = node.args[0] if node.args else None
    sub = getattr(getattr(node, "graph", None), "owning_module", None)
    gm_meta = {}
    if body is not None and getattr(body, "op", None) == "get_attr" and sub is not None:
        gm_meta = getattr(getattr(sub, body.target, None), "meta", {}) or {}
    role = BACKWARD if gm_meta.get("is_backward") else FORWARD
    n_act = int(gm_meta.get("num_activations", 0) or 0)
    if role == BACKWARD:
        ins = (None,) * n_act + ins  # activations are rank-local: no placement to pin
    return Region(
        name=f"upstream:{node.name}",
        mesh_shape=shape,
        mesh_dim_names=names,
        in_placements=ins,
        out_placements=outs,
        in_grad_placements=None if grads is None else tuple(spec_of(p) for p in grads),
        redistribute_inputs=bool(kw.get("redistribute_inputs", False)),
        role=role,
        num_saved_inputs=n_act,
    )
