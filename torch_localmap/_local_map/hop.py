"""The local_map higher-order operator: `localmap_hop(body, region_json, *tensors)`.

`body` takes the region's tensor inputs *as local shards* and returns a tuple of
local tensors; `region_json` is a `Region` (region.py) in JSON;
`tensors` are the region's inputs *as global tensors*, each placed as
region.in_placements says. The HOP returns global tensors placed as
region.out_placements says. Implementations:

- Autograd: an autograd.Function whose forward is the HOP on the traced forward
  graph and whose backward is the HOP on a backward graph cut from the region's
  joint graph (recomputing the region's forward from its saved inputs, so only
  global tensors with declared placements cross region boundaries).
- Functionalize: functionalizes the body, redispatches.
- FakeTensorMode: global -> local input shapes, runs the body, local -> global
  output shapes (shape arithmetic in C++, one call per boundary).
- ProxyTorchDispatchMode: traces the body at local shapes into a subgraph and
  records one `localmap_hop` node.
- CompositeExplicitAutograd (real tensors): simulates the SPMD execution on one
  process: cuts every rank's local inputs out of the global tensors, runs the
  body per rank, assembles the global outputs (Shard: placed at the rank's
  offset, Partial: reduced, Replicate: rank 0 of that mesh dim). On a trivial
  mesh this is just body(*tensors).

The class itself stays thin; helpers below do the work.
"""
from __future__ import annotations

import contextlib

import math
from dataclasses import dataclass

import torch

from .. import _C
from .._torch_private import fake_tensors, hop_support, partition
from .._torch_private.fake_tensors import FakeTensorMode
from .._torch_private.hop_support import DispatchKey, ProxyTorchDispatchMode
from .._torch_private.op_types import HigherOrderOperator, OpOverload
from ..placements import spec_parts
from .region import BACKWARD, Region


class RegionMutationError(RuntimeError):
    """A local_map region mutated one of its inputs in place (unsupported)."""

    @classmethod
    def of(cls, region_name: str, index: int, op: str = "") -> "RegionMutationError":
        how = f" ({op})" if op else ""
        return cls(f"local_map region '{region_name}' mutates its tensor input {index} in place{how}; regions must "
                   f"not mutate their inputs (their local shards may be temporary copies). Clone the input inside "
                   f"the region and return the new value instead.")


@contextlib.contextmanager
def inputs_unmutated(region_name: str, tensors):
    """Raises RegionMutationError if the code run inside wrote in place to one of `tensors`
    (its version counter moved), naming the first such input by its position in `tensors`.
    The one check for every way a region runs: eager (decorator.py), and the HOP's fake
    and traced bodies."""
    versions = [t._version for t in tensors]
    yield
    for i, (t, v) in enumerate(zip(tensors, versions)):
        if t._version != v:
            raise RegionMutationError.of(region_name, i)


class RegionClosureError(RuntimeError):
    """A local_map region body reads a tensor it was not passed (a closed-over parameter)."""

    @classmethod
    def of(cls, region_name: str, what: str) -> "RegionClosureError":
        return cls(f"local_map region '{region_name}': the body reads {what} that is not one of its "
                   f"arguments. A region sees only its arguments' local shards: a closed-over tensor (a module "
                   f"parameter read inside the body) would get no gradient and no placement. Pass it as an "
                   f"argument of the local_map function, with its in_placements (and in_grad_placements).")


def _closed_over_leaves(outs, inputs) -> list:
    """Leaf tensors requiring grad that the outputs' autograd graph reaches besides `inputs`."""
    allowed = {id(t) for t in inputs}
    found = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is None
             and id(o) not in allowed]
    stack = [o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    seen = set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)  # AccumulateGrad: a leaf
        if var is not None and id(var) not in allowed:
            found.append(var)
        stack.extend(f for f, _ in fn.next_functions)
    return found


# What tracers say when a body uses a tensor that is not among its inputs (2.13): make_fx
# finds no proxy for it; functionalization meets a functional tensor outside its mode.
_CLOSURE_SYMPTOMS = ("tensor_tracker", "FunctionalTensor on its own")


@contextlib.contextmanager
def _naming_closures(region: Region):
    try:
        yield
    except RuntimeError as e:
        if any(s in str(e) for s in _CLOSURE_SYMPTOMS):
            raise RegionClosureError.of(region.name, "a tensor") from e
        raise


def _trace_body(region: Region, body, trace, *args) -> torch.fx.GraphModule:
    """trace(body, *args), naming a closed-over tensor (the tracer cannot find it among its inputs)."""
    with _naming_closures(region):
        return trace(body, *args)


class LocalMapHOP(HigherOrderOperator):
    def __init__(self) -> None:
        super().__init__("tlm_local_map")

    def __call__(self, body, region_json: str, *args):
        return super().__call__(body, region_json, *args)


localmap_hop = LocalMapHOP()


# ---- boundary arithmetic (C++) ------------------------------------------------------

def _mesh_args(region: Region):
    return list(region.mesh_shape), list(region.mesh_dim_names or ())


def _input_plan(region: Region, args, all_ranks: bool) -> dict:
    shapes = [list(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
    types = [type(a).__name__ for a in args]
    return _C.plan_region_inputs(*_mesh_args(region), shapes, types, list(region.in_placements),
                                 all_ranks=all_ranks, what=_what(region, "in_placements"))


def _output_plan(region: Region, outs, other_rank_shapes=()) -> dict:
    shapes = [list(o.shape) if isinstance(o, torch.Tensor) else None for o in outs]
    types = [type(o).__name__ for o in outs]
    return _C.plan_region_outputs(*_mesh_args(region), shapes, types, list(region.out_placements),
                                  [list(map(list, r)) for r in other_rank_shapes],
                                  what=_what(region, "out_placements"))


def _what(region: Region, field: str) -> str:
    role = " (backward)" if region.role == BACKWARD else ""
    return f"local_map region '{region.name}'{role}: {field}"


def _local_like(args, shapes, fake_mode, requires_grad=None):
    """Fresh contiguous fake tensors with the given (local) shapes and the args' dtypes."""
    out = []
    with fake_mode:
        for i, (a, shape) in enumerate(zip(args, shapes)):
            rg = bool(requires_grad[i]) if requires_grad is not None else False
            out.append(torch.empty(shape, dtype=a.dtype, device=a.device, requires_grad=rg))
    return out


def _run_checked(region: Region, body, local_args):
    """body(*local_args) as a tuple; raises RegionMutationError if it mutated an input."""
    with inputs_unmutated(region.name, local_args):
        outs = body(*local_args)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    for j, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"local_map region '{region.name}': body output {j} is {type(o).__name__}, "
                            f"expected a tensor")
    return tuple(outs)


# ---- FakeTensorMode: global -> local -> global shapes ----------------------------------

@localmap_hop.py_impl(FakeTensorMode)
def _fake(mode, body, region_json, *args):
    region = Region.from_json(region_json)
    plan = _input_plan(region, args, all_ranks=False)
    local = _local_like(args, plan["local_shapes"][0], mode)
    with mode:
        outs = _run_checked(region, body, local)
    oplan = _output_plan(region, outs)
    with mode:
        return tuple(torch.empty(g, dtype=o.dtype, device=o.device) for g, o in zip(oplan["global_shapes"], outs))


# ---- ProxyTorchDispatchMode: one node, body traced at local shapes -----------------------

@localmap_hop.py_impl(ProxyTorchDispatchMode)
def _proxy(mode, body, region_json, *args):
    region = Region.from_json(region_json)
    plan = _input_plan(region, args, all_ranks=False)
    with hop_support.proxy_tracing_disabled():
        local = _local_like(args, plan["local_shapes"][0], fake_tensors.fake_mode_of(args))
    with inputs_unmutated(region.name, local):
        body_gm = _trace_body(region, body, hop_support.trace_subgraph, *local)
    _check_graph_pure(region, body_gm)
    name = hop_support.add_subgraph(mode, body_gm, prefix="localmap_body")
    example_out = localmap_hop(body_gm, region_json, *args)  # next mode: fake / real shapes
    tracer = mode.tracer
    proxy_args = tuple(tracer.unwrap_proxy(a) for a in args)
    body_proxy = tracer.create_proxy("get_attr", name, (), {})
    out_proxy = tracer.create_proxy("call_function", localmap_hop, (body_proxy, region_json, *proxy_args), {})
    return hop_support.track_outputs(example_out, out_proxy, tracer)


def _check_graph_pure(region: Region, gm: torch.fx.GraphModule) -> None:
    """Raises RegionMutationError if the traced body writes into one of its placeholders."""
    placeholders = {n for n in gm.graph.nodes if n.op == "placeholder"}
    root = {}

    def root_of(n):
        return root.get(n, n)

    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, OpOverload):
            continue
        schema = n.target._schema
        tensor_args = [a for a in n.args if isinstance(a, torch.fx.Node)]
        for arg_schema, a in zip(schema.arguments, n.args):
            info = arg_schema.alias_info
            if info is not None and info.is_write and isinstance(a, torch.fx.Node) and root_of(a) in placeholders:
                idx = sorted(placeholders, key=lambda p: list(gm.graph.nodes).index(p)).index(root_of(a))
                raise RegionMutationError.of(region.name, idx, str(n.target))
        # views alias their first tensor argument
        if schema.returns and schema.returns[0].alias_info is not None and tensor_args:
            root[n] = root_of(tensor_args[0])


# ---- Functionalize ------------------------------------------------------------------

@localmap_hop.py_functionalize_impl
def _functionalize(ctx, body, region_json, *args):
    unwrapped = ctx.unwrap_tensors(args)
    inner = hop_support.interpreted(body)

    def checked_body(*functional_args):
        # Functionalization rewrites an in-place op on an input into a new value and
        # drops the write: the region would silently stop mutating what eager mutates.
        outs = inner(*functional_args)
        for i, a in enumerate(functional_args):
            if hop_support.functional_input_mutated(a):
                raise RegionMutationError.of(Region.from_json(region_json).name, i)
        return outs

    functional_body = ctx.functionalize(checked_body)
    with ctx.redispatch_to_next():
        outs = localmap_hop(functional_body, region_json, *unwrapped)
    return ctx.wrap_tensors(outs)


# ---- real tensors: simulate every rank on one process ------------------------------------

@localmap_hop.py_impl(DispatchKey.CompositeExplicitAutograd)
def _dense(body, region_json, *args):
    region = Region.from_json(region_json)
    n_ranks = math.prod(region.mesh_shape)
    if n_ranks == 1:
        _input_plan(region, args, all_ranks=False)  # validates
        # Contiguous, as the body was traced (_local_like): its graph may view its inputs.
        outs = _run_checked(region, body, [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args])
        _output_plan(region, outs)
        return tuple(hop_support.clone_if_aliasing(args)(o) for o in outs)
    plan = _input_plan(region, args, all_ranks=True)
    parts = [spec_parts(s) for s in region.in_placements]
    per_rank = []
    for r in range(n_ranks):
        local = []
        for i, a in enumerate(args):
            shape, off = plan["local_shapes"][r][i], plan["offsets"][r][i]
            piece = a[tuple(slice(o, o + s) for o, s in zip(off, shape))].clone(
                memory_format=torch.contiguous_format)
            local.append(_partition_partial(piece, parts[i], region.mesh_shape))
        per_rank.append(_run_checked(region, body, local))
    oplan = _output_plan(region, per_rank[0], [[list(o.shape) for o in outs] for outs in per_rank[1:]])
    return tuple(_assemble(region, j, oplan, per_rank) for j in range(len(per_rank[0])))


def _partition_partial(piece, parts, mesh_shape):
    """A rank's share of a global value placed Partial: sum splits evenly (DTensor's
    Replicate -> Partial(sum) rule, v / n); avg, max and min keep the value."""
    for md, part in enumerate(parts):
        if part.kind.pending and part.reduce_op == "sum":
            piece = piece / mesh_shape[md]
    return piece


def _coordinate(rank, mesh_shape):
    coord = []
    for size in reversed(mesh_shape):
        coord.append(rank % size)
        rank //= size
    return tuple(reversed(coord))


def _assemble(region: Region, j: int, oplan: dict, per_rank) -> torch.Tensor:
    parts = spec_parts(region.out_placements[j])
    first = per_rank[0][j]
    out = torch.zeros(oplan["global_shapes"][j], dtype=first.dtype, device=first.device)
    for part in parts:
        if part.kind.pending and part.reduce_op not in ("sum", "avg"):
            raise NotImplementedError(
                f"local_map region '{region.name}': simulating a {part.kind.name}({part.arg}) output on one process is not "
                f"supported; run the region on DTensors or through parallelize")
    for r, outs in enumerate(per_rank):
        coord = _coordinate(r, region.mesh_shape)
        # Mesh dims that neither split nor hold pending pieces hold copies: take the copy at coordinate 0.
        if any(c != 0 for c, part in zip(coord, parts) if not part.kind.splits_dim and not part.kind.pending):
            continue
        local = outs[j]
        off = oplan["offsets"][r][j]
        out[tuple(slice(o, o + s) for o, s in zip(off, local.shape))] += local
    for md, part in enumerate(parts):
        if part.kind.pending and part.reduce_op == "avg":
            out = out / region.mesh_shape[md]
    return out


# ---- Autograd ------------------------------------------------------------------------

@dataclass
class _RegionGraphs:
    """Forward and backward graphs of one region call, traced at local shapes."""

    fw_gm: torch.fx.GraphModule
    bw_gm: torch.fx.GraphModule
    region_json: str
    bw_region_json: str
    n_args: int
    diff_in: list  # arg indices that get gradients (bw outputs, in order)
    diff_out: list  # output indices whose tangents the backward takes
    saved: list  # arg indices the backward graph reads (its leading inputs)
    n_out: int
    draws_random: bool  # the body draws random numbers: backward replays forward's RNG state


@localmap_hop.py_impl(DispatchKey.Autograd)
def _autograd(body, region_json, *args):
    needs = [isinstance(a, torch.Tensor) and a.requires_grad for a in args]
    if not (torch.is_grad_enabled() and any(needs)):
        with hop_support.below_autograd():
            return localmap_hop(body, region_json, *args)
    region = Region.from_json(region_json)
    if region.role == BACKWARD:
        raise NotImplementedError(
            f"local_map region '{region.name}': differentiating the region's backward (double backward) "
            f"is not supported")
    graphs = _trace_fw_bw(region, body, args, needs)
    return _RegionFunction.apply(graphs, *args)


def _trace_fw_bw(region: Region, body, args, needs) -> _RegionGraphs:
    """Traces the region's joint graph once at local shapes (fake tensors) and cuts both
    graphs from it.

    The forward graph computes the outputs; the backward graph takes the region inputs it
    reads (recomputing the forward it needs) and the tangents of the differentiable
    outputs, and returns the gradients of the inputs that require grad. Both come from one
    trace, so the backward's recomputation is node for node the forward's: the rank
    program shares them (recompute_sharing.py) and eager replays the forward's RNG state,
    so a random op inside the region draws once for forward and backward.
    """
    plan = _input_plan(region, args, all_ranks=False)
    n = len(args)
    diff_in = [i for i in range(n) if needs[i]]
    with hop_support.tracing_suspended():
        fake_mode = fake_tensors.fake_mode_of(args)
        local = _local_like(args, plan["local_shapes"][0], fake_mode, needs)
        with fake_mode, torch.enable_grad():
            # Non-leaf copies: an in-place write on a leaf that requires grad fails inside
            # autograd before _run_checked could name the region; on a copy it is caught.
            with _naming_closures(region):
                outs = _run_checked(region, body, [t.clone() if t.requires_grad else t for t in local])
        closed = _closed_over_leaves(outs, local)
        if closed:
            raise RegionClosureError.of(region.name, f"a tensor of shape {tuple(closed[0].shape)} that "
                                        f"requires grad")
        _output_plan(region, outs)  # validates out_placements against the outputs
        diff_out = [j for j, o in enumerate(outs) if o.requires_grad]
        primals = [t.detach() for t in local]
        with fake_mode:
            tangents = [torch.empty_like(outs[j]).detach() for j in diff_out]

        def joint(*primals_and_tangents):
            xs = [p.detach().requires_grad_(needs[i]) for i, p in enumerate(primals_and_tangents[:n])]
            cts = primals_and_tangents[n:]
            with torch.enable_grad():
                ys = body(*xs)
                if not isinstance(ys, (tuple, list)):
                    ys = (ys,)
                grads = torch.autograd.grad([ys[j] for j in diff_out], [xs[i] for i in diff_in], list(cts),
                                            allow_unused=True) if diff_out else [None] * len(diff_in)
            grads = [g if g is not None else torch.zeros_like(xs[i]) for g, i in zip(grads, diff_in)]
            return (*[y.detach() for y in ys], *grads)

        joint_gm = _trace_body(region, joint, hop_support.trace_standalone, *primals, *tangents)
    n_out = len(outs)
    fw_gm = _graph_with_outputs(joint_gm, range(n_out), n_placeholders=n)
    _check_graph_pure(region, fw_gm)
    bw_gm = _graph_with_outputs(joint_gm, range(n_out, n_out + len(diff_in)))
    saved = _drop_unused_primals(bw_gm, n)
    grad_specs = region.grad_placements
    out_grad_specs = _C.grad_specs([region.out_placements[j] for j in diff_out])
    bw_region = region.with_(
        role=BACKWARD,
        in_placements=tuple([region.in_placements[i] for i in saved] + list(out_grad_specs)),
        out_placements=tuple(grad_specs[i] for i in diff_in),
        in_grad_placements=None,
        redistribute_inputs=False,
        num_saved_inputs=len(saved),
    )
    return _RegionGraphs(fw_gm=fw_gm, bw_gm=bw_gm, region_json=region.to_json(), bw_region_json=bw_region.to_json(),
                         n_args=n, diff_in=diff_in, diff_out=diff_out, saved=saved, n_out=n_out,
                         draws_random=any(partition.is_random_node(nd) for nd in fw_gm.graph.nodes))


def _graph_with_outputs(joint_gm: torch.fx.GraphModule, outputs, n_placeholders=None) -> torch.fx.GraphModule:
    """A copy of `joint_gm` returning the outputs at the given positions (a tuple), dead code
    removed (random draws stay, in trace order) and, when `n_placeholders` is given, only that
    many leading placeholders kept (the forward takes no tangents)."""
    import copy

    gm = torch.fx.GraphModule(joint_gm, copy.deepcopy(joint_gm.graph))
    out_node = gm.graph.output_node()
    values = out_node.args[0]
    out_node.args = (tuple(values[k] for k in outputs),)
    gm.graph.eliminate_dead_code()
    if n_placeholders is not None:
        for ph in [p for p in gm.graph.nodes if p.op == "placeholder"][n_placeholders:]:
            if ph.users:
                raise AssertionError(f"forward graph reads tangent {ph.name}")
            gm.graph.erase_node(ph)
    gm.recompile()
    return gm


def _drop_unused_primals(gm: torch.fx.GraphModule, n_primals: int) -> list:
    """Removes dead code (forward outputs the gradients do not need) and then the backward
    graph's unread primal placeholders; returns the kept primal indices."""
    gm.graph.eliminate_dead_code()
    kept = []
    for i, ph in enumerate([p for p in gm.graph.nodes if p.op == "placeholder"][:n_primals]):
        if ph.users:
            kept.append(i)
        else:
            gm.graph.erase_node(ph)
    gm.recompile()
    return kept


class _RegionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graphs: _RegionGraphs, *args):
        # On real tensors the backward recomputes the forward's draws from the same RNG
        # state (one dropout mask for both). Traced programs share the forward's nodes
        # instead (recompute_sharing.py); fake tensors draw nothing.
        ctx.rng = _rng_state(args) if graphs.draws_random and _all_plain(args) else None
        with hop_support.below_autograd():
            outs = localmap_hop(graphs.fw_gm, graphs.region_json, *args)
        ctx.graphs = graphs
        ctx.save_for_backward(*[args[i] for i in graphs.saved])
        diff = set(graphs.diff_out)
        ctx.mark_non_differentiable(*[o for j, o in enumerate(outs) if j not in diff])
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        g = ctx.graphs
        saved = ctx.saved_tensors
        # The backward graph was traced with contiguous tangents (views inside it may rely on that).
        tangents = [grads[j].contiguous() for j in g.diff_out]
        with hop_support.below_autograd(), _replayed_rng(ctx.rng):
            grad_in = localmap_hop(g.bw_gm, g.bw_region_json, *saved, *tangents)
        result = [None] * g.n_args
        for k, i in enumerate(g.diff_in):
            result[i] = grad_in[k]
        return (None, *result)


def _all_plain(args) -> bool:
    """Whether every tensor argument is a plain tensor (not fake, functional or a subclass)."""
    return all(type(a) in (torch.Tensor, torch.nn.Parameter) for a in args if isinstance(a, torch.Tensor))


def _rng_state(args):
    """The generator states a body on `args` draws from: the CPU's and each CUDA device's."""
    cuda = sorted({a.device.index or 0 for a in args if isinstance(a, torch.Tensor) and a.device.type == "cuda"})
    return torch.get_rng_state(), {d: torch.cuda.get_rng_state(d) for d in cuda}


@contextlib.contextmanager
def _replayed_rng(state):
    """Runs with the generators at `state` (None: as they are); restores them afterwards."""
    if state is None:
        yield
        return
    cpu, cuda = state
    with torch.random.fork_rng(devices=list(cuda), device_type="cuda"):
        torch.set_rng_state(cpu)
        for d, s in cuda.items():
            torch.cuda.set_rng_state(s, d)
        yield
