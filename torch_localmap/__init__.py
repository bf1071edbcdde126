"""torch_localmap: automatic parallelism planning for PyTorch training.

Public API (see docs/user_guide.md):
  parallelize(model, mesh, example_inputs)   plan + shard a module, train with DTensor params
  plan_module(model, mesh, example_inputs)   plan only (a mesh shape simulates a mesh)
  local_map(...)                             mark a function that runs on local shards
  solve(problem)                             the strategy solver on its own
  torch.compile(model, backend="localmap", options={"mesh": mesh})   via an entry point
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401
from .parallelize import ParallelModule, parallelize  # noqa: F401
from .plan import Plan, plan_module  # noqa: F401
from .solver import solve  # noqa: F401
from .local_map import local_map, use_mesh  # noqa: E402  (local_map.use_mesh etc. also work)
from .region import Region, region_of  # noqa: E402

__version__ = "0.1.0"
