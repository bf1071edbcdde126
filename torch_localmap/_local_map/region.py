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
    from .. import _C

    return _C.grad_specs([spec])[0]
