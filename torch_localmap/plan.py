"""Planning: joint graph -> IR -> C++ planner (one call) -> Plan."""
from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from . import _C
from .ir_export import ExportedGraph, export_graph
from .trace import JointGraph, trace_joint


@dataclass
class Plan:
    """A solved plan: per node its strategy, per parameter its placements, and costs."""

    doc: dict
    exported: ExportedGraph
    joint: JointGraph

    @property
    def summary(self) -> dict:
        return self.doc["summary"]

    @property
    def nodes(self) -> list:
        return self.doc["nodes"]

    def to_json(self) -> str:
        return json.dumps(self.doc, separators=(",", ":"))

    def param_placements(self) -> dict:
        """{parameter name: spec string} in parameter order."""
        out = {}
        for i, node in enumerate(self.exported.doc["nodes"]):
            if node["op"] == "placeholder" and node.get("role") == "param":
                out[node["extra"]["target"]] = self.nodes[i]["strategy"]["outputs"][0]
        return out

    def placeholder_specs(self) -> list:
        """Spec of every placeholder, in graph order."""
        return [self.nodes[i]["strategy"]["outputs"][0]
                for i, n in enumerate(self.exported.doc["nodes"]) if n["op"] == "placeholder"]


def _mesh_shape_and_names(mesh):
    if isinstance(mesh, (tuple, list)):
        return [int(s) for s in mesh], None
    shape = list(mesh.shape) if hasattr(mesh, "shape") else None
    if shape is None:
        raise TypeError(f"mesh must be a DeviceMesh or a tuple of sizes, got {type(mesh).__name__}")
    return [int(s) for s in shape], list(mesh.mesh_dim_names) if mesh.mesh_dim_names else None


def plan_options(mode="train", device="H100", time_limit=10.0, memory_limit=None, fixed_params=None,
                 calibration=None, fallback_replicate=True, seed=0) -> str:
    opts = {"mode": mode, "device": device, "time_limit": float(time_limit), "seed": int(seed),
            "fallback_replicate": bool(fallback_replicate)}
    if memory_limit is not None:
        opts["memory_limit"] = int(memory_limit)
    if fixed_params:
        opts["fixed_params"] = {k: _spec_str(v) for k, v in fixed_params.items()}
    if calibration is not None:
        opts["calibration"] = calibration if isinstance(calibration, str) else json.dumps(calibration)
    return json.dumps(opts)


def _spec_str(spec) -> str:
    from .placements import as_spec  # a spec string or torch placement objects

    return as_spec(spec)


def plan_joint(joint: JointGraph, mesh, *, node_extra=None, **options) -> Plan:
    shape, names = _mesh_shape_and_names(mesh)
    exported = export_graph(joint.gm, shape, names, node_extra=node_extra)
    doc = json.loads(_C.plan(exported.to_json(), plan_options(**options)))
    return Plan(doc=doc, exported=exported, joint=joint)


def plan_module(module: torch.nn.Module, mesh, example_inputs, **options) -> Plan:
    """Plans `module(*example_inputs)` (a scalar loss) on `mesh` (a DeviceMesh or a shape
    tuple for a simulated mesh). Tracing uses fake tensors: no real compute, no process group."""
    from .local_map_glue import node_extra  # local_map regions pin their placements

    joint = trace_joint(module, example_inputs)
    return plan_joint(joint, mesh, node_extra=node_extra, **options)
