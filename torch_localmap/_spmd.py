"""Applying a plan: one SPMD program per rank, traced into an aten graph with collectives.

The rank program walks the planned joint graph once, under make_fx: each op runs on
local shards with its rank's local arguments (computed in C++), after its inputs are
redistributed to the planned placements with _c10d_functional collectives. The traced
result is an ordinary joint graph (local ops + collectives), which aot_autograd's
partitioner splits into forward and backward graphs.
"""
from __future__ import annotations

import json
import math

import torch
import torch.fx as fx

from . import _C
from ._torch_private import autocast, fake_tensors, graph_module, node_meta, op_types, partition, tracing
from ._torch_private.autograd import release_saved_tensors
from ._ir_export import decode_arg
from ._integrations import tracing_context
from ._local_map.recompute_sharing import region_pairs, share_region_recompute
from .plan import Plan
from ._runtime.failures import failure_scope
from ._runtime.random_ops import is_random, run_sharded
from ._runtime.compile import ExecutionOptions, CompiledOnFirstCall
from ._runtime.late_loss_scale import scale_loss_gradients_late, scales_late
from ._runtime.deferred_loss import (count_targets_early, pending_outputs, settle_before_first_collective,
                                     split_output_tails)
from ._runtime.drop_aliases import drop_unchanged_aliases
from ._runtime.direct_calls import call_directly
from ._runtime.reduce_in_place import reduce_in_place
from ._runtime.redistribute import redistribute_local
from ._runtime.recompile import recompile_once
from ._runtime.recompute import mark_planned_recompute
from ._runtime.reshard import kept_gather_bytes, mark_reshard_after_forward
from ._runtime.bucketing import bucket_collectives
from ._runtime.fuse_gathers import fuse_mesh_dim_gathers
from ._runtime.fuse_reductions import fuse_mesh_dim_reductions, fuse_mesh_dim_scatters
from ._runtime.host_memory import keep_freed_host_memory
from ._runtime.reduce_before_transposes import reduce_before_transposes
from ._runtime.transposed_products import contiguous_transposed_products
from ._runtime.unused_gradients import drop_gradients_of_absent_tangents, tangent_dependencies
from ._runtime.schedule import schedule_overlap

# A value this small (a loss and its count) is redistributed once per spec and shared by its
# consumers (make_rank_program's `moved`).
SMALL_MOVE_NUMEL = 64


def _tensor_refs(arg, out):
    if isinstance(arg, dict):
        if "t" in arg:
            out.append(tuple(arg["t"]))
            return
        for v in arg.values():
            _tensor_refs(v, out)
    elif isinstance(arg, list):
        for v in arg:
            _tensor_refs(v, out)


def local_shape(global_shape, mesh_shape, spec, coord) -> list:
    shape, _offset = _C.local_layout(list(global_shape), list(mesh_shape), spec, list(coord))
    return list(shape)


def make_rank_program(plan: Plan, device_mesh, coord):
    """A Python function computing the planned joint graph on this rank's local tensors."""
    graph = plan.graph
    ir_nodes, pnodes, fx_nodes = graph.nodes, plan.nodes, graph.fx_nodes
    graph_json, plan_json = graph.to_json(), plan.to_json()
    call_args = json.loads(_C.rank_call_args(graph_json, plan_json, list(coord)))
    placeholders = [i for i, _ in graph.placeholders()]

    # Moves made once and handed to every consumer that wants the same spec: small values
    # (a loss's Partial count is reduced for the loss in forward and read again by the loss's
    # backward, a second collective on the critical path for a few bytes), and values whose
    # readers all take them in one spec by a move that gathers nothing (C++ decides,
    # core/shared_moves.h: the same on every rank). Other values are moved per consumer, as
    # the plan prices them: keeping a gathered activation or parameter for a later reader
    # would hold memory the plan does not count.
    shared = {(node, output, spec) for node, output, spec in _C.shared_moves(graph_json, plan_json)}
    kept_moves = {}

    def moved(env, ref, want):
        """The value at `ref` ([node, output]) redistributed from its planned spec to `want`."""
        src = pnodes[ref[0]].outputs[ref[1]]
        if src == want:  # nothing moves: the value itself (a copy would cost a kernel per input)
            return env[ref[0]][ref[1]]
        shape = ir_nodes[ref[0]].outputs[ref[1]].shape
        key = (ref[0], ref[1], want)
        if key in kept_moves:
            return kept_moves[key]
        try:
            out = redistribute_local(env[ref[0]][ref[1]], shape, device_mesh, src, want)
        except ValueError as e:
            raise ValueError(f"output {ref[1]} of node '{ir_nodes[ref[0]].name}' ({ir_nodes[ref[0]].op}): {e}") from e
        if math.prod(shape) <= SMALL_MOVE_NUMEL or key in shared:
            kept_moves[key] = out
        return out

    def run_node(i, node, want, env):
        refs = []
        _tensor_refs(node.args, refs)
        _tensor_refs(node.kwargs, refs)
        inputs = [moved(env, r, want[k]) for k, r in enumerate(refs)]
        # Ops that address storage see their inputs laid out as when traced: a piece that a
        # redistribution narrowed out of a larger buffer is made contiguous (_ir_export.py).
        for k, contiguous in enumerate((node.extra or {}).get("contiguous_inputs", ())):
            if contiguous:
                inputs[k] = inputs[k].contiguous()
        local_inputs = iter(inputs)
        call = call_args[i]
        args = decode_arg(call["args"], lambda _ref: next(local_inputs))
        kwargs = {k: decode_arg(v, lambda _ref: next(local_inputs)) for k, v in call["kwargs"].items()}
        if is_random(node.op):  # draws the global tensor's numbers, keeps this rank's piece
            result = run_sharded(node.op, fx_nodes[i].target, args, kwargs, [m.shape for m in node.outputs],
                                 pnodes[i].outputs, plan.mesh_shape, coord)
        else:
            result = _run_node(fx_nodes[i], args, kwargs)
        return [result] if isinstance(result, torch.Tensor) else [result[p] for p in node.output_positions]

    def program(*inputs):
        env = {}
        for k, i in enumerate(placeholders):
            env[i] = [inputs[k]]
        for i, node in enumerate(ir_nodes):
            if node.op == "placeholder":
                continue
            want = pnodes[i].inputs
            if node.op == "output":
                # Untagged, after the last forward node: the partitioner computes a forward
                # output's redistribution in the forward graph (its output needs it) and a
                # gradient's in the backward. Tagged forward, they would make every backward
                # node a forward one.
                return [moved(env, tuple(a["t"]), want[j]) if isinstance(a, dict) and "t" in a else None
                        for j, a in enumerate(node.args[0])]
            # The node's local ops and its inputs' collectives carry the joint graph node's meta:
            # its forward/backward tag tells the partitioner what forward computes and saves
            # (untagged, the backward would recompute the forward -- random ops included);
            # the plan node's index lets profiles compare each op with its estimate.
            node_meta.tag_plan_node(fx_nodes[i], i)
            with node_meta.as_current_node(fx_nodes[i]):
                env[i] = run_node(i, node, want, env)
        raise AssertionError("graph has no output node")

    return program


def _run_node(fx_node: fx.Node, args, kwargs):
    from ._local_map import run_region_node

    ran, out = run_region_node(fx_node, args, kwargs)
    if ran:
        return out
    if isinstance(fx_node.target, op_types.HigherOrderOperator):
        # Another HOP (flex_attention): its subgraph arguments (score_mod, the block mask's
        # mask_mod) come back from the IR as attribute names, its tuples as lists.
        root = fx_node.graph.owning_module
        args = _with_subgraphs(tuple(fx_node.args), args, root)
        kwargs = {k: _with_subgraphs(fx_node.kwargs[k], v, root) for k, v in kwargs.items()}
    if fx_node.target is torch.ops.aten.view.default:
        # The traced graph recorded a view where the global tensor's strides allowed one; a
        # local shard can come out of a different kernel path (sharded heads, another SDPA
        # backend) with strides that do not. reshape is the view when one exists and a copy
        # otherwise -- the same values, and the joint graph is functional, so no aliasing is lost.
        return torch.ops.aten.reshape.default(*args, **kwargs)
    return fx_node.target(*args, **kwargs)


def _with_subgraphs(traced, local, root):
    """`local` (a decoded argument) with the traced graph's subgraphs in place of their
    names and its tuples as tuples, following the traced argument's structure."""
    if isinstance(traced, fx.Node) and traced.op == "get_attr" and isinstance(
            getattr(root, str(traced.target), None), fx.GraphModule):
        return getattr(root, str(traced.target))
    if isinstance(traced, (tuple, list)) and isinstance(local, (tuple, list)) and len(traced) == len(local):
        items = [_with_subgraphs(t, v, root) for t, v in zip(traced, local)]
        return tuple(items) if isinstance(traced, tuple) else items
    if isinstance(traced, dict) and isinstance(local, dict):
        return {k: _with_subgraphs(traced.get(k), v, root) for k, v in local.items()}
    return local


def local_example_inputs(plan: Plan, fake_mode, coord, device=None) -> list:
    """Fake tensors with each placeholder's local shape on this rank, on `device` (the mesh's:
    the traced program's constants and factory calls live there too; default CPU)."""
    out = []
    with fake_mode:
        for (_, node), spec in zip(plan.graph.placeholders(), plan.placeholder_specs()):
            meta = node.outputs[0]
            shape = local_shape(meta.shape, plan.mesh_shape, spec, coord)
            out.append(torch.empty(shape, dtype=getattr(torch, meta.dtype), device=device))
    return out


def trace_rank_program(plan: Plan, device_mesh, coord, fake_inputs) -> fx.GraphModule:
    """The rank's SPMD joint graph, placeholders named primals_* / tangents_* like aot_autograd's."""
    program = make_rank_program(plan, device_mesh, coord)
    # Under the inputs' fake mode, ops without tensor inputs (arange, full) make fake tensors too.
    # Redistributions are traced through their kernel: each collective and its wait become
    # their own _c10d_functional nodes, which the overlap schedule and Inductor move apart.
    decompose = {torch.ops.localmap.redistribute.default: _C.redistribute_steps}
    with tracing_context(), fake_tensors.fake_mode_of(fake_inputs), node_meta.node_meta_preserved():
        gm = tracing.make_fx(program, decomposition_table=decompose, tracing_mode="real",
                                    _allow_non_fake_inputs=False)(*fake_inputs)
    # A region's backward reads its forward's values (random draws included) instead of
    # recomputing them.
    share_region_recompute(gm, region_pairs(plan.graph.fx_nodes))
    roles = [n.role for _, n in plan.graph.placeholders()]
    n_primal = n_tangent = 0
    for node, role in zip([n for n in gm.graph.nodes if n.op == "placeholder"], roles):
        if role == "tangent":
            n_tangent += 1
            node.target = node.name = f"tangents_{n_tangent}"
        else:
            n_primal += 1
            node.target = node.name = f"primals_{n_primal}"
    gm.graph.lint()
    gm.recompile()
    return gm


class _SPMDStep(torch.autograd.Function):
    """Runs the rank's forward graph; its backward runs the rank's backward graph."""

    @staticmethod
    def forward(ctx, program, *inputs):
        # Outputs made after a collective's wait are filled in when first read (deferred_loss.py).
        outs, pending = pending_outputs(program.fw(*inputs), program.tails, lazy=True)
        program.pending += pending
        n = program.num_fwd_outputs
        saved = outs[n:]
        ctx.program = program
        ctx.set_materialize_grads(False)  # an output nobody differentiated comes back None, not zeros
        ctx.save_for_backward(*[s for s in saved if isinstance(s, torch.Tensor)])
        ctx.nonlocal_saved = [None if isinstance(s, torch.Tensor) else s for s in saved]
        fwd = tuple(outs[:n])
        ctx.fwd_metas = [(o.shape, o.dtype, o.device) for o in fwd]
        return fwd

    @staticmethod
    def backward(ctx, *grad_outputs):
        tensors = iter(ctx.saved_tensors)
        args = [next(tensors) if s is None else s for s in ctx.nonlocal_saved]
        # The saved activations are then referenced from `args` alone (unless retain_graph
        # keeps autograd's), which the backward graph empties: each is freed after its last
        # use there, as in eager autograd, not when the whole backward returns.
        del tensors
        release_saved_tensors(ctx)
        absent = 0  # tangents autograd did not give (bit k: tangent k)
        for k, j in enumerate(ctx.program.tangent_outputs):  # outputs nobody differentiated get zero gradients
            g = grad_outputs[j]
            if g is None:
                absent |= 1 << k
                shape, dtype, device = ctx.fwd_metas[j]
                g = torch.zeros(shape, dtype=dtype, device=device)
            args.append(g.contiguous())
        with failure_scope():
            grads = ctx.program.run_backward(args)
        # ... and the inputs only those outputs depend on get none, as in eager (unused_gradients.py).
        grads = drop_gradients_of_absent_tangents(grads, ctx.program.gradient_tangents, absent)
        # One gradient per program input, from the backward's per-primal outputs.
        return (None, *[None if k is None else grads[k] for k in ctx.program.grad_slots])


def _gradient_positions(param_placeholders, grad_slots) -> dict:
    """The backward's output position of each parameter's gradient -> its FQN: parameter
    input primals_k (the k-th program input) has its gradient at grad_slots[k - 1]."""
    out = {}
    for name, fqn in dict(param_placeholders).items():
        k = name.rsplit("_", 1)[-1]
        if name.startswith("primals_") and k.isdigit() and 0 < int(k) <= len(grad_slots) \
                and grad_slots[int(k) - 1] is not None:
            out[grad_slots[int(k) - 1]] = fqn
    return out


class RankProgram:
    """Forward and backward graphs of one rank's SPMD program.

    `num_fwd_outputs`: the forward's outputs (buffer writes, then the module's outputs);
    `tangent_outputs`: for each gradient the backward takes, the forward output it belongs
    to; `grad_slots`: for each program input (tangents excluded), the backward output that
    is its gradient, or None. A forward-only program (backward=False) is run as is.

    `defer_output_waits`: forward outputs made of a few scalars after a collective (the loss
    over the global batch) are waited for when first read, and the loss's token count is
    reduced as the step starts (deferred_loss.py); for gloo meshes, where a rank's host waits.

    `options` (ExecutionOptions): reshard after forward (`param_placeholders`: the joint
    graph's parameter inputs, name -> FQN, which also groups their gathers into buckets;
    `memory_room`: bytes the memory limit leaves above the plan's estimate, None without a
    limit), overlap scheduling, Inductor compilation. `recompute_nodes`: the plan nodes
    backward recomputes instead of forward saving them (Plan.recomputed_nodes)."""

    def __init__(self, joint_spmd: fx.GraphModule, num_fwd_outputs: int, backward: bool = True,
                 tangent_outputs=None, grad_slots=None, param_placeholders=(), options=None, memory_room=None,
                 recompute_nodes=(), defer_output_waits=False):
        self.joint = joint_spmd
        self.num_fwd_outputs = num_fwd_outputs
        self.backward = backward
        self.options = options or ExecutionOptions()
        if self.options.keep_host_memory:
            keep_freed_host_memory()
        self.tangent_outputs = list(tangent_outputs if tangent_outputs is not None else range(num_fwd_outputs))
        n_inputs = sum(1 for n in joint_spmd.graph.nodes if n.op == "placeholder") - len(self.tangent_outputs)
        self.grad_slots = list(grad_slots) if grad_slots is not None else list(range(n_inputs))
        self.resharded = False
        self.recomputed_ops = 0
        # Every pass below regenerates the code of the graphs it edits; once is enough.
        with recompile_once():
            if backward:
                params = set(param_placeholders)
                reshard = self.options.reshard_after_forward
                if reshard is None:  # keep gathered parameters only where the memory limit has room for them
                    reshard = memory_room is None or kept_gather_bytes(joint_spmd, params) > memory_room
                self.resharded = bool(reshard) and mark_reshard_after_forward(joint_spmd, params) > 0
                self.recomputed_ops = mark_planned_recompute(joint_spmd, recompute_nodes, params)
                self.fw, self.bw = partition.partition_joint(joint_spmd, num_fwd_outputs)
            else:
                self.fw, self.bw = joint_spmd, None
            self.buckets = 0
            self.reduced_in_place = 0  # all-reduces of a value nothing else reads (buckets too), in its own buffer
            self.tails, self.pending = [], []
            defer = defer_output_waits and backward and not self.options.compile
            # The loss's gradients divided by the global token count late in backward
            # (late_loss_scale.py) wherever they can be; else the count reduced early.
            late = defer and scales_late(self.fw, self.bw)
            self.scaled_late = False
            if defer and not late:
                count_targets_early(self.fw)
            if self.bw is not None:  # gradients bucketed and accumulated without copies
                contiguous_transposed_products(self.bw)
            for gm in (self.fw, self.bw):  # before bucketing: the merged collectives bucket together
                if gm is not None:
                    fuse_mesh_dim_reductions(gm)
                    reduce_before_transposes(gm)
                    fuse_mesh_dim_scatters(gm)
                    fuse_mesh_dim_gathers(gm)
            if self.options.bucket_bytes:
                grad_params = _gradient_positions(param_placeholders, self.grad_slots)
                for gm in (self.fw, self.bw):
                    if gm is not None:
                        self.buckets += bucket_collectives(gm, self.options.bucket_bytes, param_placeholders,
                                                           grad_params=grad_params if gm is self.bw else None)
            if self.options.overlap:
                for gm in (self.fw, self.bw):
                    if gm is not None:
                        schedule_overlap(gm, self.options.inflight_bytes, self.options.inflight_collectives)
            if late:
                self.scaled_late = scale_loss_gradients_late(self.fw, self.bw, num_fwd_outputs)
            if defer:
                self.tails = split_output_tails(self.fw, num_fwd_outputs)
                if self.tails and self.bw is not None:
                    settle_before_first_collective(self.bw, self.settle)
            self.gradient_tangents = [] if self.bw is None else tangent_dependencies(self.bw,
                                                                                     len(self.tangent_outputs))
            if self.options.compile:
                self.fw = CompiledOnFirstCall(self.fw)
                self.bw = CompiledOnFirstCall(self.bw) if self.bw is not None else None
            else:  # last: every pass above matches OpOverload targets
                for gm in (self.fw, self.bw):
                    if gm is not None:
                        drop_unchanged_aliases(gm, outputs_are_gradients=gm is self.bw)
                        self.reduced_in_place += reduce_in_place(gm)
                        call_directly(gm)
                if self.bw is not None:
                    graph_module.call_boxed(self.bw)

    def run_backward(self, args: list):
        """The backward graph on `args` (saved values, then tangents), which it empties. Like
        forward, with autocast off: the casts are the graph's own (_torch_private/autocast.py)."""
        with autocast.autocast_off():
            if self.options.compile:
                return self.bw.call_boxed(args)
            return self.bw(args)  # boxed (call_boxed): frees each saved value after its last use

    def settle(self) -> None:
        """Waits for the outputs an earlier step left pending (deferred_loss.py)."""
        pending, self.pending = self.pending, []
        for tail in pending:
            tail.value()

    def __call__(self, *inputs):
        # Autocast off: a call made under autocast was traced with its casts in the graph
        # (_torch_private/autocast.py).
        with failure_scope(), autocast.autocast_off():
            self.settle()
            if self.backward and torch.is_grad_enabled() and any(
                    isinstance(x, torch.Tensor) and x.requires_grad for x in inputs):
                return _SPMDStep.apply(self, *inputs)
            outs, _ = pending_outputs(self.fw(*inputs), self.tails, lazy=False)
            return tuple(outs[: self.num_fwd_outputs])
