"""parallelize(model, mesh, example_args, example_kwargs): plan, shard the state, run SPMD.

The parallel module is called like the model (its own signature, args and kwargs) and
returns the model's output structure with DTensors in the planned placements. Each
distinct call -- argument structure, tensor shapes and dtypes, non-tensor values,
train()/eval(), grad mode -- gets its own plan, traced and solved on first use (every
rank calls with the same structure, so they plan together). Parameters and buffers keep
the placements the first plan gave them; later plans are made around them.

Inputs: plain tensors are global values every rank holds (a consumer that wants a shard
takes it locally); tensors named in `input_placements` are each rank's local shard (what a
data loader gives) and are planned in those placements; DTensors are taken in their
own placements.
"""
from __future__ import annotations

import dataclasses
import json

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor import DTensor, Replicate, distribute_tensor

from . import _C
from ._torch_private import autocast, descriptors, dtensor, fake_tensors, flex_attention
from ._device import check_mesh_backend, check_tensor_device, mesh_device
from ._mixed_precision import check_policy as mp_check
from ._plan_cache import PlanCache
from ._runtime.failures import failure_scope
from ._runtime.groups import DEFAULT_TIMEOUT, as_timeout, runtime_mesh, world_group
from ._runtime.bucketing import DEFAULT_BUCKET_CAP_MB
from ._runtime.compile import ExecutionOptions
from ._runtime.redistribute import shard_local
from ._runtime.schedule import GLOO_INFLIGHT_COLLECTIVES
from ._spmd import RankProgram, local_example_inputs, trace_rank_program
from ._runtime.deferred_loss import lazy_views
from ._torch_private.pytrees import pytree
from .placements import as_spec, spec_to_placements
from .plan import Plan, as_saved_plan, explicit_memory_limit, plan_module


def _check_mesh(mesh):
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"mesh must be a torch.distributed.device_mesh.DeviceMesh, got {type(mesh).__name__}")
    if dist.is_initialized() and mesh.size() != dist.get_world_size():
        raise ValueError(f"mesh has {mesh.size()} devices (shape {tuple(mesh.shape)}) but the world size is "
                         f"{dist.get_world_size()}; expected a mesh covering every rank")
    mesh_device(mesh)  # a CUDA mesh needs this rank's GPU
    check_mesh_backend(mesh)


@dataclasses.dataclass
class _Options:
    device: str
    time_limit: float
    memory_limit: object
    fixed_params: dict
    calibration: object
    fallback_replicate: bool
    timeout: object
    input_placements: dict  # argument name or flat index -> placements of the local shards
    mp_policy: object = None  # torch.distributed.fsdp.MixedPrecisionPolicy or None
    execution: ExecutionOptions = dataclasses.field(default_factory=ExecutionOptions)
    optimizer_states: int = 2  # for the plan's memory estimate (AdamW keeps 2 tensors per parameter)
    plan: object = None  # a saved Plan for the first call signature (applied, not solved)
    like: str | None = None  # torch's plan to follow ("ddp" | "fsdp2" | "tp"), None: the planner's own
    recompute: object = False  # True: the solver may recompute values backward reads; "full" / "selective": AC modes
    plan_cache_size: int = 16  # planned call signatures kept (least recently used dropped first)
    replan_tolerance: float = 0.05  # a call at new sizes solves afresh only if that is this much cheaper
    replicated_state: str = "plain"  # state a plan replicates whole: "plain" tensors (DDP's) or "dtensor"


@dataclasses.dataclass
class _Compiled:
    """One planned call signature: the plan, this rank's program and how to feed it."""

    plan: Plan
    program: RankProgram
    sources: list  # per program input: ("param"|"buffer", FQN) | ("input", flat idx) | ("constant", value)
    input_kinds: dict  # flat input index -> "global" | "local" | "dtensor"
    mutated_buffers: list  # FQNs, in the program's mutation-output order
    output_spec: object
    output_global: list  # per forward output: (global shape, spec)
    input_specs: dict  # flat input index -> planned spec
    # Per "param"/"buffer" FQN, the module that owns it and its name there: get_parameter walks
    # the dotted name on every call, about as long as the rest of the forward's glue together
    # (docs/benchmarks_log.md, 2026-12-03).
    state_owners: dict
    output_placements: list  # per forward output, the placements of output_global's spec


class ParallelModule(nn.Module):
    """The module with DTensor parameters and buffers in the planned placements, running
    the plan. Called with the model's own signature; returns the model's output structure
    with DTensors (global values in their planned placements)."""

    def __init__(self, module: nn.Module, mesh, options: _Options):
        super().__init__()
        # Adopt the module's children, parameters and buffers so names (and state_dict keys)
        # stay exactly those of the original module.
        for name, child in module.named_children():
            self.add_module(name, child)
        for name, p in module.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in module.named_buffers(recurse=False):
            self.register_buffer(name, b, persistent=name not in module._non_persistent_buffers_set)
        # The root's hooks run around every call (hooks on submodules are refused by tracing).
        self._forward_pre_hooks.update(module._forward_pre_hooks)
        self._forward_hooks.update(module._forward_hooks)
        self._forward_hooks_with_kwargs.update(module._forward_hooks_with_kwargs)
        self._forward_pre_hooks_with_kwargs.update(module._forward_pre_hooks_with_kwargs)
        # The model itself is what plans trace (with fake parameters); not a registered
        # submodule, so its state is not listed twice.
        object.__setattr__(self, "_model", module)
        self._model_forward = module.forward
        self.mesh = mesh
        self.device = mesh_device(mesh)  # where inputs and the planned program live
        self._options = options
        self._plans = PlanCache(options.plan_cache_size)  # planned call signatures (_plan_cache.py)
        self._last: _Compiled | None = None
        self._distributed = False
        self._plain_state = False  # state the plan replicates whole is held plain (_distribute_state)
        self.register_load_state_dict_pre_hook(_full_tensors_as_shards)

    def __getattr__(self, name: str):
        # Attributes the model has and we do not (a Hugging Face model's .config, what its
        # hooks keep on it) read through to the model, as they would on the model itself.
        try:
            return super().__getattr__(name)
        except AttributeError:
            model = self.__dict__.get("_model")
            if model is None:
                raise
            return getattr(model, name)

    def train(self, mode: bool = True):
        super().train(mode)
        self._model.training = mode  # the model's root is what plans trace; its children are ours
        return self

    # ---- what tests and reports read --------------------------------------------------

    @property
    def plan(self) -> Plan:
        """The plan of the most recent call (the first plan until the module is called)."""
        return self._last.plan

    @property
    def plan_cache_stats(self) -> dict:
        """Calls served by a planned signature (hits), new signatures (misses) and how each was
        planned (solved, or carried from the plan of other sizes), entries dropped (evictions)."""
        return dict(self._plans.stats)

    @property
    def _program(self) -> RankProgram:
        return self._last.program

    # ---- calling ---------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        # Failures here (bad inputs included) are recorded for the other ranks, which are
        # about to wait for this one in a collective (_runtime/failures.py).
        with failure_scope():
            return self._call(args, kwargs)

    def _call(self, args, kwargs):
        compiled, leaves = self._compiled_for(args, kwargs)
        return self._run(compiled, leaves)

    def _compiled_for(self, args, kwargs):
        """The planned program for this call's signature (planned on first use). A signature
        that differs from a planned one only in sizes carries that plan to its sizes unless
        a plan materially cheaper there exists (plan_joint's `previous`): one solve per
        shape family, one traced program per size, at most plan_cache_size kept."""
        flex_attention.register_block_mask_pytree()  # a BlockMask argument: its tensors are inputs
        leaves, spec = pytree.tree_flatten((args, kwargs))
        key = _signature(spec, leaves, self.training, torch.is_grad_enabled(), autocast.autocast_state(),
                         tuple(p.requires_grad for p in self._model.parameters()))
        compiled = self._plans.get(key, lambda: (_family_of(key), _shapes_of(leaves),
                                                 _flat_names(args, kwargs, self._model_forward)),
                                   lambda previous: self._plan_call(args, kwargs, leaves, previous))
        self._last = compiled
        return compiled, leaves

    def _run(self, c: _Compiled, leaves):
        outs = c.program(*self._program_inputs(c, leaves))
        n_mut = len(c.mutated_buffers)
        for name, new in zip(c.mutated_buffers, outs[:n_mut]):
            self._set_buffer(name, new.detach())
        results = []
        with lazy_views():  # a pending loss stays pending inside its DTensor (deferred_loss.py)
            for local, (shape, _), placements in zip(outs[n_mut:], c.output_global, c.output_placements):
                results.append(dtensor.dtensor_from_local(local, self.mesh, placements, shape,
                                                          _contiguous_stride(shape), placements))
        # Output containers that compute while rebuilding themselves (transformers' DynamicCache
        # concatenates onto empty plain tensors) see plain tensors as replicated.
        with dtensor.implicit_replication():
            return pytree.tree_unflatten(results, c.output_spec)

    def _program_inputs(self, c: _Compiled, leaves) -> list:
        """This rank's program inputs for a call: local shards of the state and the inputs."""
        inputs, state = [], []
        for kind, what in c.sources:
            if kind in ("param", "buffer"):  # plain where the plan replicates all state (_distribute_state)
                owner, leaf = c.state_owners[what]
                # Read where the owner keeps it now: a parameter or buffer replaced on its
                # module (load_state_dict(assign=True), _set_buffer) is the one used.
                t = (owner._parameters if kind == "param" else owner._buffers).get(leaf)
                if t is None:
                    raise AttributeError(f"the planned program reads {kind} {what!r}, which the module no longer has")
                if isinstance(t, DTensor):
                    state.append(len(inputs))
                inputs.append(t)
            elif kind == "constant":
                inputs.append(what)
            else:  # a user input
                inputs.append(self._local_input(c, what, leaves[what]))
        # The state's local shards in one autograd node, not one to_local (and one DTensor built
        # per gradient) per parameter: milliseconds of Python a step (docs/benchmarks_log.md).
        for i, local in zip(state, dtensor.local_tensors([inputs[i] for i in state])):
            inputs[i] = local
        return inputs

    def _local_input(self, c: _Compiled, idx: int, value):
        spec = c.input_specs[idx]
        kind = c.input_kinds[idx]
        if kind == "dtensor":
            if value.device_mesh != self.mesh:
                raise ValueError(f"input {idx} is a DTensor on mesh {value.device_mesh}; expected the module's mesh "
                                 f"{self.mesh}")
            want = spec_to_placements(spec, mesh_ndim=self.mesh.ndim)
            if tuple(value.placements) != want:
                value = value.redistribute(self.mesh, want)
            return value.to_local()
        check_tensor_device(value, self.device, f"input {idx}")
        if kind == "local":
            return value  # already this rank's shard (input_placements)
        return shard_local(value, self.mesh, spec)  # a global value: take this rank's piece (no communication)

    # ---- planning ----------------------------------------------------------------------

    def _plan_call(self, args, kwargs, leaves, previous=None) -> _Compiled:
        o = self._options
        kinds, input_specs = self._input_layout(args, kwargs, leaves)
        global_leaves = [_global_example(x, kinds.get(i), input_specs.get(i), self.mesh)
                         for i, x in enumerate(leaves)]
        g_args, g_kwargs = pytree.tree_unflatten(global_leaves, pytree.tree_flatten((args, kwargs))[1])
        fixed = dict(o.fixed_params or {})
        if self._distributed:  # later plans keep the state where the first plan put it
            fixed.update(self._state_placements())
        # A saved plan is for the example call (the first signature); later signatures are
        # planned around the state it placed.
        saved = None if self._distributed else o.plan
        plan = plan_module(self._model, self.mesh, g_args, g_kwargs, device=o.device, time_limit=o.time_limit,
                           memory_limit=o.memory_limit, fixed_params=fixed, calibration=o.calibration,
                           fallback_replicate=o.fallback_replicate, timeout=o.timeout,
                           input_specs={str(i): s for i, s in input_specs.items()},
                           root_hooks=False,  # forward() runs them around the program
                           mp_policy=o.mp_policy, optimizer_states=o.optimizer_states, plan=saved, like=o.like,
                           recompute=o.recompute, bucket_bytes=o.execution.bucket_bytes,
                           previous=None if saved is not None else previous,
                           replan_tolerance=o.replan_tolerance,
                           plain_replicated_state=o.replicated_state == "plain")
        if not self._distributed:
            self._distribute_state(plan)
        joint = plan.joint
        coord = self.mesh.get_coordinate()
        fake_inputs = local_example_inputs(plan, fake_tensors.FakeTensorMode(), coord, self.device)
        program = RankProgram(trace_rank_program(plan, self.mesh, coord, fake_inputs), joint.num_fwd_outputs,
                              backward=joint.backward, tangent_outputs=_tangent_outputs(plan),
                              grad_slots=_grad_slots(plan), param_placeholders=_param_placeholders(plan),
                              options=o.execution, memory_room=_memory_room(o.memory_limit, plan),
                              recompute_nodes=plan.recomputed_nodes(),
                              defer_output_waits=self.mesh.device_type == "cpu")
        sources, owners = [], {}
        all_specs = {}
        for (i, node), spec in zip(plan.graph.placeholders(), plan.placeholder_specs()):
            if node.role in ("param", "buffer"):
                sources.append((node.role, node.target))
                prefix, _, leaf = node.target.rpartition(".")
                owners[node.target] = (self.get_submodule(prefix), leaf)
            elif node.role == "input":
                sources.append(("input", int(node.target)))
                all_specs[int(node.target)] = spec
            elif node.role == "constant":
                value = getattr(joint.gm, node.target)
                sources.append(("constant", shard_local(value, self.mesh, spec)))
        kinds = {i: kinds.get(i, "global") for i in all_specs}
        outs = [(int(t), k) for k, (r, t) in enumerate(plan.graph.outputs()) if r == "output"]
        output_global = [(tuple(plan.graph.meta_of_output(k).shape), plan.output_specs[k]) for _, k in outs]
        return _Compiled(plan=plan, program=program, sources=sources, input_kinds=kinds,
                         mutated_buffers=list(joint.mutated_buffers), output_spec=joint.output_spec,
                         output_global=output_global, input_specs=all_specs, state_owners=owners,
                         output_placements=[spec_to_placements(spec, mesh_ndim=self.mesh.ndim)
                                            for _, spec in output_global])

    def _input_layout(self, args, kwargs, leaves):
        """Per flat input: "dtensor" (its own placements), "local" (a shard, input_placements),
        or "global"; and the specs of the non-global ones."""
        kinds, specs = {}, {}
        named = _flat_names(args, kwargs, self._model_forward)
        for i, x in enumerate(leaves):
            if isinstance(x, DTensor):
                kinds[i] = "dtensor"
                specs[i] = as_spec(list(x.placements), self.mesh.ndim, x.dim(), f"input {named[i]}")
        for key, placements in (self._options.input_placements or {}).items():
            hits = [i for i, n in enumerate(named) if n == key or str(i) == str(key)]
            if not hits:
                raise ValueError(f"input_placements names {key!r}, which is no tensor argument of this call (arguments: "
                                 f"{[n for n, x in zip(named, leaves) if isinstance(x, torch.Tensor)]})")
            for i in hits:
                if not isinstance(leaves[i], torch.Tensor) or isinstance(leaves[i], DTensor):
                    raise ValueError(f"input_placements[{key!r}]: the argument is {type(leaves[i]).__name__}; "
                                     f"expected a plain tensor holding this rank's shard")
                kinds[i] = "local"
                specs[i] = as_spec(placements, self.mesh.ndim, leaves[i].dim(), f"input_placements[{key!r}]")
        return kinds, specs

    def _distribute_state(self, plan: Plan) -> None:
        """Parameters and buffers become DTensors in the planned placements (every alias of a
        tied weight points at the same DTensor). Where the plan replicates all of them (DDP's
        plan, whether the planner chose it or like="ddp" asked for it) they stay plain tensors
        as DDP's are, made equal on every rank: a plain parameter spares each optimizer kernel
        DTensor's dispatch and each step the per-parameter to_local and gradient wrapping
        (the MoE's step on 4 CPU ranks: 56.4 ms on DTensor state, 49.7 ms plain;
        docs/benchmarks_log.md, issue 30); replicated_state="dtensor" keeps DTensors. A later
        plan keeps the state where this one put it, so a module's state is either all plain or
        all DTensors."""
        placements = {name: spec_to_placements(spec, mesh_ndim=self.mesh.ndim)
                      for name, spec in plan.state_placements().items()}
        self._plain_state = self._options.replicated_state == "plain" and all(
            p.is_replicate() for placement in placements.values() for p in placement)
        for name, placement in placements.items():
            p_or_b = _get_tensor(self, name)
            if self._plain_state:
                dt = self._replicated_plain(p_or_b.detach())
            else:
                dt = distribute_tensor(p_or_b.detach(), self.mesh, placement)
            new = nn.Parameter(dt, requires_grad=p_or_b.requires_grad) if isinstance(p_or_b, nn.Parameter) else dt
            for root in (self, self._model):  # root-level entries live on both; submodules are shared
                for alias in _aliases(root, p_or_b):
                    owner, _, leaf = alias.rpartition(".")
                    mod = root.get_submodule(owner) if owner else root
                    if isinstance(new, nn.Parameter):
                        mod._parameters[leaf] = new
                    else:
                        mod._buffers[leaf] = new
        self._distributed = True

    def _replicated_plain(self, t: torch.Tensor) -> torch.Tensor:
        """`t` on this rank's device with rank 0's values, as DDP broadcasts its state."""
        t = t.to(self.device)
        group = world_group(self._options.timeout)
        if group is not None:
            dist.broadcast(t, src=0, group=group)
        return t

    def _set_buffer(self, name: str, local) -> None:
        """A buffer's new value (BatchNorm running stats, counters), as the model wrote it. The
        buffer becomes a new DTensor: the old one may be saved for backward, and writing into
        it would change what backward reads (functional semantics, as the traced graph has)."""
        old = self.get_buffer(name)
        if isinstance(old, DTensor):
            new = DTensor.from_local(local, self.mesh, old.placements, run_check=False, shape=old.shape,
                                     stride=old.stride())
        else:  # the plan replicates all state: it is plain
            new = local
        for root in (self, self._model):
            for alias in _aliases(root, old):
                owner, _, leaf = alias.rpartition(".")
                (root.get_submodule(owner) if owner else root)._buffers[leaf] = new

    def _state_placements(self) -> dict:
        out = {}
        for name, t in list(self.named_parameters()) + list(self.named_buffers()):
            if isinstance(t, DTensor):
                out[name] = as_spec(list(t.placements), self.mesh.ndim, t.dim(), name)
            elif self._plain_state:  # plain and replicated (_distribute_state)
                out[name] = as_spec([Replicate()] * self.mesh.ndim, self.mesh.ndim, t.dim(), name)
        return out


def _full_tensors_as_shards(module, state_dict, prefix, *_):
    """load_state_dict of a full (unsharded) state dict -- torch.load'ed or a pretrained
    model's, the same on every rank: each plain tensor loaded into a DTensor parameter or
    buffer becomes a DTensor in that one's placements, every rank taking its own shard of
    the tensor it holds (no communication). torch's copy_ from a plain tensor into a DTensor
    would refuse it ("got mixed torch.Tensor and DTensor")."""
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        value = state_dict.get(prefix + name)
        if isinstance(t, DTensor) and isinstance(value, torch.Tensor) and not isinstance(value, DTensor) \
                and value.shape == t.shape:
            state_dict[prefix + name] = distribute_tensor(value.to(t.device), t.device_mesh, t.placements,
                                                          src_data_rank=None)


def _family_of(key):
    """A call signature with every tensor's sizes left out: calls that differ only in sizes
    (sequence length, the last batch) share a family and may share a plan."""
    spec_key, parts, *modes = key
    return (spec_key, tuple((p[0], len(p[1])) + p[2:] if p[0] in ("tensor", "dtensor") else p for p in parts),
            *modes)


def _shapes_of(leaves) -> list:
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in leaves]


def _signature(spec, leaves, training, grad, amp, trainable):
    """A call's plan cache key. `amp`: the autocast state it runs under (a call under
    torch.autocast traces, and plans, its casts: _torch_private/autocast.py); `trainable`:
    which parameters require grad (the traced program makes gradients for those only, so a
    layer unfrozen after planning needs a program that makes its gradient)."""
    parts = []
    for x in leaves:
        if isinstance(x, DTensor):
            parts.append(("dtensor", tuple(x.shape), x.dtype, tuple(x.placements), x.requires_grad))
        elif isinstance(x, torch.Tensor):
            parts.append(("tensor", tuple(x.shape), x.dtype, x.device.type, x.requires_grad))
        else:
            try:
                hash(x)
                parts.append(("value", type(x).__name__, x))
            except TypeError:
                parts.append(("value", type(x).__name__, repr(x)))
    try:
        hash(spec)
        spec_key = spec
    except TypeError:
        spec_key = repr(spec)
    return (spec_key, tuple(parts), bool(training), bool(grad), tuple(amp), trainable)


def _flat_names(args, kwargs, forward) -> list:
    """A name per flat (args, kwargs) leaf: the parameter name it binds to (plus a path
    inside containers), for messages and input_placements."""
    import inspect

    names = []
    flat_args, _ = pytree.tree_flatten_with_path((args, kwargs))
    params = list(inspect.signature(forward).parameters)
    for path, _x in flat_args:
        first = path[0].idx if hasattr(path[0], "idx") else 0
        rest = path[1:]
        if first == 0:  # positional
            pos = rest[0].idx
            base = params[pos] if pos < len(params) else f"args[{pos}]"
            rest = rest[1:]
        else:
            base = rest[0].key
            rest = rest[1:]
        names.append(base + "".join(str(k) for k in rest))
    return names


def _global_example(x, kind, spec, mesh):
    """The global value a planning trace sees for an input leaf (fake-able tensors)."""
    if kind == "dtensor":
        return torch.empty(x.shape, dtype=x.dtype, device=x.to_local().device, requires_grad=x.requires_grad)
    if kind == "local":
        shape = list(x.shape)
        for md, p in enumerate(spec_to_placements(spec, mesh_ndim=mesh.ndim)):
            if p.is_shard():
                shape[p.dim] *= mesh.size(md)
        return torch.empty(shape, dtype=x.dtype, device=x.device, requires_grad=x.requires_grad)
    return x


def _contiguous_stride(shape) -> tuple:
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(stride))


def _tangent_outputs(plan: Plan) -> list:
    """Position in the forward outputs (buffer writes first) of each tangent, in order."""
    n_mut = sum(1 for r, _ in plan.graph.outputs() if r == "mutation")
    return [n_mut + int(n.extra["output"]) for _, n in plan.graph.placeholders() if n.role == "tangent"]


def _grad_slots(plan: Plan) -> list:
    """For each program input (placeholders but tangents, graph order): the position of its
    gradient among the backward's outputs -- one per placeholder of the traced joint graph,
    tangents excluded -- or None (tensor constants have none)."""
    primals = [n.name for n in plan.joint.gm.graph.nodes
               if n.op == "placeholder" and descriptors.describe_input(n.meta.get("desc"))[0] != "tangent"]
    where = {name: k for k, name in enumerate(primals)}
    return [where.get(n.name) for _, n in plan.graph.placeholders() if n.role != "tangent"]


def _param_placeholders(plan: Plan) -> dict:
    """The rank program's parameter inputs (primals_k, as trace_rank_program names them) ->
    the parameter's FQN."""
    out, k = {}, 0
    for _, n in plan.graph.placeholders():
        if n.role == "tangent":
            continue
        k += 1
        if n.role == "param":
            out[f"primals_{k}"] = n.target
    return out


def _get_tensor(module, name):
    try:
        return module.get_parameter(name)
    except AttributeError:
        return module.get_buffer(name)


def _aliases(module, tensor) -> list:
    """Every FQN under which `tensor` is a parameter or buffer of `module` (tied weights)."""
    out = [n for n, p in module.named_parameters(remove_duplicate=False) if p is tensor]
    out += [n for n, b in module.named_buffers(remove_duplicate=False) if b is tensor]
    return out


def parallelize(model: nn.Module, mesh, example_args=(), example_kwargs=None, *, device="H100", time_limit=10.0,
                memory_limit="device", fixed_params=None, calibration=None, fallback_replicate=True,
                timeout=DEFAULT_TIMEOUT, input_placements=None, mp_policy=None, compile=None,
                reshard_after_forward=None, overlap=None, optimizer_states=2, plan=None,
                like=None, bucket_cap_mb=DEFAULT_BUCKET_CAP_MB, plan_cache_size=16,
                replan_tolerance=0.05, measure_candidates=0, measure_steps=3, recompute=False,
                optimizer_impl=None, replicated_state="plain") -> ParallelModule:
    """Plans `model(*example_args, **example_kwargs)` on `mesh` and returns the parallel
    module. Parameters and buffers become DTensors in the planned placements -- unless the
    plan replicates every one of them (DDP's plan): then they stay plain tensors, the same on
    every rank, as DDP's are, and the optimizer runs without DTensor's dispatch
    (`replicated_state="dtensor"` keeps them DTensors whatever the plan). Every rank
    must call this with the same model state and example arguments.

    `input_placements` ({argument name or flat index: placements}): those arguments are
    each rank's local shard (a data loader's batch), e.g. {"input_ids": [Shard(0), Replicate()]}.
    `timeout` (seconds or a timedelta): how long a rank waits in one of the runtime's
    collectives before it gives up; when another rank failed inside the planned program,
    the error then names that rank (_runtime/failures.py).
    `mp_policy` (torch.distributed.fsdp.MixedPrecisionPolicy): parameters and optimizer
    state keep their dtype; compute runs in `param_dtype`; parameter gradients are reduced
    in `reduce_dtype` (None: in `param_dtype`), as FSDP2 does (_mixed_precision.py).

    Execution (docs/user_guide.md, "Execution"): `compile` runs each rank's forward and
    backward graphs through Inductor (None: on CUDA meshes, where it pays; eager on CPU,
    where compiling costs more than small test models gain); `overlap` issues collectives
    as early as their inputs allow and waits as late as possible (None: on; gloo meshes
    keep one collective in flight at a time -- docs/user_guide.md, "Execution"); `reshard_after_forward`
    frees gathered parameters after forward and gathers them again in backward (None: yes
    unless `memory_limit` leaves room to keep them). `optimizer_states`: tensors of a
    parameter's size the optimizer keeps (AdamW 2, SGD with momentum 1), for the plan's
    memory estimate (`plan.summary.memory`). `optimizer_impl` ("for-loop", "foreach" or
    "fused": torch.optim.AdamW's foreach=False, foreach=True or fused=True; None: torch's
    default for the device, foreach on CUDA and the loop elsewhere): the implementation the
    training loop will run, whose measured figures price the optimizer step when the
    calibration was measured live (the fused step ran 3x faster than the loop here, and pays
    DTensor's dispatch once rather than per kernel). `bucket_cap_mb` (DDP's name and default):
    collectives of one kind, group and dtype whose inputs are ready one after another --
    parameter gradients above all -- run as one collective on a flat buffer of at most
    this size (0: each on its own).

    `plan` (a Plan, e.g. Plan.load(path), or a plan file's path): apply this saved plan to the
    example call instead of solving, after checking it was made for this model's graph, this
    mesh's shape (or a 2-D layout of a 1-D mesh's ranks, which measure_candidates may keep:
    applied on that layout again) and these example inputs (PlanMismatchError names what differs); see
    docs/user_guide.md, "Plan once, train many". Later call signatures are planned as usual.

    `calibration`: a cost-model profile (dict, JSON text or file, docs/cost_model.md), or
    "live": measure this mesh now -- every rank together, compute, copies, per-node runtime
    overhead and each mesh dim's collectives -- cached per machine and mesh in
    $TLM_CACHE_DIR (_live_calibration.py; later plans read the file).

    `like` ("ddp", "fsdp2" or "tp"): plan exactly as that torch wrapper runs the step -- parameters
    replicated (DDP) or sharded on their first dim over every mesh dim (FSDP2), activations
    kept on the rank whose batch shard made them, parameter gradients reduced -- to compare
    our runtime with torch's on torch's own plan. Under "ddp" the parameters and buffers are
    plain tensors, as DDP's are (rank 0's values broadcast), unless `fixed_params` shards
    some of them (then all of them are DTensors). A model with an op that cannot run on
    a local batch shard is refused. "tp": as torch's tensor-parallel styles run it, their
    placements given by `fixed_params` (ColwiseParallel: a weight Shard(0); RowwiseParallel:
    Shard(1)) -- every rank the whole batch, each parameter read and its gradient made where
    the parameter is kept, only activations moved (a row-parallel product's output reduced).

    Calls whose sizes change (sequence length, a smaller last batch): the first call of a
    new size keeps the plan of the previous size, priced at the new sizes, unless a short
    search there finds a plan more than `replan_tolerance` (a fraction) cheaper -- then it
    solves afresh (one log line says why); each size traces its own program. At most
    `plan_cache_size` planned call signatures are kept, least recently used dropped first;
    `plan_cache_stats` counts hits, misses, plans solved and carried, and evictions.

    `measure_candidates` (k >= 2): beside the planner's plan, plan what torch's wrappers run
    (like="ddp", like="fsdp2") and, on a 1-D mesh, the planner's plan on each 2-D layout of
    its ranks (4 ranks as 2x2; not with fixed_params, input_placements or DTensor arguments,
    which name the mesh's own dims; a module kept on a layout holds its state on that
    layout's mesh, `pmodel.mesh`), run up to k distinct candidates for `measure_steps` forward +
    backward steps each on the real mesh (on copies of the model) and keep the fastest
    measured one; `plan.measurements` holds every candidate's measured and estimated step
    (_measure.py). Costs a plan and a few steps per candidate, once.

    `recompute`: the solver may also choose, per value backward reads, to recompute it in
    backward instead of keeping it from forward -- jointly with the placements, under the
    memory limit (activation checkpointing chosen by cost, core/recompute.h); the plan's
    nodes say which (`plan.recomputed_nodes()`, the report per module). `"full"` or
    `"selective"`: torchtitan's activation checkpointing modes as fixed policies instead
    (_ac_policy.py), priced and applied the same way."""
    _check_recompute(recompute)
    _check_replicated_state(replicated_state)
    if measure_candidates:
        return _parallelize_measured(model, mesh, example_args, example_kwargs, measure_candidates, measure_steps,
                                     dict(device=device, time_limit=time_limit, memory_limit=memory_limit,
                                          fixed_params=fixed_params, calibration=calibration,
                                          fallback_replicate=fallback_replicate, timeout=timeout,
                                          input_placements=input_placements, mp_policy=mp_policy, compile=compile,
                                          reshard_after_forward=reshard_after_forward, overlap=overlap,
                                          optimizer_states=optimizer_states, plan=plan, like=like,
                                          bucket_cap_mb=bucket_cap_mb, plan_cache_size=plan_cache_size,
                                          replan_tolerance=replan_tolerance, recompute=recompute,
                                          optimizer_impl=optimizer_impl, replicated_state=replicated_state))
    _check_mesh(mesh)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    timeout = as_timeout(timeout)
    plan = None if plan is None else as_saved_plan(plan)
    mesh = runtime_mesh(_mesh_for_saved_plan(mesh, plan), timeout)
    if isinstance(calibration, str) and calibration == "live":  # measured on this mesh now, or its cached profile
        from ._live_calibration import live_profile

        calibration = live_profile(mesh, device)
    calibration = _priced_for_optimizer(calibration, optimizer_impl)
    _sync_rng_state(mesh)
    options = _Options(device=device, time_limit=time_limit, memory_limit=memory_limit, fixed_params=fixed_params,
                       calibration=calibration, fallback_replicate=fallback_replicate, timeout=timeout,
                       input_placements=dict(input_placements or {}), mp_policy=mp_check(mp_policy),
                       execution=_execution_options(mesh, compile, reshard_after_forward, overlap, memory_limit,
                                                    bucket_cap_mb),
                       optimizer_states=_check_count(optimizer_states, "optimizer_states"),
                       plan=plan, like=_check_like(like),
                       plan_cache_size=_check_count(plan_cache_size, "plan_cache_size", minimum=1),
                       replan_tolerance=_check_fraction(replan_tolerance, "replan_tolerance"),
                       recompute=recompute, replicated_state=replicated_state)  # both checked on entry
    pmodel = ParallelModule(model, mesh, options)
    args = example_args if isinstance(example_args, (tuple, list)) else (example_args,)
    pmodel._compiled_for(tuple(args), dict(example_kwargs or {}))  # plans and shards the state; runs nothing
    return pmodel


def _priced_for_optimizer(calibration, impl):
    """`calibration` with its optimizer figures those measured for AdamW implementation
    `impl` (_live_calibration.with_optimizer_impl). None keeps the profile's own (a live
    profile's: torch's default implementation); without a profile the device table prices
    every implementation alike (its roofline has no per-implementation figure)."""
    from ._live_calibration import check_optimizer_impl, with_optimizer_impl
    from .cost_model import calibration_text

    check_optimizer_impl(impl)
    if impl is None or calibration is None:
        return calibration
    return with_optimizer_impl(json.loads(calibration_text(calibration)), impl)


def _parallelize_measured(model, mesh, example_args, example_kwargs, limit, steps, options) -> ParallelModule:
    """parallelize(measure_candidates=limit): the fastest measured of the candidate plans (_measure.py)."""
    from ._measure import measure_and_pick

    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
        raise ValueError(f"measure_candidates: expected an int >= 2 (how many plans to measure), got {limit!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"measure_steps: expected a positive int, got {steps!r}")
    if options["plan"] is not None or options["like"] is not None:
        raise ValueError("measure_candidates: chooses the plan itself; expected neither plan= nor like=")
    _check_mesh(mesh)
    args = example_args if isinstance(example_args, (tuple, list)) else (example_args,)
    kwargs = dict(example_kwargs or {})

    timeout = as_timeout(options["timeout"])

    def build(model_copy, like, layout, plan=None):
        on = mesh if layout is None else runtime_mesh(dtensor.mesh_in_layout(mesh, layout), timeout)
        return parallelize(model_copy, on, args, kwargs, **dict(options, like=like, plan=plan))

    (like, layout), plan, measurements = measure_and_pick(
        model, build, args, kwargs, tuple(mesh.shape), limit, steps, mesh.device_type == "cuda",
        world_group(timeout), no_layouts=_why_no_layouts(options, args, kwargs),
        optimizer_impl=options["optimizer_impl"])
    pmodel = build(model, like, layout, plan)  # the kept plan applied to the model itself: no second solve
    pmodel.plan.measurements = measurements
    return pmodel


def _mesh_for_saved_plan(mesh, plan):
    """`mesh`, or the layout of its ranks a saved plan was made for: measure_candidates may keep
    a plan made on a 2-D layout of a 1-D mesh's ranks (_measure.layouts), and that plan,
    saved, applies to the same layout again."""
    from ._measure import layouts

    if plan is None or tuple(plan.mesh_shape) not in layouts(tuple(mesh.shape)):
        return mesh
    return dtensor.mesh_in_layout(mesh, plan.mesh_shape)


def _why_no_layouts(options, args, kwargs) -> str | None:
    """Why the planner's plan cannot be tried on another layout of the mesh's ranks (arguments
    that name the mesh's own dims), or None."""
    if options["fixed_params"]:
        return "fixed_params are placements on the mesh's own dims"
    if options["input_placements"]:
        return "input_placements are placements on the mesh's own dims"
    if any(isinstance(x, DTensor) for x in pytree.tree_leaves((args, kwargs))):
        return "a DTensor argument lives on the mesh itself"
    return None


def _memory_room(memory_limit, plan):
    """Bytes an explicit memory_limit leaves above the plan's estimated peak (None without one)."""
    limit = explicit_memory_limit(memory_limit)
    return None if limit is None else limit - plan.summary.memory.peak


def _check_like(like):
    """Refuses an unknown torch plan before tracing; the core's list is the only one."""
    plans = _C.like_plans()
    if like is not None and like not in plans:
        raise ValueError(f"like: expected one of {plans} or None, got {like!r}")
    return like


def _check_replicated_state(value) -> str:
    if value not in ("plain", "dtensor"):
        raise ValueError(f"replicated_state: expected 'plain' (state a plan replicates whole stays plain "
                         f"tensors, as DDP's) or 'dtensor', got {value!r}")
    return value


def _check_fraction(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name}: expected a non-negative fraction (0.05: 5%), got {value!r}")
    return float(value)


def _check_count(value, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_recompute(value):
    from ._ac_policy import MODES

    if not isinstance(value, bool) and value not in MODES:
        raise ValueError(f"recompute: expected True (the solver chooses), False or one of {list(MODES)} "
                         f"(torchtitan's activation checkpointing modes), got {value!r}")
    return value


def _execution_options(mesh, compile, reshard_after_forward, overlap, memory_limit, bucket_cap_mb) -> ExecutionOptions:
    for name, value in (("compile", compile), ("overlap", overlap), ("reshard_after_forward", reshard_after_forward)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be True, False or None, got {value!r}")
    if compile is None:
        compile = mesh.device_type == "cuda"
    if overlap is None:
        overlap = True
    if reshard_after_forward is None and explicit_memory_limit(memory_limit) is None:
        reshard_after_forward = True  # FSDP2's default; with a limit, each plan decides (RankProgram)
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or not bucket_cap_mb >= 0:
        raise ValueError(f"bucket_cap_mb: expected a non-negative number of MiB (0: no buckets), got {bucket_cap_mb!r}")
    return ExecutionOptions(reshard_after_forward=reshard_after_forward, overlap=overlap, compile=compile,
                            bucket_bytes=int(bucket_cap_mb * 2**20),
                            inflight_collectives=None if mesh.device_type == "cuda" else GLOO_INFLIGHT_COLLECTIVES,
                            keep_host_memory=mesh.device_type == "cpu")


def _sync_rng_state(mesh) -> None:
    """Every rank starts from rank 0's generator state (CPU, and the GPU's on a CUDA mesh), so random ops (dropout) draw
    the same numbers they would in one process (docs/user_guide.md, "Randomness")."""
    if not dist.is_initialized() or mesh.size() == 1:
        return
    cuda = mesh.device_type == "cuda"
    box = [torch.get_rng_state(), torch.cuda.get_rng_state() if cuda else None]
    with fake_tensors.outside_fake_mode():
        dist.broadcast_object_list(box, src=0)
    torch.set_rng_state(box[0])
    if cuda:  # dropout on GPU draws from this device's generator
        torch.cuda.set_rng_state(box[1])

