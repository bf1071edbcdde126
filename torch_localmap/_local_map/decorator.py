"""`local_map`: mark a function that runs on local shards.

    @torch_localmap.local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], None))
    def scale(x, alpha): return x * alpha

Arguments mean what they mean for torch.distributed.tensor.experimental.local_map
(torch 2.13); placements may also be spec strings ("S(0)R"). What a call does:

- Any DTensor argument: torch's eager semantics -- check (or, with
  redistribute_inputs, redistribute) the arguments, run `func` on their local
  tensors (`to_local(grad_placements=in_grad_placements)`), wrap the outputs as
  DTensors placed as out_placements say.
- Plain tensors while a mesh is known (`device_mesh=`, or the `use_mesh(...)`
  context that parallelize/the backend enters): the arguments are global tensors;
  the call becomes our higher-order op (hop.py) between sharding-constraint ops. Under make_fx /
  aot_autograd / torch.compile it is one graph node carrying the region's
  placements (forward and backward); on real tensors it simulates every rank.
- Plain tensors and no mesh: `func(*args)` (a region on one device).

Also here: `use_mesh`, `current_mesh` (the mesh regions default to); they are
attributes of the `local_map` function too.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from dataclasses import dataclass

import torch

from .. import _C
from .._torch_private import dtensor, dynamo, hop_support
from .._torch_private.pytrees import pytree
from .._mesh import MeshSpec, mesh_shape_and_names
from .hop import inputs_unmutated, localmap_hop
from .ops import constrain
from ..placements import as_spec, placements_of, spec_of
from .region import Region

__all__ = ["local_map", "use_mesh", "current_mesh", "MeshSpec"]


# ---- the mesh in use ---------------------------------------------------------------------

_MESH_STACK: list = []


@contextlib.contextmanager
def use_mesh(mesh):
    """Default `device_mesh` of local_map regions called inside this context.

    `mesh` is a DeviceMesh, a MeshSpec, or a mesh shape tuple. parallelize and the
    compile backend enter it while tracing and running the model, so regions that
    omit device_mesh follow the mesh being planned for. The mesh is read when a region
    is called (for torch.compile: when it is traced and, with the eager backend, run).
    """
    if isinstance(mesh, (tuple, list)):
        mesh = MeshSpec(tuple(mesh))
    _MESH_STACK.append(mesh)
    try:
        yield mesh
    finally:
        _MESH_STACK.pop()


def current_mesh():
    """The innermost `use_mesh` mesh, or None."""
    return _MESH_STACK[-1] if _MESH_STACK else None


def _mesh_shape_names(mesh) -> tuple[tuple, tuple | None]:
    return mesh_shape_and_names(mesh, "device_mesh")


# ---- placements arguments ------------------------------------------------------------

def _is_placement(p) -> bool:
    from torch.distributed.tensor.placement_types import Placement

    return isinstance(p, Placement)


def _one_spec(p, what: str):
    if p is None:
        return None
    if isinstance(p, str) or (isinstance(p, (list, tuple)) and all(_is_placement(x) for x in p)):
        return as_spec(p, what=what)
    raise TypeError(f"{what}: expected a sequence of placements, a spec string such as 'S(0)R', or None; "
                    f"got {p!r}")


def _in_specs(placements, what: str):
    if placements is None:
        return None
    if isinstance(placements, str) or not isinstance(placements, (list, tuple)):
        raise TypeError(f"{what}: expected a tuple with one entry per flattened argument, got {placements!r}")
    return tuple(_one_spec(p, f"{what}[{i}]") for i, p in enumerate(placements))


def _out_specs(placements):
    """out_placements as torch reads it: a tuple means one entry per output, anything
    else is the placements of the single output. A tuple of Placement objects is also
    read as one output's placements."""
    if isinstance(placements, tuple) and not (placements and all(_is_placement(p) for p in placements)):
        return tuple(_one_spec(p, f"out_placements[{i}]") for i, p in enumerate(placements))
    return (_one_spec(placements, "out_placements[0]"),)


def _region_name(func) -> str:
    target = inspect.unwrap(func)
    if isinstance(target, functools.partial):
        target = target.func
    qual = getattr(target, "__qualname__", None) or type(target).__qualname__
    mod = getattr(target, "__module__", None) or ""
    code = getattr(target, "__code__", None)
    line = code.co_firstlineno if code is not None else 0
    return f"{mod}.{qual}:{line}" if mod else f"{qual}:{line}"


# ---- the decorator --------------------------------------------------------------------

def local_map(func=None, *, out_placements, in_placements=None, in_grad_placements=None, device_mesh=None,
              redistribute_inputs=False):
    """Runs `func` on local shards. Decorator with arguments, or `local_map(func, ...)`."""
    out_specs = _out_specs(out_placements)
    in_specs = _in_specs(in_placements, "in_placements")
    grad_specs = _in_specs(in_grad_placements, "in_grad_placements")
    if in_specs is not None and grad_specs is not None and len(grad_specs) != len(in_specs):
        raise ValueError(f"in_grad_placements has {len(grad_specs)} entries but in_placements has {len(in_specs)}; "
                         f"give one per flattened argument")
    config = _Config(out_specs, in_specs, grad_specs, device_mesh, bool(redistribute_inputs),
                     out_placements, in_placements, in_grad_placements)

    def decorate(fn):
        name = _region_name(fn)

        @functools.wraps(fn)
        def region(*args, **kwargs):
            return _call(fn, name, config, args, kwargs)

        region.__torch_localmap_region__ = (fn, config)
        return dynamo.opaque_to_dynamo(region)

    return decorate if func is None else decorate(func)


@dataclass(frozen=True)
class _Config:
    out_specs: tuple
    in_specs: tuple | None
    grad_specs: tuple | None
    device_mesh: object
    redistribute_inputs: bool
    # the user's placements objects, for messages
    raw_out: object
    raw_in: object
    raw_grad: object


def _call(fn, name: str, cfg: _Config, args, kwargs):
    from torch.distributed.tensor import DTensor

    flat, in_tree = pytree.tree_flatten(args)
    if cfg.in_specs is not None and len(cfg.in_specs) != len(flat):
        raise ValueError(f"local_map region '{name}': in_placements has {len(cfg.in_specs)} entries but the call "
                         f"has {len(flat)} arguments (after flattening); give one per argument (None for "
                         f"non-tensors)")
    if any(isinstance(a, DTensor) for a in flat):
        return _call_dtensor(fn, name, cfg, flat, in_tree, kwargs)
    mesh = cfg.device_mesh if cfg.device_mesh is not None else current_mesh()
    if mesh is None or not any(isinstance(a, torch.Tensor) for a in flat):
        return _call_plain(fn, name, flat, in_tree, kwargs)
    return _call_hop(fn, name, cfg, mesh, flat, in_tree, kwargs)


def _call_plain(fn, name, flat, in_tree, kwargs):
    """No mesh: the region runs on whole tensors (a one-device mesh)."""
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    with inputs_unmutated(name, tensors):
        return fn(*pytree.tree_unflatten(flat, in_tree), **kwargs)


# ---- DTensor arguments: torch's eager semantics -------------------------------------------

def _call_dtensor(fn, name, cfg: _Config, flat, in_tree, kwargs):
    AsyncCollectiveTensor = dtensor.async_collective_tensor_type()
    from torch.distributed.tensor import DTensor

    mesh = cfg.device_mesh if cfg.device_mesh is not None else None
    if mesh is None and current_mesh() is not None and not isinstance(current_mesh(), MeshSpec):
        mesh = current_mesh()
    if mesh is None:
        mesh = next(a.device_mesh for a in flat if isinstance(a, DTensor))
    for i, a in enumerate(flat):
        if isinstance(a, DTensor) and a.device_mesh != mesh:
            raise ValueError(f"local_map region '{name}': argument {i} is a DTensor on mesh {a.device_mesh} but "
                             f"the region runs on device_mesh {mesh}")
    redistribute = set()
    if cfg.in_specs is not None:
        for i, a in enumerate(flat):
            if isinstance(a, DTensor) and cfg.in_specs[i] is None:
                raise ValueError(f"local_map region '{name}': argument {i} is a DTensor but in_placements[{i}] "
                                 f"is None; give its placements")
        shape, names = _mesh_shape_names(mesh)
        plan = _C.plan_region_inputs(
            list(shape), list(names or ()),
            [list(a.shape) if isinstance(a, DTensor) else None for a in flat],
            [type(a).__name__ for a in flat],
            # torch passes plain tensors among DTensor arguments through unchecked; so do we.
            [None if _is_plain(a) else s for s, a in zip(cfg.in_specs, flat)],
            [spec_of(a.placements, f"local_map region '{name}': argument {i}'s DTensor placements")
             if isinstance(a, DTensor) else None for i, a in enumerate(flat)],
            redistribute_inputs=cfg.redistribute_inputs, all_ranks=False,
            what=f"local_map region '{name}': in_placements")
        redistribute = set(plan["redistribute"])
    local_flat, locals_ = [], []
    for i, a in enumerate(flat):
        if isinstance(a, DTensor):
            if i in redistribute:
                a = a.redistribute(placements=list(placements_of(cfg.in_specs[i])))
            grad = None
            if cfg.grad_specs is not None:
                if cfg.grad_specs[i] is None:
                    raise ValueError(f"local_map region '{name}': argument {i} is a DTensor but "
                                     f"in_grad_placements[{i}] is None; give its gradient placements")
                grad = placements_of(cfg.grad_specs[i])
            a = a.to_local(grad_placements=grad)
            if isinstance(a, AsyncCollectiveTensor):
                a = a.wait()
            locals_.append(a)
        local_flat.append(a)
    with inputs_unmutated(name, locals_):
        out = fn(*pytree.tree_unflatten(local_flat, in_tree), **kwargs)
    flat_out, out_tree = pytree.tree_flatten(out)
    if len(flat_out) != len(cfg.out_specs):
        raise ValueError(f"local_map region '{name}': out_placements has {len(cfg.out_specs)} entries but the "
                         f"function returned {len(flat_out)} outputs (after flattening)")
    wrapped = []
    for j, (o, s) in enumerate(zip(flat_out, cfg.out_specs)):
        if isinstance(o, DTensor):
            raise TypeError(f"local_map region '{name}': output {j} is a DTensor; the function must return "
                            f"local torch.Tensors")
        if isinstance(o, torch.Tensor):
            if s is None:
                raise ValueError(f"local_map region '{name}': output {j} is a tensor but out_placements[{j}] is "
                                 f"None")
            wrapped.append(DTensor.from_local(o, mesh, placements_of(s), run_check=False))
        else:
            if s is not None:
                raise ValueError(f"local_map region '{name}': output {j} is not a tensor "
                                 f"({type(o).__name__}) but out_placements[{j}] is {s}; use None")
            wrapped.append(o)
    return pytree.tree_unflatten(wrapped, out_tree)


def _is_plain(a) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(a, torch.Tensor) and not isinstance(a, DTensor)


# ---- plain tensors with a mesh: the HOP ----------------------------------------------------

class _Body:
    """The region body the HOP runs: local tensors in, flat tuple of local tensors out.

    Non-tensor arguments and kwargs are bound here; non-tensor outputs (out_placements
    None) are remembered and put back by the caller.
    """

    def __init__(self, fn, name, flat, in_tree, tensor_pos, kwargs, out_specs, mesh_shape, mesh_names):
        self.fn, self.name = fn, name
        self.flat = [None if i in set(tensor_pos) else a for i, a in enumerate(flat)]
        self.in_tree, self.tensor_pos, self.kwargs = in_tree, tensor_pos, kwargs
        self.out_specs, self.mesh_shape, self.mesh_names = out_specs, mesh_shape, mesh_names
        self.out_tree = None
        self.consts = {}

    def __call__(self, *tensors):
        flat = list(self.flat)
        for k, i in enumerate(self.tensor_pos):
            flat[i] = tensors[k]
        out = self.fn(*pytree.tree_unflatten(flat, self.in_tree), **self.kwargs)
        flat_out, self.out_tree = pytree.tree_flatten(out)
        # One C++ call checks the outputs against out_placements (count, kinds, ranks).
        _C.plan_region_outputs(list(self.mesh_shape), list(self.mesh_names or ()),
                               [list(o.shape) if isinstance(o, torch.Tensor) else None for o in flat_out],
                               [type(o).__name__ for o in flat_out], list(self.out_specs),
                               what=f"local_map region '{self.name}': out_placements")
        self.consts = {j: o for j, o in enumerate(flat_out) if not isinstance(o, torch.Tensor)}
        clone = hop_support.clone_if_aliasing(tensors)
        return tuple(clone(o) for o in flat_out if isinstance(o, torch.Tensor))

    def rebuild(self, tensor_outs):
        it = iter(tensor_outs)
        flat = [self.consts[j] if j in self.consts else next(it) for j in range(len(self.out_specs))]
        return pytree.tree_unflatten(flat, self.out_tree)


def _call_hop(fn, name, cfg: _Config, mesh, flat, in_tree, kwargs):
    for k, v in kwargs.items():
        if any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(v)):
            raise TypeError(f"local_map region '{name}': tensor keyword argument '{k}' is not supported; pass "
                            f"tensors positionally so they get placements")
    if cfg.in_specs is None:
        raise ValueError(f"local_map region '{name}': in_placements is required when the region is called on "
                         f"plain (global) tensors under a mesh; only DTensor arguments carry their placements")
    if isinstance(cfg.device_mesh, torch.distributed.device_mesh.DeviceMesh) and \
            isinstance(current_mesh(), torch.distributed.device_mesh.DeviceMesh) and current_mesh() != cfg.device_mesh:
        raise ValueError(f"local_map region '{name}': device_mesh {cfg.device_mesh} differs from the mesh in use "
                         f"{current_mesh()}")
    shape, names = _mesh_shape_names(mesh)
    tensor_pos = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
    # One C++ call validates every argument's placements (count, kinds, ranks, mesh dims).
    _C.plan_region_inputs(list(shape), list(names or ()),
                          [list(a.shape) if isinstance(a, torch.Tensor) else None for a in flat],
                          [type(a).__name__ for a in flat], list(cfg.in_specs),
                          what=f"local_map region '{name}': in_placements")
    grads = None
    if cfg.grad_specs is not None:
        for i in tensor_pos:
            if cfg.grad_specs[i] is None:
                raise ValueError(f"local_map region '{name}': argument {i} is a tensor but in_grad_placements[{i}] "
                                 f"is None; give its gradient placements")
        grads = tuple(cfg.grad_specs[i] for i in tensor_pos)
        _C.plan_region_inputs(list(shape), list(names or ()), [list(flat[i].shape) for i in tensor_pos],
                              ["Tensor"] * len(tensor_pos), list(grads),
                              what=f"local_map region '{name}': in_grad_placements")
    region = Region(
        name=name,
        mesh_shape=shape,
        mesh_dim_names=names,
        in_placements=tuple(cfg.in_specs[i] for i in tensor_pos),
        out_placements=tuple(s for s in cfg.out_specs if s is not None),
        in_grad_placements=grads,
        redistribute_inputs=cfg.redistribute_inputs,
    )
    body = _Body(fn, name, flat, in_tree, tensor_pos, kwargs, cfg.out_specs, shape, names)
    # The boundaries are localmap.sharding_constraint ops: the inputs' (with their gradient
    # placements, which the op's C++ backward applies) and the outputs'. They are nodes of
    # every traced graph, forward and backward, and the planner pins them.
    grad_in = grads if grads is not None else (None,) * len(tensor_pos)
    ins = [flat[i] if s is None else constrain(flat[i], s, g)
           for i, s, g in zip(tensor_pos, region.in_placements, grad_in)]
    outs = localmap_hop(body, region.to_json(), *ins)
    outs = tuple(constrain(o, s, None) for o, s in zip(outs, region.out_placements))
    if body.out_tree is None:
        raise RuntimeError(f"local_map region '{name}': the body did not run")  # a HOP path skipped it
    return body.rebuild(outs)


# `torch_localmap.local_map` names this function, not the module: the mesh helpers
# regions use are reachable from it too.
local_map.use_mesh = use_mesh
local_map.current_mesh = current_mesh
local_map.MeshSpec = MeshSpec
