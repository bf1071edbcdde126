"""torch_localmap: automatic parallelism planning for PyTorch training.

Public API (see docs/user_guide.md):
  parallelize(model, mesh, example_inputs)   plan + shard a module, train with DTensor params
  plan_module(model, mesh, example_inputs)   plan only (a mesh shape simulates a mesh)
  local_map(...)                             mark a function that runs on local shards
  with_sharding_constraint(x, placements)    pin a value's placements (and its gradient's)
  solve(problem)                             the strategy solver on its own
  torch.compile(model, backend="localmap", options={"mesh": mesh})   via an entry point

Public submodules: `plan` (Plan and its parts), `solver`, `placements`, `cost_model`,
`launch` (run_distributed for multi-process tests), `models`, `examples`. Modules whose
names start with an underscore are internal.
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401
from ._local_map import (MeshSpec, Region, RegionClosureError, RegionMutationError, local_map, region_of, use_mesh,
                         with_sharding_constraint)
from ._parallelize import ParallelModule, parallelize
from ._runtime.failures import PeerFailureError
from .plan import NodePlan, Plan, PlanSummary, SolverSummary, plan_module
from .solver import InfeasibleError, MilpUnavailableError, SolveResult, load_problem, solve

__version__ = "0.1.0"

__all__ = [
    "InfeasibleError",
    "MeshSpec",
    "MilpUnavailableError",
    "NodePlan",
    "ParallelModule",
    "PeerFailureError",
    "Plan",
    "PlanSummary",
    "Region",
    "RegionClosureError",
    "RegionMutationError",
    "SolveResult",
    "SolverSummary",
    "load_problem",
    "local_map",
    "parallelize",
    "plan_module",
    "region_of",
    "solve",
    "use_mesh",
    "with_sharding_constraint",
]
