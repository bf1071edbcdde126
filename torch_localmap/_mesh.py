"""Meshes as the planner sees them: a shape and optional dim names.

A mesh argument is a torch DeviceMesh (a real one, or one on the fake process group),
a `MeshSpec`, or a tuple of sizes (a simulated mesh for planning without processes).
Sizes must be integers: 2.5 is an error, not 2. The C++ core checks the rest (sizes
>= 1, at most 2^31 - 1 devices, distinct names).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

from . import _C

__all__ = ["MeshSpec", "mesh_shape_and_names"]


def _sizes(shape, what: str) -> tuple:
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: expected a DeviceMesh or a tuple of sizes such as (2, 2), got "
                        f"{type(shape).__name__}")
    for i, s in enumerate(shape):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"{what}: size {i} is {s!r} ({type(s).__name__}); expected an integer")
    return tuple(int(s) for s in shape)


@dataclass(frozen=True)
class MeshSpec:
    """A mesh known only by shape and dim names (planning without process groups)."""

    shape: tuple
    dim_names: tuple | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", _sizes(self.shape, "MeshSpec.shape"))
        names = tuple(self.dim_names) if self.dim_names else None
        object.__setattr__(self, "dim_names", names)
        _C.check_mesh(list(self.shape), list(names or ()))


def mesh_shape_and_names(mesh, what: str = "mesh") -> tuple[tuple, tuple | None]:
    """(sizes, dim names or None) of a DeviceMesh, MeshSpec or tuple of sizes; validated."""
    if isinstance(mesh, MeshSpec):
        return mesh.shape, mesh.dim_names
    if isinstance(mesh, (tuple, list)):
        shape = _sizes(mesh, what)
        _C.check_mesh(list(shape), [])
        return shape, None
    shape = getattr(mesh, "shape", None)
    if shape is None or not hasattr(mesh, "mesh_dim_names"):
        raise TypeError(f"{what}: expected a DeviceMesh, a MeshSpec or a tuple of sizes such as (2, 2), got "
                        f"{type(mesh).__name__}")
    names = tuple(mesh.mesh_dim_names) if mesh.mesh_dim_names else None
    return tuple(int(s) for s in shape), names
