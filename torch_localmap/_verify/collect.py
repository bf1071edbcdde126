"""The case list verify-strategies runs: every source, deduplicated, a few diverse instances per op."""
from __future__ import annotations

import dataclasses
import functools

import torch

from .. import _C
from .coverage import CUDA_ONLY_OPS, VERIFIED_BY_TESTS
from .hand_cases import hand_cases
from .model_cases import edge_configs, model_cases
from .op_case import case_key
from .opinfo_cases import opinfo_cases


def collect_cases(seed: int = 0, op_filter: str | None = None, sources=("models", "edge", "hand", "opinfo"),
                  max_per_op: int = 6) -> list:
    """Distinct op instances (op, arguments, input shapes/dtypes) with real input values.

    At most `max_per_op` instances per op (0: all), picked round-robin over input
    rank/dtype signatures with edge and hand-made shapes first, so each op keeps its
    most different instances and the default run stays CI-fast.
    """
    by_op = {}
    for c in _distinct_cases(seed, tuple(sources), op_filter or None):
        if not op_filter or op_matches(c.op, op_filter):
            by_op.setdefault(c.op, []).append(c)
    out = []
    for op in sorted(by_op):
        out += _diverse(by_op[op], max_per_op)
    return out


@functools.lru_cache(maxsize=4)
def _distinct_cases(seed: int, sources: tuple, op_filter: str | None = None) -> tuple:
    """All distinct instances, traced once per process (tracing dominates collection time).
    Callers must not mutate the cases' tensors (verification only reads them). With an
    op filter the OpInfo pass, most of the collection's time, samples only the matching ops."""
    from .. import models

    torch.manual_seed(seed)
    cases = []
    if "edge" in sources:
        for name, cfg, batch in edge_configs():
            cases += model_cases(name, cfg, batch, seed, f"edge:{name}")
    if "hand" in sources:
        cases += hand_cases(seed)
    if "models" in sources:
        for name in models.REGISTRY:
            cfg = models.tiny_config(name)
            if hasattr(cfg, "n_layers"):  # one layer holds every op of the stack
                cfg = dataclasses.replace(cfg, n_layers=1)
            cases += model_cases(name, cfg, 2, seed, name)
    if "opinfo" in sources:  # the rules nothing above reached
        wanted = set(_C.ops_with_rules()) - {c.op for c in cases} - set(CUDA_ONLY_OPS) - set(VERIFIED_BY_TESTS)
        if op_filter:
            wanted = {op for op in wanted if op_matches(op, op_filter)}
        extra, note = opinfo_cases(wanted, seed) if wanted else ([], "")
        if note:
            raise RuntimeError(f"verify-strategies: {note} ({len(wanted)} rules would go unverified)")
        cases += extra
    seen, out = set(), []
    for c in cases:
        key = case_key(c)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return tuple(out)


def _diverse(cases: list, limit: int) -> list:
    if limit <= 0 or len(cases) <= limit:
        return cases
    groups = {}
    for c in cases:
        groups.setdefault(tuple((t.dim(), str(t.dtype)) for t in c.inputs), []).append(c)
    picked, queues = [], [list(g) for g in groups.values()]
    while len(picked) < limit:
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return picked


def op_matches(op: str, name: str) -> bool:
    """--op accepts "aten.mm.default", "aten.mm", "mm" or "mm.default"."""
    parts = op.split(".")
    short = parts[1] if len(parts) > 1 else op
    return name in (op, short, ".".join(parts[:2]), ".".join(parts[1:]))
