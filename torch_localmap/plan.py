"""Planning: joint graph -> IR -> C++ planner (one call) -> Plan (typed: _plan_types.py)."""
from __future__ import annotations

import json
import warnings
import torch

from . import _C
from ._torch_private import fake_tensors
from ._mesh import mesh_shape_and_names
from ._runtime.failures import failure_scope
from .solver import InfeasibleError
from ._plan_types import NodePlan, Plan, PlanMismatchError, PlanSummary, SolverSummary  # noqa: F401  (public)
from ._ir_export import export_graph
from ._gc_pause import gc_paused
from ._node_origin import label_plan_document, module_calls_of
from ._trace import JointGraph, trace_joint
from ._log import get_logger
from ._progress import SolveProgress

_log = get_logger(__name__)


def plan_options(mode="train", device="H100", time_limit=10.0, memory_limit="device", fixed_params=None,
                 calibration=None, fallback_replicate=True, seed=0, input_specs=None, outputs="free",
                 optimizer_states=2, gap_tolerance=1e-3, replicated_outputs=(), like=None, recompute=False,
                 recompute_only=None, bucket_bytes=None, fold_repeated=True, plain_replicated_state=False) -> str:
    opts = {"mode": mode, "device": device, "time_limit": float(time_limit), "seed": int(seed),
            "fallback_replicate": bool(fallback_replicate), "outputs": outputs,
            "optimizer_states": int(optimizer_states), "gap_tolerance": float(gap_tolerance),
            "memory_limit": memory_limit_option(memory_limit), "fold_repeated": bool(fold_repeated)}
    if plain_replicated_state:  # the runtime holds state a plan replicates whole plain (core/plain_state.h)
        opts["plain_replicated_state"] = True
    if recompute_only is not None:  # a fixed policy: these nodes are recomputed (_ac_policy.py)
        opts["recompute_only"] = [str(n) for n in recompute_only]
    elif recompute:  # the solver may recompute values backward reads (core/recompute.h)
        opts["recompute"] = True
    if bucket_bytes is not None:  # the runtime's gradient bucket cap (else the planner's: 25 MiB, as the runtime's)
        opts["bucket_bytes"] = int(bucket_bytes)
    if like is not None:
        opts["like"] = like  # torch's plan to follow: "ddp" | "fsdp2" | "tp" (the planner checks the name)
    if replicated_outputs:
        opts["replicated_outputs"] = [str(t) for t in replicated_outputs]
    if input_specs:
        opts["input_specs"] = {str(k): _spec_str(v) for k, v in input_specs.items()}
    if fixed_params:
        opts["fixed_params"] = {k: _spec_str(v) for k, v in fixed_params.items()}
    if calibration is not None:
        from .cost_model import calibration_text

        opts["calibration"] = calibration_text(calibration)  # a dict, JSON text or a profile's path
    return json.dumps(opts)


def memory_limit_option(value):
    """`memory_limit` as the planner reads it: "device" (the cost-model device's memory minus
    a 10% headroom: the default), a positive number of bytes per rank, or None (no limit)."""
    if value is None or value == "device":
        return "none" if value is None else "device"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"memory_limit: expected a positive number of bytes per rank, 'device' or None, "
                         f"got {value!r}")
    return int(value)


def explicit_memory_limit(value):
    """Bytes when the caller gave a number, else None (the default limit and no limit leave
    the runtime's reshard-after-forward choice at FSDP2's default)."""
    return None if value is None or value == "device" else int(value)


def _spec_str(spec) -> str:
    from .placements import as_spec  # a spec string or torch placement objects

    return as_spec(spec)


def _plan_json(ir_json: str, options_json: str, progress, host_seconds: float = 0.0) -> str:
    """One C++ planner call, with a progress bar on long solves (_progress.py).
    `host_seconds`: this call's Python time before and after it (it counts against the limit)."""
    time_limit = json.loads(options_json).get("time_limit", 10.0)
    with SolveProgress(time_limit, enabled=progress, description="torch_localmap plan") as bar:
        return _C.plan(ir_json, options_json, bar.update, host_seconds)


def _saved_plan_json(saved: Plan, ir_json: str, options_json: str) -> str:
    """The saved plan's document, once C++ has checked it was made for this graph, mesh
    and boundary options (core/plan_fingerprint.h); no solve."""
    doc = saved.to_json()
    diff = _C.plan_mismatch(ir_json, options_json, doc)
    if diff:
        raise PlanMismatchError(f"the saved plan was not made for this model call: {diff}. Expected a plan made "
                                "for this model, mesh shape and example inputs (plan again and save it)")
    return doc


def _transferred_plan_json(previous: Plan, ir_json: str, options_json: str, tolerance: float, progress):
    """The previous plan of this program carried to this call's sizes when a short search
    finds no plan cheaper by more than `tolerance` there (C++ transfer_plan); else a fresh
    solve. Returns (plan document, what happened)."""
    out = json.loads(_C.transfer_plan(ir_json, options_json, previous.to_json(), tolerance))
    how = {k: out[k] for k in ("reason", "previous_cost_s", "best_cost_s", "bound_s")}
    if out["plan"] is not None:
        return json.dumps(out["plan"]), dict(how, replanned=False)
    return _plan_json(ir_json, options_json, progress), dict(how, replanned=True)


def as_saved_plan(plan, what: str = "plan") -> Plan:
    """A Plan, or a plan file's path read with Plan.load."""
    import os  # noqa: PLC0415

    if isinstance(plan, Plan):
        if not plan.fingerprint:
            raise ValueError(f"{what}: this Plan has no fingerprint (format_version {Plan.FORMAT_VERSION} plans "
                             "record what they were made for); expected a plan made or saved by this torch_localmap")
        return plan
    if isinstance(plan, (str, os.PathLike)):
        return Plan.load(plan)
    raise TypeError(f"{what}: expected a torch_localmap Plan or a plan file's path, got {type(plan).__name__}")


# The exception types a planning rank's failure is re-raised as on every rank (by name: the
# broadcast carries the name and the message). Any other type arrives as RuntimeError.
_ERRORS = {"ValueError": ValueError, "RuntimeError": RuntimeError, "PlanMismatchError": PlanMismatchError,
           "InfeasibleError": InfeasibleError}


def _agreed_plan_json(ir_json: str, options_json: str, mesh, timeout, progress=None, saved=None,
                      previous=None, tolerance=0.05, host_seconds=0.0):
    """Plans (or checks `saved`, or carries `previous` to these sizes) on one rank and
    broadcasts, so every rank runs the same plan even when a time-limited solve could end
    differently on different processes. Returns (plan document, transfer outcome or None)."""
    import torch.distributed as dist

    from ._runtime.groups import world_group

    def make():
        if saved is not None:
            return _saved_plan_json(saved, ir_json, options_json), None
        if previous is not None:
            return _transferred_plan_json(previous, ir_json, options_json, tolerance, progress)
        return _plan_json(ir_json, options_json, progress, host_seconds), None

    if not hasattr(mesh, "get_group") or not dist.is_initialized() or mesh.size() == 1:
        return make()
    if mesh.size() != dist.get_world_size():
        raise ValueError(f"mesh has {mesh.size()} devices but the world size is {dist.get_world_size()}; "
                         "expected a mesh covering every rank")
    pg, src = world_group(timeout), 0  # the mesh covers every rank
    box = [None]
    if dist.get_rank() == src:
        try:
            box[0] = ("ok", make())
        except (ValueError, RuntimeError) as e:  # every rank must raise, not hang
            box[0] = (type(e).__name__, str(e))
    with fake_tensors.outside_fake_mode(), failure_scope():
        dist.broadcast_object_list(box, src=src, group=pg)
    kind, payload = box[0]
    if kind != "ok":
        raise _ERRORS.get(kind, RuntimeError)(payload)
    _check_every_rank_traced_the_planned_graph(payload[0], ir_json, options_json, pg, src)
    return payload


def _check_every_rank_traced_the_planned_graph(doc: str, ir_json: str, options_json: str, pg, src: int) -> None:
    """The plan is applied node by node to each rank's own trace, so every rank must have
    traced the graph `src` planned. A forward whose order follows Python's per-process hash
    seed (iterating a set of strings: transformers' Dory computes its rotary tables so) traces
    in another order on another process; that plan would then run different collectives on
    different ranks and stall or abort inside the collective library. Each rank compares its
    trace with the plan (core/plan_fingerprint.h), and all raise if any differs."""
    import torch.distributed as dist

    try:  # a rank that raised here alone would leave the others waiting in the gather
        mine = "" if dist.get_rank() == src else _C.plan_mismatch(ir_json, options_json, doc)
    except (ValueError, RuntimeError) as e:
        mine = f"its trace could not be checked against the plan ({type(e).__name__}: {e})"
    every = [None] * dist.get_world_size()
    with fake_tensors.outside_fake_mode(), failure_scope():
        dist.all_gather_object(every, mine, group=pg)
    differing = [(rank, diff) for rank, diff in enumerate(every) if diff]
    if differing:
        rank, diff = differing[0]
        raise PlanMismatchError(
            f"rank {rank} traced another graph than rank {src}, which planned it ({len(differing)} of "
            f"{len(every)} ranks differ): {diff}. Expected every rank to trace the same program; a forward whose "
            "order follows Python's per-process hash seed (e.g. iterating a set of strings) traces differently in "
            "each process: set PYTHONHASHSEED to the same value on every rank (e.g. PYTHONHASHSEED=0 torchrun ...)")


def _plain_container(node_type) -> bool:
    """Containers whose unflattening only stores their leaves: tuples, lists, dicts,
    namedtuples and transformers' ModelOutput dataclasses."""
    if node_type in (tuple, list, dict) or (issubclass(node_type, tuple) and hasattr(node_type, "_fields")):
        return True
    import collections  # noqa: PLC0415

    if issubclass(node_type, (collections.OrderedDict, collections.defaultdict)):
        return any(c.__name__ == "ModelOutput" for c in node_type.__mro__) or node_type in (
            collections.OrderedDict, collections.defaultdict)
    return False


def _outputs_in_computing_containers(joint: JointGraph, exported) -> list:
    """Output targets of leaves held by containers that compute while they are rebuilt
    (transformers' DynamicCache concatenates its key/value leaves onto empty plain tensors):
    those leave replicated, since a sharded DTensor meeting plain tensors there is not
    something the plan can express."""
    spec = joint.output_spec
    if spec is None:
        return []
    flags = []

    def walk(s, inside):
        if s.is_leaf():
            flags.append(inside)
            return
        computing = inside or (s.type is not None and not _plain_container(s.type))
        for child in s.children():
            walk(child, computing)

    walk(spec, False)
    targets = [t for r, t in exported.outputs() if r == "output"]
    if len(targets) != len(flags):  # outputs that are not tensors are not in the graph: no mapping
        return []
    return [t for t, inside in zip(targets, flags) if inside]


def plan_joint(joint: JointGraph, mesh, *, node_extra=None, timeout=None, progress=None, plan=None,
               previous=None, replan_tolerance=0.05, **options) -> Plan:
    """Plans a traced joint graph. With a process group, rank 0 plans and broadcasts over
    the runtime's world group (`timeout`: runtime/groups.py). `progress`: a bar on stderr for
    solves longer than 2 s (None: when stderr is a terminal; True / False: always / never).
    `plan` (a saved Plan or its path): applied instead of solving, after checking it was made
    for this graph, mesh shape and boundary options (PlanMismatchError names what differs).
    `previous` (the plan of this program at other sizes): its choice is kept at these sizes
    unless a short search finds a plan cheaper by more than `replan_tolerance` (then a full
    solve); `plan.transfer` says which and why."""
    import time  # noqa: PLC0415

    from ._runtime.groups import DEFAULT_TIMEOUT, as_timeout

    started = time.perf_counter()
    shape, names = mesh_shape_and_names(mesh)
    with gc_paused():  # the IR is bulk Python data (_gc_pause.py)
        exported = export_graph(joint.gm, shape, names, node_extra=node_extra)
        ir_json = exported.to_json()
    if isinstance(options.get("recompute"), str):  # torchtitan's AC modes as fixed policies
        from ._ac_policy import recompute_policy_nodes

        options["recompute_only"] = recompute_policy_nodes(exported, options.pop("recompute"))
    if options.get("outputs", "free") == "free" and "replicated_outputs" not in options:
        options["replicated_outputs"] = _outputs_in_computing_containers(joint, exported)
    timeout = DEFAULT_TIMEOUT if timeout is None else as_timeout(timeout)
    options_json = plan_options(**options)
    saved = None if plan is None else as_saved_plan(plan)
    t0 = time.perf_counter()
    # time_limit bounds the planning after tracing: this side's export so far, and reading the
    # plan back after, which takes about twice as long (parsing the document, building a node
    # record per node, the collector catching up on what both made: on a 70B graph 0.73 s
    # against the export's 0.38 s).
    doc, transfer = _agreed_plan_json(ir_json, options_json, mesh, timeout, progress, saved, previous,
                                      replan_tolerance, host_seconds=3 * (t0 - started))
    with gc_paused():  # so is the plan document
        doc = json.loads(doc)
        label_plan_document(doc["nodes"], exported)
        plan = Plan.from_document(doc, validate=False)
    plan.transfer, plan.module_calls = transfer, module_calls_of(joint)
    s = plan.summary
    verb = "applied the saved plan of" if saved is not None else \
        "carried the previous sizes' plan to" if transfer and not transfer["replanned"] else "planned"
    _log.info("%s %d nodes on mesh %s in %.2f s (tables %.2f s, solve %.2f s, %s, gap %.3f%%): estimated "
              "step %.4g s, peak %.2f GiB per rank", verb,
              len(plan.nodes), "x".join(map(str, shape)),
              time.perf_counter() - t0, s.build_seconds, s.solver.seconds, s.solver.status, 100 * s.solver.gap,
              s.estimated_step_s, s.memory.peak / 2**30)
    plan.graph, plan.joint, plan.options = exported, joint, options_json
    plan.mesh_dim_names = tuple(names) if names else None  # a saved plan's simulated mesh may have had none
    if plan.summary.solver.note:  # the plan is still valid, but was found without the MILP phases
        warnings.warn(f"torch_localmap: {plan.summary.solver.note}", stacklevel=3)
    s = plan.summary
    if s.memory_limit and s.memory.peak > s.memory_limit:
        from ._report import _in_unit, _memory_unit  # noqa: PLC0415  (one unit: the peak's)

        u = _memory_unit(s.memory.peak)
        warnings.warn(f"torch_localmap: the plan's estimated peak, {_in_unit(s.memory.peak, u)} per rank, is above "
                      f"the memory limit of {_in_unit(s.memory_limit, u)} ({s.memory_limit_source}): the solver "
                      "bounds values as they are made, and the buffers of redistributed inputs come on top. Expected "
                      "a lower memory_limit, a larger mesh or a smaller batch to leave room for them.", stacklevel=3)
    if plan.summary.fallback_ops:
        warnings.warn(f"torch_localmap: no sharding rule for {', '.join(plan.summary.fallback_ops)}; these ops run "
                      "replicated. Wrap them in torch_localmap.local_map to choose placements, or pass "
                      "fallback_replicate=False to make this an error.", stacklevel=3)
    return plan


def plan_module(module: torch.nn.Module, mesh, example_args=(), example_kwargs=None, *, root_hooks=True,
                mp_policy=None, **options) -> Plan:
    """Plans `module(*example_args, **example_kwargs)` on `mesh` (a DeviceMesh or a shape tuple
    for a simulated mesh). Tracing uses fake tensors (parameters too): no real compute, no
    process group, and a module on the meta device plans like a real one. `root_hooks=False`
    leaves the root module's forward hooks out of the plan (the caller runs them).
    `mp_policy` (torch.distributed.fsdp.MixedPrecisionPolicy): compute in its param_dtype,
    parameter gradients reduced in its reduce_dtype (_mixed_precision.py)."""
    from . import _mixed_precision as mp
    from ._local_map import node_extra, use_mesh  # local_map regions pin their placements

    if mp.check_policy(mp_policy) is not None:
        with use_mesh(mesh), mp.root_hooks_of(module, root_hooks):
            joint = trace_joint(mp.CastParameters(module, mp_policy), example_args, example_kwargs)
        mp.mark_gradient_upcasts(joint, mp_policy)
        return plan_joint(joint, mesh, node_extra=mp.node_extra_with_upcasts(node_extra), **options)
    with use_mesh(mesh):  # regions without device_mesh trace on the mesh being planned for
        joint = trace_joint(module, example_args, example_kwargs, root_hooks=root_hooks)
    return plan_joint(joint, mesh, node_extra=node_extra, **options)
