"""One mesh's verification totals (per family), and the CLI's mesh spelling."""
from __future__ import annotations

from dataclasses import dataclass, field

from .check import EXCLUDED_OPS, verify_case
from .oracle import Layouts


def parse_mesh(text: str) -> tuple:
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--mesh must look like 2x2 or 2x1x2, got '{text}'") from None
    if not shape or any(n <= 0 for n in shape) or len(shape) > 4:
        raise ValueError(f"--mesh needs 1 to 4 positive sizes, got '{text}'")
    return shape


DEFAULT_MESHES = ((2,), (2, 2), (2, 1, 2), (3, 2))


@dataclass
class MeshReport:
    mesh: tuple
    ops: set = field(default_factory=set)
    strategies: int = 0
    failures: list = field(default_factory=list)
    fallback_ops: set = field(default_factory=set)
    per_family: dict = field(default_factory=dict)  # family -> [cases, strategies, failures]


def verify_cases(cases: list, mesh_shape, seed: int = 0) -> MeshReport:
    rep = MeshReport(mesh=tuple(mesh_shape))
    layouts = Layouts()
    for i, case in enumerate(cases):
        if case.op in EXCLUDED_OPS:
            continue
        r = verify_case(case, mesh_shape, seed=seed * 1000003 + i, layouts=layouts)
        if r.fell_back:
            rep.fallback_ops.add(case.op)
            continue
        rep.ops.add(case.op)
        rep.strategies += r.strategies
        rep.failures += r.failures
        fam = rep.per_family.setdefault(r.family or "?", [0, 0, 0])
        fam[0] += 1
        fam[1] += r.strategies
        fam[2] += len(r.failures)
    return rep
