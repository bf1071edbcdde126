"""torch_localmap: automatic parallelism planning for PyTorch training.

Public API (see docs/user_guide.md):
  parallelize(model, mesh, example_inputs)   plan + shard a module, train with DTensor params
  plan_module(model, mesh, example_inputs)   plan only (a mesh shape simulates a mesh)
  plan_factory("pkg.mod:build", mesh)        plan a model built on the meta device
  local_map(...)                             mark a function that runs on local shards
  with_sharding_constraint(x, placements)    pin a value's placements (and its gradient's)
  solve(problem)                             the strategy solver on its own
  torch.compile(model, backend="localmap", options={"mesh": mesh})   via an entry point

Public submodules: `plan` (Plan and its parts), `report` (reading a plan), `solver`, `placements`, `cost_model`,
`launch` (run_distributed for multi-process tests), `models`, `examples`. Modules whose
names start with an underscore are internal.
"""
import importlib

# Importing the package is cheap: the public names load on first use (PEP 562 __getattr__
# below), and torch is not imported for us: `python -m torch_localmap solve` runs without
# it, and its --time-limit is spent solving. The extension _C (torch.ops.localmap) loads
# with torch, whichever of the two is imported first (_ops_on_import.py).
_PUBLIC = {
    "MeshSpec": "._local_map",
    "Region": "._local_map",
    "RegionClosureError": "._local_map",
    "RegionMutationError": "._local_map",
    "local_map": "._local_map",
    "region_of": "._local_map",
    "use_mesh": "._local_map",
    "with_sharding_constraint": "._local_map",
    "ParallelModule": "._parallelize",
    "parallelize": "._parallelize",
    "PeerFailureError": "._runtime.failures",
    "NodePlan": ".plan",
    "Plan": ".plan",
    "PlanMismatchError": ".plan",
    "PlanSummary": ".plan",
    "SolverSummary": ".plan",
    "plan_module": ".plan",
    "plan_factory": "._factory",
    "InfeasibleError": ".solver",
    "MilpUnavailableError": ".solver",
    "SolveResult": ".solver",
    "load_problem": ".solver",
    "solve": ".solver",
}
# Public names are written once, as _PUBLIC's keys (name -> module that defines it).
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name == "_C":  # `from . import _C` lands here first: libtorch must be loaded before our extension
        import torch  # noqa: F401, PLC0415

        return importlib.import_module("._C", __name__)
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


from . import _log  # noqa: E402  (logging and os only: the import stays cheap)
from ._ops_on_import import load_ops_with_torch  # noqa: E402  (standard library only)

_log.configure_from_env()
# torch.ops.localmap.* exist once torch is imported too (now, if it already is).
load_ops_with_torch(__name__)

__version__ = "0.1.0"
