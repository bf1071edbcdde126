"""local_map: functions that run on local shards, as one package.

  region.py        Region: a region's typed placements (pure data, JSON on HOP nodes)
  hop.py           the local_map higher-order operator and its implementations
  nodes.py         reading regions off FX nodes (ours and torch's local_map_hop)
  decorator.py     `local_map` itself (eager DTensor semantics, the HOP on global
                   tensors between sharding-constraint ops), `use_mesh`
  ops.py           the C++ ops (torch.ops.localmap) as called here
  constraint.py    `with_sharding_constraint` (public) over localmap.sharding_constraint
  planner_glue.py  what the planner (pins) and the SPMD executor (local bodies) call

Imports go one way: region, ops <- hop <- nodes <- decorator <- constraint, planner_glue.
"""
from .constraint import with_sharding_constraint
from .decorator import MeshSpec, current_mesh, local_map, use_mesh
from .hop import RegionClosureError, RegionMutationError, localmap_hop
from .nodes import is_region_node, region_of
from .ops import constrain
from .planner_glue import node_extra, node_fixed_placements, region_body, run_region_local, run_region_node
from ..placements import placements_of, spec_of  # re-exported: the one converter lives in placements.py
from .region import BACKWARD, FORWARD, Region, grad_spec_of

__all__ = [
    "BACKWARD", "FORWARD", "MeshSpec", "Region", "RegionClosureError", "RegionMutationError", "constrain",
    "current_mesh", "grad_spec_of", "is_region_node", "local_map", "localmap_hop", "node_extra",
    "node_fixed_placements", "placements_of", "region_body", "region_of", "run_region_local", "run_region_node",
    "spec_of", "use_mesh", "with_sharding_constraint",
]
