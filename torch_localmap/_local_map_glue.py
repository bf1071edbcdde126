"""How the planner and executor see local_map regions.

The planner pins region nodes (forward and backward) to their declared placements; the
SPMD executor runs a region's body on the rank's local tensors (the HOP inlined). The
region logic lives in local_map.py / region.py; this file adapts it to the hooks that
plan.py, backend.py and spmd.py call.
"""
import torch

from ._local_map import node_fixed_placements, run_region_local as _run_region_local, use_mesh
from ._region import region_of

__all__ = ["node_extra", "run_region_local", "use_mesh"]


def node_extra(fx_node):
    """Extra IR fields for a node: fixed placements of local_map regions, plus the work
    inside the region (so the planner charges its interior compute), or None."""
    extra = node_fixed_placements(fx_node)
    if extra is not None:
        extra["extra"] = {**(extra.get("extra") or {}), "work": region_work(fx_node)}
    return extra


def region_work(fx_node) -> dict:
    """FLOPs and bytes of a region's body on one rank's local tensors (one C++ call)."""
    from . import _C
    from ._ir_export import export_graph
    from ._local_map import region_body

    body = region_body(fx_node)
    if not isinstance(body, torch.fx.GraphModule):
        return {"flops": 0.0, "bytes": 0.0}
    # The body is traced at local shapes: price it on a one-device mesh.
    flops, nbytes = _C.graph_work(export_graph(body, [1]).to_json())
    return {"flops": flops, "bytes": nbytes}


def run_region_local(fx_node, args, kwargs):
    """(True, outputs) when `fx_node` is a local_map region run on local tensors, else (False, None).

    `args` are the node's decoded call args with tensors already local and in the region's
    placements: ours are (subgraph name, region json, *tensors), torch's local_map_hop
    nodes (subgraph, *tensors); the tensors are what the body takes.
    """
    if region_of(fx_node) is None:
        return False, None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return True, _run_region_local(fx_node, tensors)
