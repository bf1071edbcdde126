"""torch.compile(model, backend="localmap", options={"mesh": mesh}).

Registered through the `torch_dynamo_backends` entry point (pyproject.toml), so it works
right after `pip install`. Dynamo hands the backend one FX graph per compiled region with
the tensors it reads: the model's own parameters and buffers, and the region's inputs.
Each graph is planned the way parallelize plans a module -- parameters in placements of
their own, inputs as they arrive -- and runs as this rank's SPMD program. Outputs come back
whole on every rank (plain tensors; DTensors where Dynamo traced DTensors), so the Python
code around the graph (graph breaks, a loss outside the model) computes what it did eagerly.

* Parameters. torch.compile gives a backend tensors, not modules: it cannot replace a
  module's parameters. A plain parameter is planned in a placement of its own; each call
  takes this rank's piece of it (a local slice: no weight is gathered in) and its gradient
  is gathered whole into `.grad`, so the optimizer the user built keeps working. Every graph
  of a model (graph breaks, recompiles, eval graphs) uses the placement the first plan chose
  for a parameter. DTensor parameters are planned in their own placements and their
  gradients stay sharded (the memory saving; `parallelize` gives it for plain modules).
* Buffers are replicated; a buffer the graph writes (BatchNorm statistics) is written back.
* Forward-only graphs (eval, torch.no_grad) get forward programs of their own.
* Shapes: each distinct call signature (shapes, dtypes, non-tensor values, grad mode) gets
  a program of its own, at most options["plan_cache_size"] (16) kept. A signature that
  differs from a planned one only in sizes -- a new sequence length; under Dynamo's
  automatic dynamic shapes (after a second size) one graph serves them all -- carries the
  previous plan to its sizes unless a plan options["replan_tolerance"] (5%) cheaper exists
  there (_plan_cache.py), so a stream of lengths solves once, not once per length.
* Saved plans: options["plan"] (a Plan, a plan file's path, or a list of them: one per
  Dynamo graph) is applied instead of solving; each graph takes the plan made for it
  (its fingerprint matches) and a graph with none raises PlanMismatchError. Save the plans
  of a first run with on_plan=lambda p: p.save(...).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import re

import torch
import torch.nn as nn
from torch.distributed.tensor import DTensor

from ._torch_private import autocast, dynamo, fake_tensors, pytrees
from ._device import check_mesh_backend, mesh_device
from ._module_tree import attach_tensor
from ._plan_cache import PlanCache
from ._runtime.bucketing import DEFAULT_BUCKET_CAP_MB
from ._runtime.failures import failure_scope
from ._runtime.groups import DEFAULT_TIMEOUT, as_timeout, runtime_mesh
from ._runtime.redistribute import redistribute_local, shard_local
from ._spmd import RankProgram, local_example_inputs, trace_rank_program
from .placements import as_spec, spec_to_placements

_KNOWN_OPTIONS = {"device", "time_limit", "memory_limit", "calibration", "fallback_replicate", "seed", "timeout",
                  "inductor", "overlap", "reshard_after_forward", "bucket_cap_mb", "plan_cache_size",
                  "replan_tolerance", "optimizer_impl"}
# How the per-rank programs run (parallelize's compile / overlap / reshard_after_forward).
_EXECUTION_OPTIONS = ("inductor", "overlap", "reshard_after_forward", "bucket_cap_mb")

# One placement per plain parameter, shared by every graph that reads it: (mesh shape, spec),
# kept on the Parameter object itself (it lives and dies with it; tensors cannot be keys of
# a WeakKeyDictionary: their == is elementwise).
_PLACEMENT_ATTR = "_localmap_backend_placement"


def localmap_backend(gm: torch.fx.GraphModule, example_inputs, options=None, **_kwargs):
    options = dict(options or {})
    mesh = options.pop("mesh", None)
    on_plan = options.pop("on_plan", None)  # callback(Plan), e.g. to print or test the plan
    saved = _saved_plans(options.pop("plan", None))
    if mesh is None:
        raise ValueError('backend "localmap" needs options={"mesh": DeviceMesh}')
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise ValueError(f"unknown localmap backend options {sorted(unknown)} "
                         f"(expected mesh, on_plan, plan, {', '.join(sorted(_KNOWN_OPTIONS))})")
    options["timeout"] = as_timeout(options.get("timeout", DEFAULT_TIMEOUT))
    mesh_device(mesh)  # a CUDA mesh needs this rank's GPU
    check_mesh_backend(mesh)
    from ._parallelize import _execution_options

    ex = {k: options.pop(k) for k in _EXECUTION_OPTIONS if k in options}
    execution = _execution_options(mesh, ex.get("inductor"), ex.get("reshard_after_forward"), ex.get("overlap"),
                                   options.get("memory_limit", "device"), ex.get("bucket_cap_mb", DEFAULT_BUCKET_CAP_MB))
    from ._parallelize import _check_count, _check_fraction, _priced_for_optimizer

    if "optimizer_impl" in options:  # which AdamW implementation's measured figures price the step
        options["calibration"] = _priced_for_optimizer(options.get("calibration"), options.pop("optimizer_impl"))

    cache_size = _check_count(options.pop("plan_cache_size", 16), "plan_cache_size", minimum=1)
    tolerance = _check_fraction(options.pop("replan_tolerance", 0.05), "replan_tolerance")
    graph = _CompiledGraph(gm, list(example_inputs), runtime_mesh(mesh, options["timeout"]), options, on_plan,
                           cache_size, tolerance)
    graph.execution = execution
    graph.saved_plans = saved
    return graph


def _saved_plans(value) -> list:
    """options["plan"] as a list of Plans (a Plan, a path, or a list / tuple of them)."""
    from .plan import as_saved_plan

    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ValueError('backend "localmap": options["plan"] is an empty list; expected a Plan, a plan file\'s path '
                         "or a list of them")
    return [as_saved_plan(p, f'options["plan"][{k}]' if isinstance(value, (list, tuple)) else 'options["plan"]')
            for k, p in enumerate(items)]


# ---- the graph as a module whose state is the model's own tensors ---------------------

_SOURCE_KEY = re.compile(r"\._(modules|parameters|buffers)\['([^']*)'\]")


def _state_fqn(source: str | None) -> tuple[str, str] | None:
    """("param" | "buffer", FQN) for a Dynamo input source naming module state
    (L['self']._modules['0']._parameters['weight'] -> ("param", "0.weight")), else None."""
    if not source:
        return None
    parts = _SOURCE_KEY.findall(source)
    if not parts or parts[-1][0] == "modules":
        return None
    kind = "param" if parts[-1][0] == "parameters" else "buffer"
    return kind, ".".join(key for _, key in parts)


class _GraphAsModule(nn.Module):
    """forward(*region inputs) = the Dynamo graph, with the model's parameters and buffers
    registered under their FQNs: tracing then sees them as module state (parameter and buffer
    roles, buffer writes), exactly as it sees a model's."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list):
        super().__init__()
        object.__setattr__(self, "_gm", gm)  # not a submodule: its attributes are no state of ours
        self._slots = []  # per graph input: ("state", FQN) or ("arg", position among the region inputs)
        n_args = 0
        for x, source in zip(example_inputs, dynamo.dynamo_input_sources(gm)):
            state = _state_fqn(source) if isinstance(x, torch.Tensor) else None
            if state is not None and state[1] not in {fqn for kind, fqn in self._slots if kind == "state"}:
                attach_tensor(self, state[1], x, as_param=state[0] == "param" or isinstance(x, nn.Parameter))
                self._slots.append(("state", state[1]))
            else:
                self._slots.append(("arg", n_args))
                n_args += 1
        self._n_args = n_args
        self._constants: dict = {}  # region-input position -> value baked into the trace
        # Region inputs that are Python numbers passed as 0-d tensors (read with .item()).
        scalar = dynamo.dynamo_scalar_inputs(gm)
        self.scalar_args = {what for (kind, what), is_scalar in zip(self._slots, scalar) if kind == "arg" and is_scalar}

    def region_args(self, inputs) -> list:
        return [x for (kind, _), x in zip(self._slots, inputs) if kind == "arg"]

    @contextlib.contextmanager
    def bound(self, constants: dict, scalars: dict):
        """Traces see the non-tensor region inputs (dynamic=True passes sizes as ints) as
        these constants, and `.item()` of a number passed as a 0-d tensor as that number:
        each signature is planned for its own values."""
        gm = self._gm
        self._constants = constants
        if scalars:
            object.__setattr__(self, "_gm", _bake_items(gm, {self._arg_placeholder(i): v for i, v in scalars.items()}))
        try:
            yield self
        finally:
            self._constants = {}
            object.__setattr__(self, "_gm", gm)

    def _arg_placeholder(self, position: int) -> str:
        names = [n.name for n in self._gm.graph.nodes if n.op == "placeholder"]
        return names[self._slots.index(("arg", position))]

    def forward(self, *args):
        if self._constants:
            rest = iter(args)
            args = [self._constants[i] if i in self._constants else next(rest) for i in range(self._n_args)]
        full = [self.get_submodule_tensor(what) if kind == "state" else args[what] for kind, what in self._slots]
        return tuple(self._gm(*full))

    def get_submodule_tensor(self, fqn: str):
        owner, _, leaf = fqn.rpartition(".")
        mod = self.get_submodule(owner) if owner else self
        return mod._parameters[leaf] if leaf in mod._parameters else mod._buffers[leaf]


def _bake_items(gm: torch.fx.GraphModule, values: dict) -> torch.fx.GraphModule:
    """A copy of `gm` where `p.item()` of each placeholder named in `values` is that value."""
    graph = copy.deepcopy(gm.graph)
    for node in list(graph.nodes):
        if node.op == "call_method" and node.target == "item" and node.args[0].name in values:
            node.replace_all_uses_with(values[node.args[0].name])
            graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph)


# ---- taking this rank's piece of a whole tensor ----------------------------------------

class _TakePiece(torch.autograd.Function):
    """This rank's piece of a whole tensor (a parameter or an input every rank holds); its
    gradient comes back whole (the pieces' gradients gathered)."""

    @staticmethod
    def forward(ctx, whole, mesh, spec):
        ctx.mesh, ctx.spec, ctx.shape = mesh, spec, tuple(whole.shape)
        # A piece the loss does not depend on (a pooler an LM head leaves unused) gets no
        # gradient, as in eager, not zeros: AdamW would decay and move a parameter with a
        # zero gradient. Whether a gradient exists follows from the graph, alike on every
        # rank, so the ranks skip the gather together.
        ctx.set_materialize_grads(False)
        return shard_local(whole.detach(), mesh, spec)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None, None
        replicated = "R" * ctx.mesh.ndim
        return redistribute_local(grad.contiguous(), ctx.shape, ctx.mesh, ctx.spec, replicated), None, None


def _piece(x: torch.Tensor, mesh, spec: str):
    if set(spec) == {"R"}:  # replicated: the whole tensor is the piece
        return x
    if x.requires_grad:
        return _TakePiece.apply(x, mesh, spec)
    return shard_local(x, mesh, spec)


# ---- one compiled region ----------------------------------------------------------------

@dataclasses.dataclass
class _Entry:
    plan: object
    program: RankProgram
    sources: list  # per program input: ("state", FQN) | ("arg", position) | ("constant", local tensor)
    specs: list  # per program input: planned spec
    mutated: list  # buffer FQNs, in the program's mutation-output order
    output_spec: object


class _CompiledGraph:
    def __init__(self, gm, example_inputs, mesh, options, on_plan, cache_size=16, replan_tolerance=0.05):
        self.module = _GraphAsModule(gm, example_inputs)
        self.mesh = mesh
        self.options = options
        self.on_plan = on_plan
        self.execution = None  # ExecutionOptions (localmap_backend sets them)
        self.saved_plans: list = []  # options["plan"]: applied instead of solving (localmap_backend sets them)
        self.entries = PlanCache(cache_size)  # per call signature (_plan_cache.py)
        self.replan_tolerance = replan_tolerance
        # Dynamo's view of each output: DTensor outputs go back as DTensors in these placements.
        self.output_placements = [tuple(v.placements) if isinstance(v, DTensor) else None
                                  for v in dynamo.graph_output_examples(gm)]

    def __call__(self, *inputs):
        with failure_scope():
            args = self.module.region_args(inputs)
            entry = self._entry(args)
            return self._run(entry, args)

    def _entry(self, args) -> _Entry:
        # Numbers passed as 0-d tensors are baked into the plan: their values are part of the key.
        scalars = tuple(args[i].item() for i in sorted(self.module.scalar_args))
        # The autocast state too: Dynamo guards on it, and a call under autocast traces its casts.
        key = (_signature(args), scalars, torch.is_grad_enabled(), autocast.autocast_state())

        def describe():  # on a miss only
            # A family: the same call but for sizes -- tensor shapes and, under dynamic
            # shapes, the integer inputs Dynamo passes for symbolic sizes.
            return ((_signature(args, sizes=False), scalars, key[2], key[3]),
                    [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in args],
                    [f"input {i}" for i in range(len(args))])

        return self.entries.get(key, describe, lambda previous: self._plan(args, previous))

    def _plan(self, args, previous=None) -> _Entry:
        from ._local_map import node_extra, use_mesh
        from ._parallelize import _grad_slots, _param_placeholders, _tangent_outputs
        from ._trace import trace_joint

        mesh, ndim = self.mesh, self.mesh.ndim
        fixed, free_params = {}, []
        for fqn, t in list(self.module.named_parameters()) + list(self.module.named_buffers()):
            if isinstance(t, DTensor):
                fixed[fqn] = as_spec(list(t.placements), ndim, t.dim(), fqn)
            elif isinstance(t, nn.Parameter):
                known = getattr(t, _PLACEMENT_ATTR, None)
                if known is not None and known[0] == tuple(mesh.shape):
                    fixed[fqn] = known[1]
                else:
                    free_params.append((fqn, t))
            else:
                fixed[fqn] = "R" * ndim  # buffers stay whole: the graph may write them
        # Tensors are traced inputs; other region inputs (SymInt sizes under dynamic=True,
        # flags) are constants of this signature's plan.
        tensor_pos = [i for i, x in enumerate(args) if isinstance(x, torch.Tensor)]
        constants = {i: x for i, x in enumerate(args) if not isinstance(x, torch.Tensor)}
        scalars = {i: args[i].item() for i in self.module.scalar_args}
        input_specs = {str(k): as_spec(list(args[i].placements), ndim, args[i].dim(), f"input {i}")
                       for k, i in enumerate(tensor_pos) if isinstance(args[i], DTensor)}
        with use_mesh(mesh), self.module.bound(constants, scalars):  # regions without a mesh of their own use this one
            joint = trace_joint(self.module, tuple(args[i] for i in tensor_pos), {})
        plan = self._plan_joint(joint, previous, node_extra=node_extra, outputs="replicated", fixed_params=fixed,
                                input_specs=input_specs, **self.options)
        placements = plan.state_placements()
        for fqn, t in free_params:  # later graphs plan around this graph's choice
            if fqn in placements:
                setattr(t, _PLACEMENT_ATTR, (tuple(mesh.shape), placements[fqn]))
        if self.on_plan is not None:
            self.on_plan(plan)
        coord = mesh.get_coordinate()
        fake_inputs = local_example_inputs(plan, fake_tensors.FakeTensorMode(), coord, mesh_device(mesh))
        from ._parallelize import _memory_room as memory_room

        program = RankProgram(trace_rank_program(plan, mesh, coord, fake_inputs), joint.num_fwd_outputs,
                              backward=joint.backward, tangent_outputs=_tangent_outputs(plan),
                              grad_slots=_grad_slots(plan), param_placeholders=_param_placeholders(plan),
                              options=self.execution,
                              memory_room=memory_room(self.options.get("memory_limit", "device"), plan))
        sources, specs = [], []
        for (_, node), spec in zip(plan.graph.placeholders(), plan.placeholder_specs()):
            if node.role == "tangent":
                continue
            specs.append(spec)
            if node.role in ("param", "buffer"):
                sources.append(("state", node.target))
            elif node.role == "input":
                sources.append(("arg", tensor_pos[int(node.target)]))
            else:  # a tensor constant of the traced graph
                sources.append(("constant", shard_local(getattr(joint.gm, node.target), mesh, spec)))
        return _Entry(plan=plan, program=program, sources=sources, specs=specs,
                      mutated=list(joint.mutated_buffers), output_spec=joint.output_spec)

    def _plan_joint(self, joint, previous, **options):
        """Solves (or carries `previous`, the plan of this graph at other sizes, to these), or
        applies the saved plan made for this graph (the first whose fingerprint matches;
        PlanMismatchError naming each plan's difference when none does)."""
        from .plan import PlanMismatchError, plan_joint

        if not self.saved_plans:
            return plan_joint(joint, self.mesh, previous=previous, replan_tolerance=self.replan_tolerance, **options)
        why = []
        for k, saved in enumerate(self.saved_plans):
            try:
                return plan_joint(joint, self.mesh, plan=saved, **options)
            except PlanMismatchError as e:
                why.append(f"plan {k}: {e}" if len(self.saved_plans) > 1 else str(e))
        raise PlanMismatchError("; ".join(why) if len(why) == 1 else
                                "no saved plan was made for this graph: " + "; ".join(why))

    def _run(self, entry: _Entry, args):
        program_inputs = []
        for (kind, what), spec in zip(entry.sources, entry.specs):
            if kind == "constant":
                program_inputs.append(what)
                continue
            x = self.module.get_submodule_tensor(what) if kind == "state" else args[what]
            if isinstance(x, DTensor):
                want = spec_to_placements(spec, mesh_ndim=self.mesh.ndim)
                program_inputs.append((x if tuple(x.placements) == want else x.redistribute(self.mesh, want)).to_local())
            else:
                program_inputs.append(_piece(x, self.mesh, spec))
        outs = entry.program(*program_inputs)
        n_mut = len(entry.mutated)
        with torch.no_grad():
            for fqn, new in zip(entry.mutated, outs[:n_mut]):
                self.module.get_submodule_tensor(fqn).copy_(new)  # replicated: the whole new value
        results = []
        for k, local in enumerate(outs[n_mut:]):
            placements = self.output_placements[k] if k < len(self.output_placements) else None
            if placements is not None:  # Dynamo traced a DTensor here: hand one back, in its placements
                spec = as_spec(list(placements), self.mesh.ndim, local.dim(), f"output {k}")
                local = DTensor.from_local(shard_local(local, self.mesh, spec), self.mesh, placements,
                                           run_check=False, shape=local.shape, stride=local.stride())
            results.append(local)
        return list(pytrees.pytree.tree_unflatten(results, entry.output_spec))


def _signature(args, sizes: bool = True) -> tuple:
    """What a plan is made for; `sizes=False`: the same with shapes as ranks and integers
    (Dynamo's symbolic sizes under dynamic shapes) as their type only."""
    parts = []
    for x in args:
        shape = (tuple(x.shape) if sizes else x.dim()) if isinstance(x, torch.Tensor) else None
        if isinstance(x, DTensor):
            parts.append(("dtensor", shape, x.dtype, tuple(x.placements), x.requires_grad))
        elif isinstance(x, torch.Tensor):
            parts.append(("tensor", shape, x.dtype, x.requires_grad))
        elif not sizes and isinstance(x, int) and not isinstance(x, bool):
            parts.append(("value", "int"))
        else:
            parts.append(("value", type(x).__name__, x if isinstance(x, (int, float, bool, str, type(None))) else repr(x)))
    return tuple(parts)
