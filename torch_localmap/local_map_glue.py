"""How the planner and executor see local_map regions.

The planner pins region nodes (forward and backward) to their declared placements; the
SPMD executor runs a region's body on the rank's local tensors (the HOP inlined). The
region logic lives in local_map.py / region.py; this file adapts it to the hooks that
plan.py, backend.py and spmd.py call.
"""
import torch

from .local_map import node_fixed_placements, run_region_local as _run_region_local, use_mesh
from .region import region_of

__all__ = ["node_extra", "run_region_local", "use_mesh"]


def node_extra(fx_node):
    """Extra IR fields for a node (fixed placements of local_map regions), or None."""
    return node_fixed_placements(fx_node)


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
