"""Planning: joint graph -> IR -> C++ planner (one call) -> Plan."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

import torch

from . import _C, _torch_private
from ._mesh import mesh_shape_and_names
from .runtime.failures import failure_scope
from .ir_export import ExportedGraph, export_graph
from .trace import JointGraph, trace_joint


@dataclass
class Plan:
    """A solved plan: per node its strategy, per parameter its placements, and costs.

    A plan loaded from a file (`Plan.load`) has the document only (exported and joint
    are None): enough to read and report, not to run.
    """

    doc: dict
    exported: ExportedGraph | None
    joint: JointGraph | None

    FORMAT_VERSION = _C.PLAN_FORMAT_VERSION

    def save(self, path) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path) -> "Plan":
        """Reads a plan file written by `save` (or `plan --out`); checks its format version."""
        with open(path) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"plan file {path}: not JSON ({e})") from None
        if not isinstance(doc, dict) or "format_version" not in doc:
            raise ValueError(f"plan file {path}: no format_version; expected a plan document written by "
                             f"torch_localmap (format_version {cls.FORMAT_VERSION})")
        if doc["format_version"] != cls.FORMAT_VERSION:
            raise ValueError(f"plan file {path}: format_version {doc['format_version']!r}; this torch_localmap "
                             f"reads format_version {cls.FORMAT_VERSION}")
        for key in ("mesh", "nodes", "summary"):
            if key not in doc:
                raise ValueError(f"plan file {path}: missing field '{key}'")
        return cls(doc=doc, exported=None, joint=None)

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


def _agreed_plan_json(ir_json: str, options_json: str, mesh, timeout) -> str:
    """Plans on one rank and broadcasts, so every rank runs the same plan even when a
    time-limited solve could end differently on different processes."""
    import torch.distributed as dist

    from .runtime.groups import world_group

    if not hasattr(mesh, "get_group") or not dist.is_initialized() or mesh.size() == 1:
        return _C.plan(ir_json, options_json)
    if mesh.size() != dist.get_world_size():
        raise ValueError(f"mesh has {mesh.size()} devices but the world size is {dist.get_world_size()}; "
                         "expected a mesh covering every rank")
    pg, src = world_group(timeout), 0  # the mesh covers every rank
    box = [None]
    if dist.get_rank() == src:
        try:
            box[0] = ("ok", _C.plan(ir_json, options_json))
        except (ValueError, RuntimeError) as e:  # every rank must raise, not hang
            box[0] = (type(e).__name__, str(e))
    with _torch_private.outside_fake_mode(), failure_scope():
        dist.broadcast_object_list(box, src=src, group=pg)
    kind, payload = box[0]
    if kind != "ok":
        raise (ValueError if kind == "ValueError" else RuntimeError)(payload)
    return payload


def plan_joint(joint: JointGraph, mesh, *, node_extra=None, timeout=None, **options) -> Plan:
    """Plans a traced joint graph. With a process group, rank 0 plans and broadcasts over
    the runtime's world group (`timeout`: runtime/groups.py)."""
    from .runtime.groups import DEFAULT_TIMEOUT, as_timeout

    shape, names = mesh_shape_and_names(mesh)
    exported = export_graph(joint.gm, shape, names, node_extra=node_extra)
    timeout = DEFAULT_TIMEOUT if timeout is None else as_timeout(timeout)
    doc = json.loads(_agreed_plan_json(exported.to_json(), plan_options(**options), mesh, timeout))
    note = doc["summary"]["solver"].get("note")
    if note:  # the plan is still valid, but was found without the MILP phases
        warnings.warn(f"torch_localmap: {note}", stacklevel=3)
    fell_back = doc["summary"].get("fallback_ops")
    if fell_back:
        warnings.warn(f"torch_localmap: no sharding rule for {', '.join(fell_back)}; these ops run replicated. "
                      "Wrap them in torch_localmap.local_map to choose placements, or pass "
                      "fallback_replicate=False to make this an error.", stacklevel=3)
    return Plan(doc=doc, exported=exported, joint=joint)


def plan_module(module: torch.nn.Module, mesh, example_inputs, **options) -> Plan:
    """Plans `module(*example_inputs)` (a scalar loss) on `mesh` (a DeviceMesh or a shape
    tuple for a simulated mesh). Tracing uses fake tensors: no real compute, no process group."""
    from .local_map_glue import node_extra, use_mesh  # local_map regions pin their placements

    with use_mesh(mesh):  # regions without device_mesh trace on the mesh being planned for
        joint = trace_joint(module, example_inputs)
    return plan_joint(joint, mesh, node_extra=node_extra, **options)
