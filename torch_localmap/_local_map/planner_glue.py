"""How the planner and executor see local_map regions.

The planner pins region nodes (forward and backward) to their declared placements; the
SPMD executor runs a region's body on the rank's local tensors (the HOP inlined). The
region logic lives in local_map.py / region.py; this file adapts it to the hooks that
plan.py, backend.py and spmd.py call.
"""
import torch

from .nodes import region_of
from .region import FORWARD

__all__ = ["node_extra", "node_fixed_placements", "region_body", "run_region_local", "run_region_node"]


def node_extra(fx_node):
    """Extra IR fields for a node: fixed placements of local_map regions, plus the work
    inside the region (so the planner charges its interior compute); the strict-input flag
    of a region's input constraints; or None. (Constraint nodes pin themselves in C++.)"""
    extra = node_fixed_placements(fx_node)
    if extra is not None:
        extra["extra"] = {**(extra.get("extra") or {}), "work": region_work(fx_node)}
        return extra
    if _feeds_strict_region(fx_node):
        # redistribute_inputs=False: the input arrives in its in_placements, so no
        # collective on the way into the region's input constraint either.
        return {"extra": {"no_input_redistribution": True}}
    return None


def _feeds_strict_region(fx_node) -> bool:
    if getattr(fx_node, "target", None) is not torch.ops.localmap.sharding_constraint.default:
        return False
    for user in fx_node.users:
        region = region_of(user)
        if region is not None and region.role == FORWARD and not region.redistribute_inputs:
            return True
    return False


def region_work(fx_node) -> dict:
    """FLOPs and bytes of a region's body on one rank's local tensors (one C++ call)."""
    from .. import _C
    from .._ir_export import export_graph

    body = region_body(fx_node)
    if not isinstance(body, torch.fx.GraphModule):
        return {"flops": 0.0, "bytes": 0.0}
    # The body is traced at local shapes: price it on a one-device mesh.
    flops, nbytes = _C.graph_work(export_graph(body, [1]).to_json())
    return {"flops": flops, "bytes": nbytes}


def run_region_node(fx_node, args, kwargs):
    """(True, outputs) when `fx_node` is a local_map region run on local tensors, else (False, None).

    `args` are the node's decoded call args with tensors already local and in the region's
    placements: ours are (subgraph name, region json, *tensors), torch's local_map_hop
    nodes (subgraph, *tensors); the tensors are what the body takes.
    """
    if region_of(fx_node) is None:
        return False, None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return True, run_region_local(fx_node, tensors)


def node_fixed_placements(node) -> dict | None:
    """`ir_export.export_graph(..., node_extra=node_fixed_placements)` hook.

    For a local_map HOP node (ours, forward or backward, or torch's local_map_hop):
    {"fixed": {"inputs": [spec per tensor input, in argument order],
               "outputs": [spec per tensor output],
               "region": name, "role": "forward" | "backward"}}; None for other nodes.
    """
    region = region_of(node)
    if region is None:
        return None
    n_tensor_in = sum(1 for a in node.args if isinstance(a, torch.fx.Node) and
                      isinstance(a.meta.get("val"), torch.Tensor))
    ins = list(region.in_placements)
    ins += [None] * (n_tensor_in - len(ins))
    val = node.meta.get("val")
    n_tensor_out = (sum(1 for v in val if isinstance(v, torch.Tensor)) if isinstance(val, (tuple, list))
                    else int(isinstance(val, torch.Tensor)))
    outs = list(region.out_placements)
    outs += [None] * (n_tensor_out - len(outs))
    out = {"fixed": {"inputs": ins, "outputs": outs, "region": region.name, "role": region.role}}
    if region.role == FORWARD and not region.redistribute_inputs:
        # As torch's local_map refuses inputs in other placements, the plan must produce
        # each input in its in_placements: no redistribution on the way in.
        out["extra"] = {"no_input_redistribution": True}
    return out


def region_body(node) -> torch.fx.GraphModule:
    """The subgraph (local shapes) of a local_map HOP node."""
    body = node.args[0]
    if isinstance(body, torch.fx.Node) and body.op == "get_attr":
        root = node.graph.owning_module
        if root is None:
            raise ValueError(f"node '{node.name}' is not in a GraphModule; cannot find its region body")
        return _torch_private_getattr(root, body.target)
    if callable(body):
        return body
    raise ValueError(f"node '{node.name}' has no region body (got {body!r})")


def _torch_private_getattr(root, target: str):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def run_region_local(node, local_args) -> tuple:
    """Runs a local_map HOP node's body on this rank's local tensors (the HOP inlined).

    `local_args` are the node's tensor inputs (node.args[2:] for ours), already in the
    placements node_fixed_placements(node)["fixed"]["inputs"] gives; the result is the
    tuple of local outputs, placed as its "outputs" say.
    """
    region = region_of(node)
    if region is None:
        raise ValueError(f"node '{node.name}' is not a local_map region node")
    # The body was traced on contiguous local inputs (hop._local_like): its graph may view
    # them assuming those strides (matmul's batch folding does). A shard of a transposed
    # tensor is not contiguous, so it gets the layout the graph was traced for.
    outs = region_body(node)(*[a.contiguous() if isinstance(a, torch.Tensor) else a for a in local_args])
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
