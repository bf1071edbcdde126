"""Typed placement metadata of a local_map region (what the planner pins).

A `Region` is a frozen value: mesh shape and dim names, one placement spec
string per tensor input and output ("S(0)RS(1)", the spelling of
csrc/core/placement.h), the input-gradient specs, and a stable name built from
the function's qualified name and source line.

Where it lives: our HOP nodes carry the region as a JSON string *argument*
(`localmap_hop(body, region_json, *tensors)`), not only in `node.meta`. Node
arguments are the graph itself, so the metadata survives `copy.deepcopy`,
recompilation, re-tracing the graph with make_fx/aot_autograd and pickling,
where `node.meta` entries can be dropped. `region_of(node)` reads it back.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace

import torch

FORWARD = "forward"
BACKWARD = "backward"


@dataclass(frozen=True)
class Region:
    name: str
    mesh_shape: tuple
    mesh_dim_names: tuple | None
    # One spec per tensor input / output of the HOP node, in argument order.
    in_placements: tuple
    out_placements: tuple
    # Placements of the gradients w.r.t. the tensor inputs (forward regions only;
    # None = derived from in_placements with Partial -> Replicate, as DTensor's to_local).
    in_grad_placements: tuple | None = None
    redistribute_inputs: bool = False
    role: str = FORWARD  # FORWARD or BACKWARD (the region's gradient computation)
    # Backward regions: how many of the inputs are forward inputs (the rest are
    # tangents of the forward outputs) -- informational.
    num_saved_inputs: int = 0
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def to_json(self) -> str:
        doc = {
            "name": self.name,
            "role": self.role,
            "mesh": {"shape": list(self.mesh_shape),
                     "dim_names": list(self.mesh_dim_names) if self.mesh_dim_names else None},
            "in_placements": list(self.in_placements),
            "out_placements": list(self.out_placements),
            "in_grad_placements": None if self.in_grad_placements is None else list(self.in_grad_placements),
            "redistribute_inputs": self.redistribute_inputs,
            "num_saved_inputs": self.num_saved_inputs,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "Region":
        return _parse_region(text)

    @property
    def grad_placements(self) -> tuple:
        """Specs of the input gradients (forward regions)."""
        if self.in_grad_placements is not None:
            return self.in_grad_placements
        return tuple(grad_spec_of(s) for s in self.in_placements)

    def with_(self, **changes) -> "Region":
        return replace(self, **changes)


@functools.lru_cache(maxsize=1024)
def _parse_region(text: str) -> Region:
    try:
        d = json.loads(text)
        mesh = d["mesh"]
        grads = d.get("in_grad_placements")
        return Region(
            name=d["name"],
            role=d.get("role", FORWARD),
            mesh_shape=tuple(int(s) for s in mesh["shape"]),
            mesh_dim_names=tuple(mesh["dim_names"]) if mesh.get("dim_names") else None,
            in_placements=tuple(d["in_placements"]),
            out_placements=tuple(d["out_placements"]),
            in_grad_placements=None if grads is None else tuple(grads),
            redistribute_inputs=bool(d.get("redistribute_inputs", False)),
            num_saved_inputs=int(d.get("num_saved_inputs", 0)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"not a local_map region document: {text[:200]!r} ({e})") from e


def grad_spec_of(spec: str | None) -> str | None:
    """Gradient placement of a value with placement `spec`: Partial becomes Replicate
    (DTensor's rule; computed by the C++ placement algebra)."""
    from . import _C

    return _C.grad_specs([spec])[0]


# ---- torch Placement <-> spec strings -------------------------------------------------

def spec_of(placements) -> str | None:
    """'S(0)RP(sum)' for a sequence of torch placements (None stays None); strings pass through."""
    if placements is None:
        return None
    if isinstance(placements, str):
        from . import _C

        return _C.normalize_spec(placements)
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard

    parts = []
    for p in placements:
        if isinstance(p, Shard):
            parts.append(f"S({p.dim})")
        elif isinstance(p, Replicate):
            parts.append("R")
        elif isinstance(p, Partial):
            parts.append(f"P({p.reduce_op})")
        else:
            raise ValueError(f"unsupported placement {p!r} (expected Shard, Replicate or Partial)")
    return "".join(parts)


def placements_of(spec: str) -> tuple:
    """torch placements for a spec string."""
    from torch.distributed.tensor.placement_types import Partial, Replicate, Shard

    from . import _C

    make = {"S": Shard, "P": Partial, "R": lambda _: Replicate()}
    return tuple(make[kind](arg) for kind, arg in _C.spec_parts(spec))


# ---- reading regions off FX nodes ---------------------------------------------------

def is_region_node(node) -> bool:
    """Whether `node` is one of our HOP nodes or an upstream torch local_map_hop node."""
    from ._hop import localmap_hop

    if getattr(node, "op", None) != "call_function":
        return False
    if node.target is localmap_hop:
        return True
    return _is_upstream_local_map(node)


def _is_upstream_local_map(node) -> bool:
    from . import _torch_private

    target = node.target
    return (isinstance(target, _torch_private.HigherOrderOperator) and target.name() == "local_map_hop") or (
        "local_map_kwargs" in node.meta and getattr(target, "__name__", "") == "call_local_map")


def region_of(node) -> Region | None:
    """The region of a local_map HOP node (ours or torch's local_map_hop), else None."""
    from ._hop import localmap_hop

    if getattr(node, "op", None) != "call_function":
        return None
    if node.target is localmap_hop:
        return Region.from_json(node.args[1])
    if _is_upstream_local_map(node) and node.meta.get("local_map_kwargs"):
        return _upstream_region(node)
    return None


def _upstream_region(node) -> Region:
    """Region of a torch 2.13 `local_map_hop` node from node.meta["local_map_kwargs"].

    Its args are (subgraph, *tensors); for joint-graph nodes (autoparallel's deferred
    inlining) the backward node's subgraph meta says is_backward and the leading
    `num_activations` inputs are saved activations with rank-local shapes (no spec).
    """
    kw = node.meta["local_map_kwargs"]
    mesh = kw.get("device_mesh")
    shape = tuple(int(s) for s in mesh.shape) if mesh is not None else ()
    names = tuple(mesh.mesh_dim_names) if mesh is not None and mesh.mesh_dim_names else None
    ins = tuple(spec_of(p) for p in kw.get("in_placements") or ())
    outs = tuple(spec_of(p) for p in kw.get("out_placements") or ())
    grads = kw.get("in_grad_placements")
    body = node.args[0] if node.args else None
    sub = getattr(getattr(node, "graph", None), "owning_module", None)
    gm_meta = {}
    if body is not None and getattr(body, "op", None) == "get_attr" and sub is not None:
        gm_meta = getattr(getattr(sub, body.target, None), "meta", {}) or {}
    role = BACKWARD if gm_meta.get("is_backward") else FORWARD
    n_act = int(gm_meta.get("num_activations", 0) or 0)
    if role == BACKWARD:
        ins = (None,) * n_act + ins  # activations are rank-local: no placement to pin
    return Region(
        name=f"upstream:{node.name}",
        mesh_shape=shape,
        mesh_dim_names=names,
        in_placements=ins,
        out_placements=outs,
        in_grad_placements=None if grads is None else tuple(spec_of(p) for p in grads),
        redistribute_inputs=bool(kw.get("redistribute_inputs", False)),
        role=role,
        num_saved_inputs=n_act,
    )
