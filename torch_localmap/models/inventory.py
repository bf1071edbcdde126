"""Which aten ops appear in each model's joint graph, and which fall back to replicate.

Shared by benchmarks/op_inventory.py and the strategy verifier (which collects
the op instances of the tiny models' graphs).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from . import REGISTRY, build


@dataclass
class TracedModel:
    name: str
    joint: object  # trace.JointGraph
    exported: object  # ir_export.ExportedGraph


def trace_tiny(name: str, mesh_shape=(2, 2), batch: int = 2, seed: int = 0) -> TracedModel:
    from .._ir_export import export_graph
    from .._trace import trace_joint

    module, inputs = build(name, batch=batch, seed=seed)
    joint = trace_joint(module, inputs)
    return TracedModel(name, joint, export_graph(joint.gm, list(mesh_shape)))


def op_counts(exported) -> dict:
    counts: dict = {}
    for n in exported.nodes:
        if n.op not in ("placeholder", "output"):
            counts[n.op] = counts.get(n.op, 0) + 1
    return dict(sorted(counts.items()))


def fallback_ops(exported) -> dict | None:
    """op -> family for ops whose strategies fell back to replicate; None if C++ has no rules yet."""
    from .. import _C

    if not hasattr(_C, "enumerate_strategies"):
        return None
    result = json.loads(_C.enumerate_strategies(exported.to_json(), True))
    fell = {}
    for node, entry in zip(exported.nodes, result):
        if entry is not None and entry.get("fell_back"):
            fell[node.op] = entry.get("family", "")
    return dict(sorted(fell.items()))


def model_names() -> list:
    return list(REGISTRY)
