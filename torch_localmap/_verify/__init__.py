"""Numerical verification of every sharding strategy the C++ propagator emits
(`python -m torch_localmap verify-strategies`).

For one op instance (a "case": the op's IR node plus real global input values)
and one mesh, every strategy from `_C.enumerate_strategies` is checked:

1. each mesh coordinate's local inputs are built from the global inputs per the
   strategy's input specs: Shard -> the slice `_C.local_layout` names;
   Partial(sum) -> random pieces summing to the value; Partial(avg) -> pieces
   averaging to it; Partial(max/min) -> copies with entries lowered/raised except
   on one random owner coordinate;
2. the op runs once per coordinate, in this process, with the arguments
   `_C.local_call_args` gives for that coordinate (local sizes for view/expand/...);
3. outputs are reassembled per the output specs (Partial groups reduced, Shard
   pieces placed at their offsets, Replicate copies checked to agree) and compared
   with the op on the global inputs: float64 with a tight tolerance, integers exactly.

C++ makes every decision; this package only builds tensors. One module per role:

  op_case.py         OpCase (an op instance) and cutting cases out of an FX graph
  model_cases.py     cases from the reference models' joint graphs (tiny and edge sizes)
  hand_cases.py      cases from hand-made one-op programs
  opinfo_cases.py    cases from torch's OpInfo samples, for rules nothing else reaches
  collect.py         collect_cases: every source, deduplicated, diverse per op
  coverage.py        rules left unverified, and the rule-argument schema audit
  partial_pieces.py  exact Partial pieces of a value, and their reduction
  oracle.py          split a global value per spec / assemble outputs back (the oracle)
  check.py           verify_case: every strategy of one case on one mesh
  report.py          verify_cases: one mesh's totals; the CLI's mesh spelling
"""
from .check import EXCLUDED_OPS, SHAPE_ONLY_OPS, CaseResult, enumerate_case, op_callable, verify_case
from .collect import collect_cases, op_matches
from .coverage import CUDA_ONLY_OPS, VERIFIED_BY_TESTS, schema_mismatches, unverified_rules
from .hand_cases import hand_cases
from .model_cases import edge_configs
from .op_case import OpCase, cases_from_graph
from .oracle import Layouts, assemble, local_inputs
from .report import DEFAULT_MESHES, MeshReport, parse_mesh, verify_cases

__all__ = [
    "CUDA_ONLY_OPS", "DEFAULT_MESHES", "EXCLUDED_OPS", "SHAPE_ONLY_OPS", "VERIFIED_BY_TESTS", "CaseResult",
    "Layouts", "MeshReport", "OpCase", "assemble", "cases_from_graph", "collect_cases", "edge_configs",
    "enumerate_case", "hand_cases", "local_inputs", "op_callable", "op_matches", "parse_mesh",
    "schema_mismatches", "unverified_rules", "verify_case", "verify_cases",
]
