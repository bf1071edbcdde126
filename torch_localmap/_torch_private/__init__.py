"""Every private torch API we use, wrapped in one place (this package).

Written against torch 2.13. If an upgrade breaks one of these, this package is the
only place to change: this file for the planner and runtime, dtensor_reference.py
for DTensor's own sharding propagator (tests and benchmarks compare with it).
"""
from __future__ import annotations

import contextlib
import functools

import torch
import torch.fx as fx

# Types and modules used by name elsewhere (torch 2.13): the local_map HOP subclasses
# HigherOrderOperator and registers py_impl kernels for these dispatch keys and modes;
# graph code checks node targets against the op types; pytree flattens user arguments.
from torch._C import DispatchKey  # noqa: E402,F401
from torch._ops import HigherOrderOperator, OpOverload  # noqa: E402,F401
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402,F401
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, make_fx  # noqa: E402,F401
from torch.utils import _pytree as pytree  # noqa: E402,F401


def implicit_replication():
    """torch.distributed.tensor.experimental.implicit_replication (2.13, experimental):
    plain tensors mixed into DTensor ops count as replicated."""
    from torch.distributed.tensor.experimental import implicit_replication as ctx

    return ctx()


def async_collective_tensor_type() -> type:
    """torch.distributed._functional_collectives.AsyncCollectiveTensor (2.13): what a
    DTensor's to_local() may return before its collective finished."""
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    return AsyncCollectiveTensor


def aot_autograd_backend(**kwargs):
    """torch._dynamo.backends.common.aot_autograd (2.13): a Dynamo backend from forward/
    backward compilers and a partition function."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(**kwargs)


def export_joint(stack: contextlib.ExitStack, module: torch.nn.Module, args: tuple, kwargs: dict):
    """Joint forward+backward aten graph of `module(*args, **kwargs)` with descriptors.

    torch._functorch.aot_autograd.aot_export_joint_with_descriptors (2.13). The graph's
    placeholders carry meta["desc"] (ParamAOTInput / BufferAOTInput / PlainAOTInput(idx:
    position in the flat leaves of (args, kwargs)) / TangentAOTInput(output)); the output
    node's meta["desc"] lists InputMutationAOTOutput (buffers written in forward, first),
    PlainAOTOutput(idx), GradAOTOutput. Under torch.no_grad() the graph is forward-only.
    The result's `out_spec` is the pytree spec of the module's output.
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    from torch.fx import traceback as fx_traceback

    # Node annotations (node_annotation) are kept only while node meta is preserved; the
    # autograd path turns that on itself, the forward-only (no_grad) path does not.
    stack.enter_context(fx_traceback.preserve_node_meta())
    return aot_export_joint_with_descriptors(stack, module, args, kwargs, decompositions=_planning_decompositions())


def _nll_loss_mean_as_sum(forward):
    def decompose(self, target, weight, reduction, ignore_index):
        if reduction != 1:  # only the mean is rewritten
            return NotImplemented
        total, total_weight = forward(self, target, weight, 2, ignore_index)
        return total / total_weight, total_weight

    return decompose


def _planning_decompositions() -> dict:
    """Rewrites applied while tracing for planning.

    nll_loss with reduction='mean' divides by a total weight that depends on the targets,
    so no rule can shard its batch: planned as is, it makes the log-probabilities whole on
    every rank (for Llama-3-8B at batch 16 x seq 8192, a 62.6 GiB fp32 tensor). As the sum
    over the batch divided by the total weight (what the mean kernel computes), both sums
    shard over the batch (Partial scalars) and only the two scalars are reduced."""
    aten = torch.ops.aten
    from torch._decomp import get_decompositions

    # mse_loss and its backward divide by the element count inside one kernel, so a shard
    # would divide by its own count; as torch's decompositions (sub, pow, mean; the
    # backward's division by the global count) every piece has a rule that shards.
    table = get_decompositions([aten.mse_loss.default, aten.mse_loss_backward.default])
    table.update({aten.nll_loss_forward.default: _nll_loss_mean_as_sum(aten.nll_loss_forward.default),
                  aten.nll_loss2d_forward.default: _nll_loss_mean_as_sum(aten.nll_loss2d_forward.default)})
    return table


def opinfo_database() -> list:
    """torch.testing._internal.common_methods_invocations.op_db (2.13): torch's own OpInfos,
    each with a callable and sample inputs. The strategy verifier draws op instances from
    them for rules the reference models do not reach. Needs the `expecttest` package."""
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def reparametrized(module: torch.nn.Module, tensors: dict):
    """Context in which `module`'s parameters and buffers (by FQN, tied weights included) are
    `tensors` (torch.nn.utils.stateless._reparametrize_module, 2.13; what torch.func.
    functional_call uses)."""
    from torch.nn.utils.stateless import _reparametrize_module

    return _reparametrize_module(module, tensors, tie_weights=True)


@contextlib.contextmanager
def exporting():
    """The flags torch.export sets while it traces (torch._export.utils._compiling_state_context,
    2.13): torch.compiler.is_compiling() and is_exporting() are True, so libraries take their
    trace-friendly paths (transformers skips data-dependent mask shortcuts)."""
    from torch._export.utils import _compiling_state_context

    with _compiling_state_context():
        yield


_grouped_mm_depth = [0, None]


@contextlib.contextmanager
def grouped_mm_shapes_for_every_dtype():
    """aten._grouped_mm's meta kernel (torch._meta_registrations.meta_grouped_mm, 2.13)
    insists on bfloat16 -- a constraint of its CUDA kernel -- while the CPU kernel computes
    float32 too (transformers' MoE experts call it so). Fake tensors run the meta kernel,
    so tracing such a model fails. While this context is active the Meta kernel computes
    the same shapes for any floating dtype; torch's own registration is back afterwards
    (torch.library.Library registrations end when the library is destroyed)."""
    import warnings

    try:
        from torch._meta_registrations import meta_grouped_mm
    except ImportError:  # a torch without this meta kernel (2.11) has nothing to widen
        yield
        return

    if _grouped_mm_depth[0] == 0:
        def meta(a, b, offs=None, bias=None, out_dtype=None):
            if a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16:
                return meta_grouped_mm(a, b, offs=offs, bias=bias, out_dtype=out_dtype)
            bf16 = torch.bfloat16
            out = meta_grouped_mm(a.to(bf16), b.to(bf16), offs=offs, bias=None if bias is None else bias.to(bf16),
                                  out_dtype=bf16)
            return out.to(out_dtype or a.dtype)

        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": on purpose, undone below
            # allow_override: torch 2.11 defaults to False and remembers destroyed libraries' kernels
            lib.impl("_grouped_mm", meta, "Meta", allow_override=True)
        _grouped_mm_depth[1] = lib
    _grouped_mm_depth[0] += 1
    try:
        yield
    finally:
        _grouped_mm_depth[0] -= 1
        if _grouped_mm_depth[0] == 0:
            _grouped_mm_depth[1]._destroy()
            _grouped_mm_depth[1] = None


def describe_input(desc) -> tuple[str, str]:
    """(role, target) of a joint-graph placeholder descriptor (torch._functorch._aot_autograd.
    descriptors, 2.13): ("param" | "buffer", FQN), ("input", flat index), ("tangent",
    index of the output it is the gradient of); ("unknown", repr) for anything else."""
    from torch._functorch._aot_autograd import descriptors as d

    if isinstance(desc, d.ParamAOTInput):
        return "param", desc.target
    if isinstance(desc, d.BufferAOTInput):
        return "buffer", desc.target
    if isinstance(desc, d.TangentAOTInput):
        out = desc.output
        return "tangent", str(out.idx) if isinstance(out, d.PlainAOTOutput) else repr(out)
    if isinstance(desc, d.PlainAOTInput):
        return "input", str(desc.idx)
    return "unknown", repr(desc)


def recording_ops(record):
    """Context: each aten op call is passed to record(func, args, kwargs) before it runs
    (a TorchDispatchMode, torch.utils._python_dispatch, 2.13)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            record(func, args, kwargs)
            return func(*args, **kwargs)

    return _Recorder()


def lazy_graph_module(root: torch.nn.Module, graph: fx.Graph) -> fx.GraphModule:
    """A GraphModule of `graph` whose Python code is generated at its first call, not now
    (torch.fx._lazy_graph_module, 2.13): planning reads the graph and never calls it, and
    code for a 7,000-node graph takes a third of a second."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    return _LazyGraphModule(root, graph)


def state_input_desc(kind: str, fqn: str):
    """The placeholder descriptor of parameter (kind "param") or buffer ("buffer") `fqn`."""
    from torch._functorch._aot_autograd import descriptors as d

    return d.ParamAOTInput(fqn) if kind == "param" else d.BufferAOTInput(fqn)


def param_grad_desc(fqn: str):
    """The output descriptor of parameter `fqn`'s gradient."""
    from torch._functorch._aot_autograd import descriptors as d

    return d.GradAOTOutput(d.ParamAOTInput(fqn))


def describe_output(desc) -> tuple[str, str]:
    """(role, target) of a joint-graph output descriptor: ("output", index), ("grad", param
    FQN), ("input_grad", flat input index), ("mutation", buffer FQN), ("input_mutation", flat
    input index), ("none", ""); ("unknown", repr) for anything else."""
    from torch._functorch._aot_autograd import descriptors as d

    if desc is None:
        return "none", ""
    if isinstance(desc, d.GradAOTOutput):
        role, name = describe_input(desc.grad_of)
        return ("grad", name) if role == "param" else ("input_grad", name)
    if isinstance(desc, d.PlainAOTOutput):
        return "output", str(desc.idx)
    if isinstance(desc, d.InputMutationAOTOutput):
        role, name = describe_input(desc.mutated_input)
        return ("mutation", name) if role == "buffer" else ("input_mutation", f"{role} {name}")
    return "unknown", repr(desc)


def partition_joint(joint: fx.GraphModule, num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Split a joint graph into forward and backward graphs the way aot_autograd does.

    torch._functorch.partitioners.default_partition (2.13): placeholders named
    "primals_*" / "tangents_*"; the forward graph returns its outputs followed by the
    values saved for backward; the backward takes the saved values then the tangents.
    """
    from torch._functorch.partitioners import default_partition

    fw, bw = default_partition(joint, None, num_fwd_outputs=num_fwd_outputs)
    # The partitioner copies into the backward every forward node it can compute there (a
    # chain from saved values, collectives and random ops on fresh tensors included), read
    # or not, and keeps collectives as side effects. Dead code goes: functional collectives
    # are values (every rank drops the same ones: the graphs come from one plan). Forward
    # keeps its dead random draws (the RNG advances as in eager); backward must not draw.
    fw.graph.eliminate_dead_code(is_impure_node=lambda n: _is_side_effect(n, keep_random=True))
    bw.graph.eliminate_dead_code(is_impure_node=lambda n: _is_side_effect(n, keep_random=False))
    redrawn = [n for n in bw.graph.nodes if _is_random(n) and not _replays_saved_rng(n)]
    if redrawn:
        raise RuntimeError(f"internal error: the backward graph would draw random numbers again "
                           f"({', '.join(str(n.target) for n in redrawn)}); its masks would differ from forward's")
    for gm in (fw, bw):
        gm.recompile()
    return fw, bw


def is_forward_node(node: fx.Node) -> bool:
    """Whether a traced joint-graph node belongs to forward (the partitioner's tag,
    torch._functorch.partitioners._has_tag_is_forward, 2.13)."""
    from torch._functorch.partitioners import _has_tag_is_forward

    return _has_tag_is_forward(node)


def is_random_node(node: fx.Node) -> bool:
    return _is_random(node)


def mark_must_recompute(node: fx.Node) -> None:
    """Asks the partitioner to recompute `node` in backward rather than save it
    (node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE, honoured by
    default_partition in 2.13)."""
    from torch.utils.checkpoint import CheckpointPolicy

    node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE


def tag_plan_node(node: fx.Node, index: int) -> None:
    """Records the plan node's index in node.meta["custom"], one of the fields traced
    nodes copy from the current node (torch.fx.proxy._COPY_META_FIELDS, 2.13)."""
    node.meta["custom"] = {**(node.meta.get("custom") or {}), "tlm_plan_node": index}


def plan_node_of(node: fx.Node):
    """The plan node index tag_plan_node recorded on the node a traced node came from."""
    return (node.meta.get("custom") or {}).get("tlm_plan_node")


def _is_side_effect(node: fx.Node, keep_random: bool) -> bool:
    if getattr(node.target, "namespace", None) == "_c10d_functional":
        return False
    return node.is_impure(impure_random=keep_random)


def _is_random(node: fx.Node) -> bool:
    return isinstance(node.target, OpOverload) and torch.Tag.nondeterministic_seeded in node.target.tags


def _replays_saved_rng(node: fx.Node) -> bool:
    """A seeded op handed the generator state its forward drew (CUDA attention backwards:
    philox_seed and philox_offset) replays those numbers; it draws none of its own."""
    names = {a.name for a in node.target._schema.arguments}
    return {"philox_seed", "philox_offset"} <= names


@contextlib.contextmanager
def node_meta_preserved():
    """While active, nodes traced by make_fx copy the "current" node's meta fields that
    torch.fx.proxy._COPY_META_FIELDS lists (2.13: partitioner_tag, nn_module_stack,
    recompute, ...) -- torch.fx.traceback.preserve_node_meta."""
    from torch.fx import traceback as fx_traceback

    with fx_traceback.preserve_node_meta():
        yield


def as_current_node(node: fx.Node):
    """Context in which traced nodes inherit `node`'s meta (torch.fx.traceback.set_current_meta,
    2.13; effective inside node_meta_preserved)."""
    from torch.fx import traceback as fx_traceback

    return fx_traceback.set_current_meta(node)


def dynamo_input_sources(gm: fx.GraphModule) -> list:
    """Per placeholder of a Dynamo graph, the name of the Python value it was read from
    (node.meta["grapharg"].source, 2.13: "L['self']._modules['fc']._parameters['weight']",
    "L['x']"), or None."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            arg = n.meta.get("grapharg")
            source = getattr(arg, "source", None)
            out.append(source.name if source is not None else None)
    return out


def dynamo_scalar_inputs(gm: fx.GraphModule) -> list:
    """Per placeholder of a Dynamo graph, whether it is a Python number Dynamo passes as a
    0-d tensor (node.meta["grapharg"].pass_arg_as_tensor, 2.13: unspecialized floats such
    as BatchNorm's momentum under dynamic=True, read back with .item())."""
    return [bool(getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False))
            for n in gm.graph.nodes if n.op == "placeholder"]


def graph_output_examples(gm: fx.GraphModule) -> list:
    """The example value Dynamo recorded for each output of its graph (node.meta
    ["example_value"], 2.13), None where absent; flattened like the graph's output."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    nodes = pytree.tree_leaves(out.args[0], is_leaf=lambda x: isinstance(x, fx.Node))
    return [n.meta.get("example_value") if isinstance(n, fx.Node) else None for n in nodes]


def graph_code_keys() -> set:
    """torch.fx.graph_module._loader (2.11-2.15): every GraphModule's generated source is kept
    in this cache, for tracebacks, and never dropped. The keys now there."""
    from torch.fx import graph_module

    return set(graph_module._loader.eval_cache)


def forget_graph_code(keys) -> None:
    """Drops the kept source of these GraphModules (graph_code_keys) and its linecache
    entry: programs that are gone no longer hold memory (their tracebacks lose source lines)."""
    import linecache

    from torch.fx import graph_module

    for key in keys:
        graph_module._loader.eval_cache.pop(key, None)
        linecache.cache.pop(key, None)


def mesh_from_groups(mesh, groups):
    """A DeviceMesh with `mesh`'s ranks, layout, device type and dim names whose dim i
    communicates over `groups[i]` (this rank's group along that dim).

    What torch.distributed.device_mesh.DeviceMesh.from_group does (2.13), without its
    requirement that an N-D mesh have dim names: DeviceMesh(..., _init_backend=False),
    then `_dim_group_names` and `_pg_registry`. Equal (==) to `mesh`, so DTensors on
    either mesh mix."""
    from torch.distributed.device_mesh import DeviceMesh

    out = DeviceMesh(mesh.device_type, mesh.mesh, mesh_dim_names=mesh.mesh_dim_names, _init_backend=False)
    out._dim_group_names = [g.group_name for g in groups]
    for g in groups:
        out._pg_registry[g.group_name] = g
    return out


def default_store():
    """The key-value store of the default process group (torch.distributed.distributed_c10d.
    _get_default_store, 2.13): ranks leave failure records there (runtime/failures.py)."""
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store()


def strided_shard_type() -> type:
    """torch.distributed.tensor.placement_types._StridedShard (2.13).

    DTensor's placement for non-default shard orders; our spec strings cannot express it, so
    placements.py must recognize it to refuse it clearly (it is not a Shard subclass).
    """
    from torch.distributed.tensor.placement_types import _StridedShard

    return _StridedShard


def outside_fake_mode():
    """Context that suspends an active FakeTensorMode (torch._subclasses.fake_tensor, 2.13).

    aot_autograd calls our partition function with fake mode active; sending the plan
    between ranks must move real bytes.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()


# ---- local_map HOP support (torch 2.13) ------------------------------------------------
# Everything the HOP in torch_localmap/_local_map/hop.py needs beyond the public
# HigherOrderOperator / py_impl surface.


@contextlib.contextmanager
def tracing_suspended():
    """Run plain (fake) tensor code while an outer make_fx / functionalization trace is active.

    torch._dispatch.python.suspend_functionalization,
    torch._subclasses.functional_tensor.disable_functional_mode and
    torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing (2.13).
    """
    from torch._dispatch.python import suspend_functionalization
    from torch._subclasses.functional_tensor import disable_functional_mode
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with suspend_functionalization(), disable_functional_mode(), disable_proxy_modes_tracing():
        yield


def proxy_tracing_disabled():
    """torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing (2.13)."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    return disable_proxy_modes_tracing()


def fake_mode_of(values):
    """The FakeTensorMode of `values`, or a fresh one (real inputs): torch._guards.detect_fake_mode (2.13)."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = detect_fake_mode(values)
    return mode if mode is not None else FakeTensorMode(allow_non_fake_inputs=True)


def trace_subgraph(fn, *args) -> fx.GraphModule:
    """Trace `fn` as a subgraph of the current make_fx session, with its settings.

    torch._higher_order_ops.utils.reenter_make_fx (2.13).
    """
    from torch._higher_order_ops.utils import reenter_make_fx

    return reenter_make_fx(fn)(*args)


def trace_standalone(fn, *args) -> fx.GraphModule:
    """A fresh make_fx trace of fn(*args) (args may be fake tensors)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*args)


def add_subgraph(proxy_mode, gm: fx.GraphModule, prefix: str) -> str:
    """Registers `gm` on the traced root module under a fresh name; returns the name.

    torch._higher_order_ops.utils.unique_graph_id (2.13).
    """
    from torch._higher_order_ops.utils import unique_graph_id

    _, name = unique_graph_id(proxy_mode, prefix=prefix)
    proxy_mode.tracer.root.register_module(name, gm)
    return name


def track_outputs(example_out, out_proxy, tracer):
    """torch.fx.experimental.proxy_tensor.track_tensor_tree (2.13)."""
    from torch.fx.experimental.proxy_tensor import track_tensor_tree

    return track_tensor_tree(example_out, out_proxy, constant=None, tracer=tracer)


def clone_if_aliasing(inputs):
    """fn(t) -> t, or a clone when t shares storage with one of `inputs`.

    torch._higher_order_ops.utils.clone_outputs_aliasing_inputs (2.13); HOP outputs must
    not alias HOP inputs (functionalization and aot_autograd assume fresh outputs).
    """
    from torch._higher_order_ops.utils import clone_outputs_aliasing_inputs

    return clone_outputs_aliasing_inputs(inputs)


def interpreted(fn):
    """Runs a GraphModule through fx.Interpreter when node meta is being preserved.

    torch._higher_order_ops.utils._maybe_run_with_interpreter (2.13).
    """
    from torch._higher_order_ops.utils import _maybe_run_with_interpreter

    return _maybe_run_with_interpreter(fn)


def functional_input_mutated(t) -> bool:
    """Whether a functionalized input saw an in-place write (data or metadata).

    torch._subclasses.functional_tensor.FunctionalTensor (Python functionalization) or a C++
    functional tensor (torch.func.functionalize), torch._functionalize_has_data_mutation /
    _functionalize_has_metadata_mutation (2.13)."""
    from torch._subclasses.functional_tensor import FunctionalTensor

    if isinstance(t, FunctionalTensor):
        t = t.elem
    if not (isinstance(t, torch.Tensor) and torch._is_functional_tensor(t)):
        return False
    return bool(torch._functionalize_has_data_mutation(t) or torch._functionalize_has_metadata_mutation(t))


def below_autograd():
    """torch._C._AutoDispatchBelowAutograd (2.13): dispatch the next call past the Autograd key."""
    return torch._C._AutoDispatchBelowAutograd()


def opaque_to_dynamo(fn):
    """torch._dynamo.allow_in_graph (2.13): Dynamo records a call to `fn` as one graph node
    (running it on fake tensors for shapes) instead of tracing into it; aot_autograd then
    traces through it, where the local_map HOP takes over."""
    return torch._dynamo.allow_in_graph(fn)


# ---- torch's own local_map inside a model we trace ---------------------------------------

def _forward_to_localmap_handler(func, out_placements, in_placements, in_grad_placements, device_mesh,
                                 redistribute_inputs, *args, **kwargs):
    # Runs as the code of torch's _local_map_wrapped, so the name below is looked up in
    # that function's module globals (set by torch_local_map_calls_go_to).
    return _tlm_local_map_handler(func, out_placements, in_placements,  # noqa: F821
                                  in_grad_placements, device_mesh, redistribute_inputs, *args, **kwargs)


@contextlib.contextmanager
def torch_local_map_calls_go_to(handler):
    """While active, every region made by torch.distributed.tensor.experimental.local_map
    calls handler(original, func, out_placements, in_placements, in_grad_placements,
    device_mesh, redistribute_inputs, *args, **kwargs), `original` being torch's own.

    torch 2.13's local_map returns functools.partial(_func_map._local_map_wrapped, ...);
    partials made earlier (at module construction) hold that function object, so its code
    is swapped for a forwarding stub for the duration (same signature, no closure)."""
    import types

    from torch.distributed.tensor.experimental import _func_map as fm

    fn = fm._local_map_wrapped
    saved = fn.__code__
    original = types.FunctionType(saved, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    fn.__globals__["_tlm_local_map_handler"] = lambda *a, **k: handler(original, *a, **k)
    fn.__code__ = _forward_to_localmap_handler.__code__
    try:
        yield
    finally:
        fn.__code__ = saved
        fn.__globals__.pop("_tlm_local_map_handler", None)


@contextlib.contextmanager
def compiled_code_runs_eagerly():
    """Context in which every torch.compile'd function and module (OptimizedModule) runs its
    original Python code, not a compiled graph (torch.compiler.set_stance("force_eager"),
    2.13: the Dynamo frame callback is off). flex_attention's own eager path then calls its
    higher-order op directly (torch.nn.attention.flex_attention, 2.13), which make_fx traces
    into one `flex_attention` node with its score_mod / mask_mod subgraphs; its warning that
    it runs "without torch.compile()" is about eager execution, not a trace, and is silenced."""
    import warnings

    with torch.compiler.set_stance("force_eager"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield


@contextlib.contextmanager
def flex_closure_tensors_lifted():
    """Context in which flex_attention's eager path (torch.nn.attention.flex_attention, 2.13:
    it calls the module's `flex_attention_hop`) passes the tensors a score_mod / mask_mod
    closure captures (a document-ids tensor of a block-causal document mask) as the HOP's
    score_mod_other_buffers / mask_mod_other_buffers, as Dynamo lifts them. Captured, they
    would be traced as graph inputs of nothing: make_fx traces the mod outside the
    functionalization the outer trace runs under and fails; as buffers they are the HOP
    node's tensor arguments, which its rule places."""
    import torch.nn.attention.flex_attention as fa

    hop = fa.flex_attention_hop

    def lifted_hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                   score_mod_other_buffers=(), mask_mod_other_buffers=()):
        score_mod, score_bufs = _lift_closure_tensors(score_mod, 5, score_mod_other_buffers)
        mask_mod, mask_bufs = _lift_closure_tensors(block_mask[-1], 4, mask_mod_other_buffers)
        return hop(query, key, value, score_mod, (*block_mask[:-1], mask_mod), scale, kernel_options,
                   score_bufs, mask_bufs)

    fa.flex_attention_hop = lifted_hop
    try:
        yield
    finally:
        fa.flex_attention_hop = hop


def _lift_closure_tensors(fn, n_indices: int, buffers: tuple):
    """`fn` taking its closure's tensors as trailing buffer arguments, and the buffers."""
    found: list = []
    rebuild = _closure_template(fn, found, set())
    if not found:
        return fn, tuple(buffers)
    n_own = len(buffers)

    def with_buffers(*args):
        indices, own, lifted = args[:n_indices], args[n_indices:n_indices + n_own], args[n_indices + n_own:]
        return rebuild(iter(lifted))(*indices, *own)

    return with_buffers, (*buffers, *found)


def _closure_template(fn, found: list, seen: set):
    """A function of an iterator of tensors rebuilding `fn` with those tensors in place of
    the ones its closure (and nested functions' / functools.partial's) holds, in the order
    appended to `found`. torch's own _extract_callable_pytree does this but not while
    export's tracing reports is_compiling()."""
    import functools
    import inspect
    import types

    def of_value(v):
        if isinstance(v, torch.Tensor):
            found.append(v)
            return lambda it: next(it)
        if callable(v) and (inspect.isfunction(v) or isinstance(v, functools.partial)) and id(v) not in seen:
            return _closure_template(v, found, seen)
        return lambda it: v

    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        func, args = of_value(fn.func), [of_value(a) for a in fn.args]
        kws = {k: of_value(v) for k, v in fn.keywords.items()}
        return lambda it: functools.partial(func(it), *[a(it) for a in args], **{k: v(it) for k, v in kws.items()})
    if not inspect.isfunction(fn) or not fn.__closure__:
        return lambda it: fn
    try:
        cells = [of_value(c.cell_contents) for c in fn.__closure__]
    except ValueError:  # an empty cell (a name assigned after the function was made)
        return lambda it: fn

    def rebuild(it):
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                 tuple(types.CellType(c(it)) for c in cells))
        new.__kwdefaults__, new.__dict__ = fn.__kwdefaults__, dict(fn.__dict__)
        return new

    return rebuild


def register_block_mask_pytree() -> None:
    """Makes flex_attention's BlockMask a pytree node when its module is loaded, so a model
    taking a BlockMask argument (torchtitan's `attention_masks`) traces with its tensors as
    inputs. torch 2.13 gives BlockMask the flatten functions (_flatten, _unflatten,
    _flatten_with_keys: the block tensors and mask_mod's closure tensors are the children)
    but registers them only inside Dynamo / export."""
    import sys

    from torch.utils import _pytree

    fa = sys.modules.get("torch.nn.attention.flex_attention")
    if fa is None or fa.BlockMask in _pytree.SUPPORTED_NODES:
        return
    _pytree.register_pytree_node(fa.BlockMask, fa.BlockMask._flatten, fa.BlockMask._unflatten,
                                 flatten_with_keys_fn=fa.BlockMask._flatten_with_keys,
                                 serialized_type_name="torch.nn.attention.flex_attention.BlockMask")


def register_dataclass_pytree(cls) -> None:
    """Makes a dataclass a pytree node (its fields the children), so tracing can flatten
    model outputs of that type. torch.utils._pytree.register_dataclass (2.13)."""
    from torch.utils import _pytree

    _pytree.register_dataclass(cls)


def register_object_pytree(cls, flatten, unflatten, flatten_with_keys) -> None:
    """Makes `cls` a pytree node with the given functions (flatten(obj) -> (children,
    context); flatten_with_keys(obj) -> ([(GetAttrKey, child)], context)), so tracing can
    flatten outputs of that type. torch.utils._pytree.register_pytree_node (2.13)."""
    from torch.utils import _pytree

    _pytree.register_pytree_node(cls, flatten, unflatten, flatten_with_keys_fn=flatten_with_keys,
                                 serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")


def is_pytree_node(cls) -> bool:
    """Whether pytree already flattens `cls` (torch.utils._pytree.SUPPORTED_NODES, 2.13)."""
    from torch.utils import _pytree

    return cls in _pytree.SUPPORTED_NODES


def attribute_key(name: str):
    """The pytree path key of an attribute (torch.utils._pytree.GetAttrKey, 2.13)."""
    from torch.utils import _pytree

    return _pytree.GetAttrKey(name)


def inductor_compile(gm: fx.GraphModule, example_inputs: list):
    """`gm` (an aten graph with _c10d_functional collectives) compiled by Inductor for
    the shapes of `example_inputs` (torch._inductor.standalone_compile, 2.13); the
    result is called with the graph's inputs and returns its outputs."""
    from torch._inductor import standalone_compile

    # Inductor's FX bucketing merges collectives of one kind on one group into one call
    # (torch._inductor.config.bucket_*_fx, 2.13): fewer latencies, as DDP's buckets. Its
    # peak-memory reordering would issue each collective right before its wait (an issued
    # collective holds its output buffer); the graph arrives in the overlap schedule's
    # order, whose bound on bytes in flight already limits that memory.
    patches = {"bucket_all_gathers_fx": "all", "bucket_reduce_scatters_fx": "all", "bucket_all_reduces_fx": "all",
               "reorder_for_peak_memory": False}
    from torch._inductor.exc import InductorError

    with outside_fake_mode():
        try:
            return standalone_compile(gm, example_inputs, dynamic_shapes="from_example_inputs",
                                      options={"config_patches": patches})
        except InductorError as e:
            if not any(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in example_inputs):
                raise
            # Inductor's C++ vectorizer (2.13) asserts on some int64 index arithmetic (a causal
            # mask built from aranges); the scalar C++ backend compiles it. Every rank has the
            # same graph, so every rank takes this same path: their collectives still match.
            import warnings

            warnings.warn(f"torch_localmap: Inductor's vectorized C++ code generation failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:200]}); compiling this graph without vectorization", stacklevel=2)
            return standalone_compile(gm, example_inputs, dynamic_shapes="from_example_inputs",
                                      options={"config_patches": {**patches, "cpp.simdlen": 1}})


def cpu_memory_profiler():
    """A profiler recording CPU allocations only (torch.profiler.profile with
    profile_memory=True, 2.13)."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False, with_stack=False)


def cpu_allocation_peak(prof) -> int:
    """The largest running total of CPU bytes allocated (and not yet freed) since `prof`
    started: each allocation record's total_allocated (the profiler's event tree,
    torch._C._profiler._EventType.Allocation, 2.13)."""
    from torch._C._profiler import _EventType

    peak = 0
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
            peak = max(peak, int(e.extra_fields.total_allocated))
    return peak


def inductor_code_of(fn):
    """(fn(), [the Python wrapper code Inductor generated while fn ran]), with the
    compile caches off so the code is generated (torch._inductor.utils.run_and_get_code,
    2.13)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        return run_and_get_code(fn)


def node_annotation(key: str, value):
    """Context: nodes traced inside it get node.meta["custom"][key] = value; aot_autograd
    copies a forward node's "custom" onto the backward nodes of the same autograd node
    (torch.fx.traceback.annotate, 2.13; gradient accumulations stay unannotated)."""
    from torch.fx import traceback as fx_traceback

    return fx_traceback.annotate({key: value})


def node_annotations(node: fx.Node) -> dict:
    """What node_annotation recorded on `node` (empty when nothing was)."""
    custom = node.meta.get("custom")
    return custom if isinstance(custom, dict) else {}


def autograd_sequence_nr(node: fx.Node) -> int:
    """The autograd sequence number recorded at trace time: a backward node has the number
    of the forward node it differentiates (-1: none recorded)."""
    nr = node.meta.get("seq_nr")
    return int(nr) if isinstance(nr, int) else -1


def is_backward_node(node: fx.Node) -> bool:
    return node.meta.get("partitioner_tag") == "is_backward" or bool(node.meta.get("autograd_backward"))


@functools.cache
def _from_local_takes_grad_placements() -> bool:
    import inspect

    from torch.distributed.tensor import DTensor

    return "grad_placements" in inspect.signature(DTensor.from_local).parameters


class _FromLocalWithGrad(torch.autograd.Function):
    """DTensor.from_local whose gradient arrives in `grad_placements` (torch before 2.13
    lacks the argument: its from_local sends a Partial output's gradient back Replicate)."""

    @staticmethod
    def forward(ctx, local, mesh, placements, shape, stride, grad_placements):
        from torch.distributed.tensor import DTensor

        ctx.mesh, ctx.grad_placements = mesh, tuple(grad_placements)
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        local = grad.to_local()
        if grad.placements != ctx.grad_placements:  # as 2.13's from_local does (Partial allowed)
            from torch.distributed.tensor._dtensor_spec import DTensorSpec
            from torch.distributed.tensor._redistribute import redistribute_local_tensor

            target = DTensorSpec(ctx.mesh, ctx.grad_placements, tensor_meta=grad._spec.tensor_meta)
            local = redistribute_local_tensor(local, grad._spec, target)
        return local, None, None, None, None, None


def dtensor_from_local(local, mesh, placements, shape, stride, grad_placements):
    """DTensor.from_local(local, ..., run_check=False, shape=, stride=, grad_placements=) on
    every supported torch."""
    from torch.distributed.tensor import DTensor

    if _from_local_takes_grad_placements():
        return DTensor.from_local(local, mesh, placements, run_check=False, shape=shape, stride=stride,
                                  grad_placements=grad_placements)
    return _FromLocalWithGrad.apply(local, mesh, placements, shape, stride, grad_placements)
