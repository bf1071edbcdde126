"""Numerical verification of every sharding strategy the C++ propagator emits.

For one op instance (a "case": the op's IR node plus real global input values)
and one mesh, every strategy from `_C.enumerate_strategies` is checked:

1. each mesh coordinate's local inputs are built from the global inputs per the
   strategy's input specs: Shard -> the slice `_C.local_layout` names;
   Partial(sum) -> random pieces summing to the value; Partial(avg) -> pieces
   averaging to it; Partial(max/min) -> copies with entries lowered/raised except
   on one random owner coordinate;
2. the op runs once per coordinate, in this process, with the arguments
   `_C.local_call_args` gives for that coordinate (local sizes for view/expand/...);
3. outputs are reassembled per the output specs (Partial groups reduced, Shard
   pieces placed at their offsets, Replicate copies checked to agree) and compared
   with the op on the global inputs: float64 with a tight tolerance, integers exactly.

Cases come from the joint graphs of the reference models (torch_localmap.models),
traced in float64 and run on real random data so that every op sees consistent
inputs (valid indices, matching saved statistics, ...), at tiny sizes and at
"edge" sizes (odd, size-1 and smaller-than-mesh dims), plus a few hand-made
one-op programs. C++ makes every decision; this module only builds tensors.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import warnings
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import _C
from ._ir_export import decode_arg
from ._runtime.random_ops import is_random, run_sharded

# Ops whose outputs cannot be compared value by value, with the reason. (Random ops the
# runtime runs sharded -- _runtime/random_ops.py -- are verified: every coordinate and
# the reference draw from the same generator state.)
EXCLUDED_OPS = {
    "aten.bernoulli.default": "random: draws from the RNG",
    "aten.rand_like.default": "random: draws from the RNG",
    "aten.randn_like.default": "random: draws from the RNG",
    "aten.randint_like.default": "random: draws from the RNG",
}
# Ops whose output memory is uninitialized: only shapes and dtypes are compared.
SHAPE_ONLY_OPS = {
    "aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default",
    "aten.new_empty_strided.default", "aten.empty_strided.default",
}
RTOL, ATOL = 1e-7, 1e-9


# ----------------------------------------------------------------------------- cases

@dataclass
class OpCase:
    op: str
    source: str                 # where the instance came from ("llama", "edge:vit", "hand:mm", ...)
    node: dict                  # the op's IR node; tensor refs point at placeholders 0..k-1
    inputs: list                # global input tensors, one per tensor argument occurrence
    input_shapes: list = field(default_factory=list)

    def doc(self, mesh_shape) -> dict:
        nodes = [{"name": f"in{i}", "op": "placeholder", "role": "input", "args": [], "kwargs": {},
                  "outputs": [_meta(t)]} for i, t in enumerate(self.inputs)]
        k = len(nodes)
        nodes.append(self.node)
        outs = [{"t": [k, i]} for i in range(len(self.node["outputs"]))]
        nodes.append({"name": "output", "op": "output", "args": [outs], "kwargs": {}})
        return {"mesh": {"shape": list(mesh_shape)}, "nodes": nodes}

    @property
    def node_index(self) -> int:
        return len(self.inputs)

    def describe(self) -> str:
        return f"{self.op} inputs {self.input_shapes} ({self.source})"


def _meta(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}


def _remap_refs(arg, occurrences: list):
    """Replaces every tensor ref by a fresh placeholder index (one per occurrence, depth first,
    args before kwargs: the IR's tensor_inputs order)."""
    if isinstance(arg, list):
        return [_remap_refs(a, occurrences) for a in arg]
    if isinstance(arg, dict):
        if "t" in arg:
            occurrences.append(tuple(arg["t"]))
            return {"t": [len(occurrences) - 1, 0]}
        if "dict" in arg:
            return {"dict": {k: _remap_refs(v, occurrences) for k, v in arg["dict"].items()}}
    return arg


def _run_graph(gm: fx.GraphModule, placeholder_values: list) -> dict:
    """Runs an FX graph on real tensors, returning every node's value."""
    env = {}
    it = iter(placeholder_values)
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(it)
        elif n.op == "call_function":
            args = fx.node.map_arg(n.args, lambda a: env[a])
            kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
            env[n] = n.target(*args, **kwargs)
        elif n.op == "output":
            break
        else:
            raise ValueError(f"unexpected FX node {n.op} {n.name}")
    return env


def cases_from_graph(gm: fx.GraphModule, placeholder_values: list, source: str) -> list:
    """One OpCase per op node of `gm`, with the values the graph computes on `placeholder_values`."""
    from ._ir_export import export_graph

    env = _run_graph(gm, placeholder_values)
    ex = export_graph(gm, [1])

    def value(ref):
        node_idx, out_idx = ref
        fxn = ex.fx_nodes[node_idx]
        v = env[fxn]
        if isinstance(v, (tuple, list)):
            slots = ex.output_slots[fxn]
            pos = next(p for p, o in slots.items() if o == out_idx)
            return v[pos]
        return v

    cases = []
    for i, node in enumerate(ex.document()["nodes"]):
        if node["op"] in ("placeholder", "output") or not node.get("outputs"):
            continue
        occ: list = []
        new = dict(node)
        new["args"] = _remap_refs(node["args"], occ)
        new["kwargs"] = {k: _remap_refs(v, occ) for k, v in node["kwargs"].items()}
        new["kwargs"] = dict(new["kwargs"])
        inputs = [value(r) for r in occ]
        if not all(isinstance(t, torch.Tensor) for t in inputs):
            continue
        cases.append(OpCase(op=node["op"], source=source, node=new, inputs=[t.detach().clone() for t in inputs],
                            input_shapes=[list(t.shape) for t in inputs]))
    return cases


def _case_key(c: OpCase) -> str:
    node = {k: c.node[k] for k in ("op", "args", "kwargs", "outputs")}
    return json.dumps([node, [_meta(t) for t in c.inputs]], sort_keys=True)


def _model_cases(name: str, config, batch: int, seed: int, source: str) -> list:
    from . import models
    from ._trace import trace_joint

    module, inputs = models.build(name, config=config, batch=batch, seed=seed)
    module = module.to(torch.float64)
    inputs = tuple(x.to(torch.float64) if x.is_floating_point() else x for x in inputs)
    joint = trace_joint(module, inputs)
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    from . import _torch_private

    gen = torch.Generator().manual_seed(seed + 7)
    values = []
    for n in joint.gm.graph.nodes:
        if n.op != "placeholder":
            continue
        role, target = _torch_private.describe_input(n.meta.get("desc"))
        if role == "param":
            values.append(params[target].detach().clone())
        elif role == "buffer":
            values.append(buffers[target].detach().clone())
        elif role == "input":
            values.append(inputs[int(target)])
        else:  # tangent: a random cotangent exercises the backward more than ones would
            meta = n.meta["val"]
            values.append(torch.randn(meta.shape, dtype=meta.dtype, generator=gen))
    return cases_from_graph(joint.gm, values, source)


def edge_configs() -> list:
    """(model, config, batch): sizes that are odd, 1, or smaller than the mesh dims."""
    from .models import cnn, llama, moe, vit

    return [
        ("llama", llama.LlamaConfig.tiny(dim=12, n_layers=1, n_heads=3, n_kv_heads=1, ffn_dim=7, vocab_size=5,
                                         seq_len=3), 1),
        ("llama_tied", llama.LlamaConfig.tiny(dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=5, vocab_size=7,
                                              seq_len=1, tie_embeddings=True), 3),
        ("moe", moe.MoEConfig.tiny(dim=6, n_layers=1, n_heads=1, n_experts=3, top_k=1, expert_ffn_dim=5,
                                   vocab_size=7, seq_len=3), 1),
        ("vit", vit.ViTConfig.tiny(image_size=6, patch_size=3, channels=1, dim=6, n_layers=1, n_heads=3,
                                   mlp_dim=5, n_classes=3), 1),
        ("cnn", cnn.CNNConfig.tiny(image_size=5, in_channels=1, widths=(3,), n_classes=3), 3),
    ]


def _hand_programs():
    """Small one-op programs at edge shapes that the models do not produce."""
    import torch.nn.functional as F

    def grad_of(fn, *xs):
        xs = [x.requires_grad_() if x.is_floating_point() else x for x in xs]
        out = fn(*xs)
        # a deterministic non-constant cotangent (a generator object cannot be traced)
        g = torch.cos(torch.arange(out.numel(), dtype=out.dtype) * 1.3).reshape(out.shape)
        diff = [x for x in xs if x.requires_grad]
        return (out,) + tuple(torch.autograd.grad(out, diff, g))

    r = lambda *s: torch.randn(*s, dtype=torch.float64)  # noqa: E731
    return [
        ("mm_odd", lambda a, b: grad_of(torch.mm, a, b), (r(5, 3), r(3, 7))),
        ("mm_size1", lambda a, b: grad_of(torch.mm, a, b), (r(1, 4), r(4, 1))),
        ("bmm_odd", lambda a, b: grad_of(torch.bmm, a, b), (r(3, 5, 1), r(3, 1, 2))),
        ("addmm_bcast", lambda c, a, b: grad_of(torch.addmm, c, a, b), (r(7), r(3, 5), r(5, 7))),
        ("broadcast_add", lambda a, b: grad_of(torch.add, a, b), (r(3, 1, 5), r(4, 1))),
        ("broadcast_mul", lambda a, b: grad_of(torch.mul, a, b), (r(1, 5), r(3, 1))),
        ("sum_keepdim", lambda a: grad_of(lambda x: x.sum((0, 2), keepdim=True), a), (r(3, 1, 5),)),
        ("mean_all", lambda a: grad_of(lambda x: x.mean(), a), (r(5, 3),)),
        ("amax", lambda a: (torch.amax(a, 1), torch.amax(a, (0, 1), keepdim=True)), (r(3, 5),)),
        ("softmax_odd", lambda a: grad_of(lambda x: torch.softmax(x, 0), a), (r(5, 3),)),
        ("log_softmax_size1", lambda a: grad_of(lambda x: torch.log_softmax(x, -1), a), (r(3, 1),)),
        ("layer_norm_odd", lambda a, w, b: grad_of(lambda x, w, b: F.layer_norm(x, (5,), w, b), a, w, b),
         (r(3, 1, 5), r(5), r(5))),
        ("transpose_view", lambda a: (a.t().reshape(-1), a.view(3, 5).unsqueeze(1).expand(3, 2, 5)), (r(5, 3),)),
        ("reshape_factor", lambda a: (a.reshape(2, 3, 5), a.reshape(5, 6), a.flatten()), (r(6, 5),)),
        ("cat_stack", lambda a, b: (torch.cat([a, b], 0), torch.stack([a, a], 1)), (r(3, 5), r(1, 5))),
        ("split_select", lambda a: (torch.split(a, 2, 1)[2], a[:, 1], a[1:4:2]), (r(5, 5),)),
        ("gelu_where", lambda a, b: grad_of(lambda x, y: torch.where(x > 0, F.gelu(x), y), a, b), (r(5, 3), r(5, 3))),
        ("cross_entropy_ignore", lambda x, t: grad_of(lambda x: F.cross_entropy(x, t, ignore_index=1), x),
         (r(7, 5), torch.tensor([0, 1, 4, 2, 1, 3, 0]))),
        ("embedding_odd", lambda w, i: grad_of(lambda w: F.embedding(i, w), w), (r(7, 3), torch.tensor([[0, 6, 2]]))),
        ("cumsum_odd", lambda a: grad_of(lambda x: torch.cumsum(x, 1), a), (r(3, 5),)),
        ("casts", lambda a: (a.to(torch.float32), (a > 0).to(torch.int64), a.to(torch.float32).to(torch.float64)),
         (r(3, 5),)),
        ("factories", lambda a: (torch.zeros_like(a), torch.ones(3, 5, dtype=a.dtype), a.new_zeros(5, 1),
                                 torch.full_like(a, 2.0), torch.arange(5)), (r(3, 5),)),
        ("conv_odd", lambda x, w: grad_of(lambda x, w: F.conv2d(x, w, padding=1), x, w), (r(3, 2, 5, 5), r(5, 2, 3, 3))),
        # monotone ops carry P(max)/P(min) (kinds swapped when non-increasing)
        ("monotone", lambda a: (torch.exp(a), torch.tanh(a), torch.sigmoid(a), torch.floor(a * 3), torch.erfc(a),
                                a * -2.0, 3.0 - a, torch.clamp(a, -0.5, 0.5), F.leaky_relu(a), F.softplus(a),
                                F.hardtanh(a), torch.sign(a), torch.atan(a), a / -4.0, (a * 3).to(torch.int64)),
         (r(3, 5),)),
        ("monotone_binary", lambda a, b: (a - b, torch.rsub(a, b), torch.add(a, b, alpha=-2)), (r(3, 5), r(5))),
        # ops of the front-door model zoo (transformers, timm, torchtitan-style models)
        ("dropout", lambda a: grad_of(lambda x: torch.ops.aten.native_dropout(x, 0.3, True)[0], a), (r(4, 6),)),
        ("safe_softmax", lambda a: torch.ops.aten._safe_softmax(a, -1), (r(3, 5),)),
        ("pad", lambda a: grad_of(lambda x: F.pad(x, (1, 2)), a) + (F.pad(a, (0, 0, 1, 0), value=-1.5),), (r(4, 5),)),
        ("index_gather", lambda w, i, j: grad_of(lambda w: w[i], w) + (w[i.view(-1, 1), j.view(1, -1)],),
         (r(6, 4), torch.tensor([5, 0, 2, 2, 1]), torch.tensor([3, 0, 1]))),
        ("index_put", lambda a, i, v: (a.index_put((i,), v, accumulate=True), a.index_put((i,), v)),
         (r(6, 4), torch.tensor([4, 0, 2, 5]), r(4, 4))),
        ("histc", lambda a: (torch.histc(a, bins=5, min=-2, max=2),), (r(4, 6),)),
        # T5 shifting labels into decoder inputs (functional forms, as in joint graphs);
        # a broadcast and a widening copy; DropPath's keep mask
        ("shift_scatter", lambda x, y: grad_of(lambda x, y: (torch.ops.aten.slice_scatter(x, y[:, :-1], 1, 1)
                                                             + torch.ops.aten.select_scatter(x, y[:, 2], 1, 0)), x, y),
         (r(5, 4), r(5, 4))),
        ("shift_scatter_ints", lambda x, y: (torch.ops.aten.slice_scatter(x, y[::2], 0, 0, None, 2),
                                             torch.ops.aten.select_scatter(x, y[1], 0, -1)),
         (torch.randint(-9, 9, (5, 3)), torch.randint(-9, 9, (5, 3)))),
        ("copy_fill", lambda x, y, v: (torch.ops.aten.copy(x, y), torch.ops.aten.copy(x, y[0].float()),
                                       torch.ops.aten.fill.Tensor(x, v), torch.ops.aten.fill.Tensor(x.long(), v)),
         (r(3, 5), r(3, 5), r(()))),
        ("bernoulli_p", lambda a: (torch.ops.aten.bernoulli.p(a, 0.7),), (r(5, 3),)),
        # ConvNeXt's pooling head: strided views that are reshapes (shardable) and one that is not
        ("as_strided", lambda a, b: (torch.ops.aten.as_strided(a.reshape(-1), (4, 6), (6, 1), 0),
                                     torch.ops.aten.as_strided_scatter(a.reshape(-1), b, (4, 6), (6, 1), 0),
                                     torch.ops.aten.as_strided(a, (4, 6, 1), (6, 1, 7)),
                                     torch.ops.aten.as_strided(a, (3, 2), (1, 4), 1)), (r(4, 6), r(4, 6))),
        ("complex_rope", lambda x, f: grad_of(lambda x: torch.view_as_real(torch.view_as_complex(x) * f), x),
         (r(4, 3, 2), torch.polar(torch.ones(3, dtype=torch.float64), torch.arange(3, dtype=torch.float64)))),
    ] + _grouped_mm_programs(grad_of)


def _grouped_mm_programs(grad_of):
    """torch._grouped_mm computes float32 on CPU (not float64), and transformers' fallback of it
    exists only once transformers registered it."""
    f = lambda *s: torch.randn(*s, dtype=torch.float32)  # noqa: E731
    offs = torch.tensor([2, 2, 6], dtype=torch.int32)
    out = [("grouped_mm", lambda x, w, o: (torch._grouped_mm(x, w, offs=o),), (f(6, 8), f(3, 8, 8), offs))]
    try:
        import transformers.integrations.moe  # noqa: F401  (registers transformers::grouped_mm_fallback)
    except ImportError:
        return out
    if hasattr(torch.ops, "transformers") and hasattr(torch.ops.transformers, "grouped_mm_fallback"):
        d = lambda *s: torch.randn(*s, dtype=torch.float64)  # noqa: E731
        op = torch.ops.transformers.grouped_mm_fallback
        out.append(("grouped_mm_fallback", lambda x, w, o: grad_of(lambda x, w: op(x, w, offs=o), x, w),
                    (d(6, 4), d(3, 4, 5), offs)))
    return out


def _direct_programs():
    """Overloads that tracing to aten decomposes or that no OpInfo sample reaches, called
    directly and traced at pre-dispatch level (where they stay whole)."""
    import torch.nn.functional as F

    a_ = torch.ops.aten
    r = lambda *s: torch.randn(*s, dtype=torch.float64)  # noqa: E731
    i = lambda *s: torch.randint(-20, 20, s)  # noqa: E731
    return [
        ("aliases", lambda a: (a_.alias.default(a), a_.contiguous.default(a), a_.lift_fresh_copy.default(a)),
         (r(3, 4),)),
        ("scalar_ops", lambda a, b, w: (a_.div.Scalar_mode(a, 3, rounding_mode="floor"), a_.fmod.Scalar(a, 2.5),
                                        a_.remainder.Scalar(a, 2.5), a_.xlogy.Scalar_Other(a.abs(), 2.0),
                                        a_.lerp.Tensor(a, b, w), a_.clamp_max.default(a, 0.3)),
         (r(3, 4), r(3, 4), r(3, 4))),
        ("bool_reductions", lambda a: (a_.all.dims(a > 0, [0]), a_.any.dims(a > 0, [1])), (r(3, 4),)),
        ("bitwise", lambda x, y: (a_.bitwise_and.Scalar(x, 6), a_.bitwise_or.Scalar(x, 5), a_.bitwise_or.Tensor(x, y),
                                  a_.bitwise_xor.Tensor(x, y), a_.bitwise_left_shift.Tensor(x.abs() % 4, y.abs() % 3),
                                  a_.bitwise_right_shift.Tensor(x.abs(), y.abs() % 3)), (i(3, 4), i(3, 4))),
        ("arange_sort", lambda a: (a_.arange.start(1, 7), a_.sort.stable(a, stable=True, dim=1)), (r(3, 5),)),
        ("nll_loss2d", lambda x, t: (a_.nll_loss2d_forward.default(x, t, None, 1, -100),),
         (torch.log_softmax(r(2, 3, 4, 5), 1), torch.randint(0, 3, (2, 4, 5)))),
        ("nll_loss2d_backward", lambda g, x, t, w: (a_.nll_loss2d_backward.default(g, x, t, None, 1, -100, w),),
         (r(()), torch.log_softmax(r(2, 3, 4, 5), 1), torch.randint(0, 3, (2, 4, 5)), torch.tensor(40.0,
                                                                                                  dtype=torch.float64))),
        ("batch_norm_variants", lambda x, w, b, m, v: (
            a_._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
            a_._native_batch_norm_legit_no_training.default(x, w, b, m, v, 0.1, 1e-5)),
         (r(4, 3, 5), r(3), r(3), r(3), r(3).abs() + 0.5)),
        ("fused_rms_norm", lambda x, w: a_._fused_rms_norm.default(x, [6], w, 1e-6), (r(3, 4, 6), r(6))),
        ("sdpa_math", lambda q, k, v: (a_._scaled_dot_product_attention_math.default(q, k, v, None, 0.0, True)[0],),
         (r(2, 3, 5, 4), r(2, 3, 5, 4), r(2, 3, 5, 4))),
        ("functional_nll2d", lambda x, t: (F.nll_loss(x, t),), (torch.log_softmax(r(2, 3, 4, 5), 1),
                                                                torch.randint(0, 3, (2, 4, 5)))),
    ]


def _hand_cases(seed: int) -> list:
    from ._torch_private import make_fx

    cases = []
    torch.manual_seed(seed)  # the programs' inputs are drawn from the global generator
    for pre_dispatch, programs in ((False, _hand_programs()), (True, _direct_programs())):
        for name, fn, inputs in programs:
            inputs = tuple(x.clone() for x in inputs)
            gm = make_fx(fn, pre_dispatch=pre_dispatch)(*inputs)
            cases += cases_from_graph(gm, [x.clone() for x in inputs], f"hand:{name}")
    return cases


# Rules no CPU instance can exercise (their kernels run on CUDA only), with the reason.
CUDA_ONLY_OPS = {
    "aten._fused_rms_norm_backward.default": "no CPU kernel (CPU autograd decomposes rms_norm)",
    "aten._scaled_dot_product_flash_attention.default": "flash attention has a CUDA kernel only",
    "aten._scaled_dot_product_flash_attention_backward.default": "flash attention has a CUDA kernel only",
    "aten._scaled_dot_product_efficient_attention.default": "memory-efficient attention has a CUDA kernel only",
    "aten._scaled_dot_product_efficient_attention_backward.default": "memory-efficient attention has a CUDA kernel only",
}

# Higher-order ops take subgraph arguments, which these single-op cases cannot carry; their
# rules are checked strategy by strategy against the unsharded op in the named test.
VERIFIED_BY_TESTS = {
    "higher_order.flex_attention": "test/python/test_flex_attention.py checks every strategy on a (2, 2) mesh",
    "higher_order.flex_attention_backward": "no CPU backward (torch 2.13); its GPU test is in "
                                            "test/python/test_flex_attention.py",
}


def _opinfo_cases(wanted: set, seed: int, samples_per_op: int = 2) -> tuple[list, str]:
    """Instances of the ops in `wanted` from torch's OpInfo sample inputs, traced like the
    hand programs: first to aten (forward, and the backward ops through autograd), then
    for ops that tracing decomposes (reshape, square, ...) at pre-dispatch level, where they
    stay whole. Returns (cases, note): the note says why no OpInfo could be used (then the
    caller reports it loudly)."""
    from ._torch_private import opinfo_database

    try:
        db = opinfo_database()
    except ImportError as e:
        return [], f"torch's OpInfo database is not importable ({e}); install expecttest"
    with warnings.catch_warnings():  # deprecation notices of the sampled ops are not ours to show
        warnings.simplefilter("ignore")
        cases = [c for c in _opinfo_pass(db, wanted, seed, samples_per_op, pre_dispatch=False) if c.op in wanted]
        left = wanted - {c.op for c in cases}
        if left:
            cases += [c for c in _opinfo_pass(db, left, seed, samples_per_op, pre_dispatch=True) if c.op in left]
    return cases, ""


def _opinfo_pass(db, wanted: set, seed: int, samples_per_op: int, pre_dispatch: bool) -> list:
    from ._torch_private import make_fx

    bases = {op.split(".")[1].lstrip("_") for op in wanted}
    cases = []
    torch.manual_seed(seed)
    for info in db:
        name = info.name.replace("nn.functional.", "").replace(".", "_")
        if not any(b and (b == name or b in name or name in b) for b in bases):
            continue
        dtype = next((d for d in (torch.float64, torch.int64, torch.bool) if d in info.dtypes), None)
        if dtype is None:
            continue
        diff = info.supports_autograd and not pre_dispatch and dtype.is_floating_point
        try:
            # Run to the end here, outside tracing: a half-consumed generator (or one it
            # delegates to) collected later would run its cleanup under whatever trace is
            # active then (a no_grad exit inside make_fx).
            samples = list(info.sample_inputs("cpu", dtype, requires_grad=diff))[:samples_per_op]
        except Exception:  # noqa: BLE001  (a sample generator that needs more than CPU float64)
            continue
        for sample in samples:
            leaves, spec = torch.utils._pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
            tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
            values = [leaves[i].detach().clone() for i in tensors]

            def program(*ts, _leaves=leaves, _tensors=tensors, _spec=spec, _op=info.op, _diff=diff):
                flat = list(_leaves)
                for k, i in enumerate(_tensors):
                    flat[i] = ts[k]
                x, args, kwargs = torch.utils._pytree.tree_unflatten(flat, _spec)
                out = _op(x, *args, **kwargs)
                outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
                grads = ()
                need = [t for t in ts if t.requires_grad]
                floating = [o for o in outs if o.is_floating_point() and o.requires_grad]
                if _diff and need and floating:
                    g = [torch.cos(torch.arange(o.numel(), dtype=o.dtype) * 1.3).reshape(o.shape) for o in floating]
                    grads = tuple(x for x in torch.autograd.grad(floating, need, g, allow_unused=True)
                                  if x is not None)
                return tuple(outs) + grads

            try:
                inputs = [v.requires_grad_() if diff and v.is_floating_point() else v for v in values]
                gm = make_fx(program, pre_dispatch=pre_dispatch)(*inputs)
                cases += cases_from_graph(gm, [v.detach().clone() for v in values], f"opinfo:{info.name}")
            except Exception:  # noqa: BLE001  (samples torch itself marks as failing for some ops)
                continue
    return cases


def unverified_rules(cases: list) -> dict:
    """{op: why} for ops with a C++ rule but no verification case among `cases`."""
    have = {c.op for c in cases}
    out = {}
    for op in _C.ops_with_rules():
        if op in have or op in VERIFIED_BY_TESTS:
            continue
        out[op] = CUDA_ONLY_OPS.get(op, "no instance of the op in the reference models, the hand-made programs "
                                        "or torch's OpInfo samples")
    return out


def schema_mismatches(records) -> list:
    """Lines for rule argument reads whose (position, name) disagree with the op's real schema.

    `records` are `_C.arg_audit_records()` triples (op, position, name): rules read an
    argument by name, and its position comes from the checked-in op_schemas.inc; torch
    (its FunctionSchema, or a higher-order op's signature) is the authority on both.
    """
    from ._op_schemas import load_op_libraries, op_arguments

    load_op_libraries()
    out = []
    for op, pos, name in records:
        if op.startswith(("localmap.", "tlm.")) or "." not in op:
            continue  # our own graph nodes (regions, markers) have no aten schema
        args = op_arguments(op)
        if args is None:
            out.append(f"{op}: rule reads argument {name!r} at position {pos}, but torch has no such op")
            continue
        actual = args[pos].name if pos < len(args) else None
        if actual != name:
            where = f"is {actual!r}" if actual is not None else f"does not exist ({len(args)} arguments)"
            out.append(f"{op}: rule reads argument {name!r} at position {pos}; the schema's argument {pos} {where}")
    return out


def collect_cases(seed: int = 0, op_filter: str | None = None, sources=("models", "edge", "hand", "opinfo"),
                  max_per_op: int = 6) -> list:
    """Distinct op instances (op, arguments, input shapes/dtypes) with real input values.

    At most `max_per_op` instances per op (0: all), picked round-robin over input
    rank/dtype signatures with edge and hand-made shapes first, so each op keeps its
    most different instances and the default run stays CI-fast.
    """
    by_op = {}
    for c in _distinct_cases(seed, tuple(sources)):
        if not op_filter or op_matches(c.op, op_filter):
            by_op.setdefault(c.op, []).append(c)
    out = []
    for op in sorted(by_op):
        out += _diverse(by_op[op], max_per_op)
    return out


@functools.lru_cache(maxsize=4)
def _distinct_cases(seed: int, sources: tuple) -> tuple:
    """All distinct instances, traced once per process (tracing dominates collection time).
    Callers must not mutate the cases' tensors (verification only reads them)."""
    from . import models

    torch.manual_seed(seed)
    cases = []
    if "edge" in sources:
        for name, cfg, batch in edge_configs():
            cases += _model_cases(name, cfg, batch, seed, f"edge:{name}")
    if "hand" in sources:
        cases += _hand_cases(seed)
    if "models" in sources:
        for name in models.REGISTRY:
            cfg = models.tiny_config(name)
            if hasattr(cfg, "n_layers"):  # one layer holds every op of the stack
                cfg = dataclasses.replace(cfg, n_layers=1)
            cases += _model_cases(name, cfg, 2, seed, name)
    if "opinfo" in sources:  # the rules nothing above reached
        wanted = set(_C.ops_with_rules()) - {c.op for c in cases} - set(CUDA_ONLY_OPS) - set(VERIFIED_BY_TESTS)
        extra, note = _opinfo_cases(wanted, seed)
        if note:
            raise RuntimeError(f"verify-strategies: {note} ({len(wanted)} rules would go unverified)")
        cases += extra
    seen, out = set(), []
    for c in cases:
        key = _case_key(c)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return tuple(out)


def _diverse(cases: list, limit: int) -> list:
    if limit <= 0 or len(cases) <= limit:
        return cases
    groups = {}
    for c in cases:
        groups.setdefault(tuple((t.dim(), str(t.dtype)) for t in c.inputs), []).append(c)
    picked, queues = [], [list(g) for g in groups.values()]
    while len(picked) < limit:
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return picked


def op_matches(op: str, name: str) -> bool:
    """--op accepts "aten.mm.default", "aten.mm", "mm" or "mm.default"."""
    parts = op.split(".")
    short = parts[1] if len(parts) > 1 else op
    return name in (op, short, ".".join(parts[:2]), ".".join(parts[1:]))


# ------------------------------------------------------------------ placements -> tensors

def _spec_parts(spec: str) -> list:
    """"S(0)RP(sum)" -> [("S", 0), ("R", None), ("P", "sum")]; the C++ spelling, parsed for tensor building only."""
    canon = _C.normalize_spec(spec)
    parts, i = [], 0
    while i < len(canon):
        if canon[i] == "R":
            parts.append(("R", None))
            i += 1
        else:
            j = canon.index(")", i)
            inner = canon[i + 2:j]
            parts.append((canon[i], int(inner) if canon[i] == "S" else inner))
            i = j + 1
    return parts


class Layouts:
    """Local shapes/offsets of every rank from C++ (`_C.local_layouts`, row-major ranks),
    one call per (global shape, mesh, spec), cached."""

    def __init__(self):
        self._cache = {}

    def __call__(self, shape, mesh_shape, spec, coord):
        key = (tuple(shape), tuple(mesh_shape), spec)
        per_rank = self._cache.get(key)
        if per_rank is None:
            per_rank = [(list(s), list(o)) for s, o in _C.local_layouts(list(shape), list(mesh_shape), spec)]
            self._cache[key] = per_rank
        rank = 0
        for c, n in zip(coord, mesh_shape):
            rank = rank * n + c
        return per_rank[rank]


def _slice(t: torch.Tensor, shape, offset) -> torch.Tensor:
    idx = tuple(slice(o, o + s) for o, s in zip(offset, shape))
    return t[idx] if idx else t


# Mantissa bits (with the implicit one) of float dtypes: a value is m * 2**e with |m| < 2**bits.
_MANTISSA_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


def _exact_float_split(value: torch.Tensor, n: int, reduce: str, gen: torch.Generator) -> list:
    """n pieces of `value`'s dtype whose exact (real-number) sum is `value` (sum) or n * `value` (avg).

    Random float noise would make the last piece `value - sum(noise)` round in the value's
    dtype, so a float32 Partial would already be off by ~1e-7 before the op runs (a widening
    cast to float64 would then fail a fair float64 comparison). Instead each element
    value = m * 2**e (|m| < 2**bits) is split as integers: k_1 + ... + k_n = m (or n * m) with
    every |k_i| < 2**bits, drawn at random, so every piece k_i * 2**e is representable exactly.
    """
    bits = _MANTISSA_BITS.get(value.dtype)
    if bits is None:
        raise ValueError(f"Partial placement of a {value.dtype} tensor")
    v = value.to(torch.float64)
    mant, exp = torch.frexp(v)  # v = mant * 2**exp, 0.5 <= |mant| < 1
    # zeros still get nonzero pieces, at the scale of the largest entry
    big = float(v.abs().max()) if v.numel() else 1.0
    zero_exp = int(torch.frexp(torch.tensor(big or 1.0, dtype=torch.float64))[1])
    exp = torch.where(v == 0, torch.full_like(exp, zero_exp), exp)
    e = exp.to(torch.int64) - bits  # value is a multiple of 2**e (dtypes below float64 are exact in float64)
    m = torch.ldexp(v, -e).round().to(torch.int64)
    bound = (1 << bits) - 1
    remaining = m * n if reduce == "avg" else m
    ks = []
    for i in range(n - 1):
        left = n - 1 - i  # pieces still to come after this one must cover what remains
        lo = torch.clamp(remaining - bound * left, min=-bound)
        hi = torch.clamp(remaining + bound * left, max=bound)
        u = torch.rand(value.shape, dtype=torch.float64, generator=gen)
        k = lo + torch.minimum(torch.floor(u * (hi - lo + 1).to(torch.float64)).to(torch.int64), hi - lo)
        ks.append(k)
        remaining = remaining - k
    ks.append(remaining)
    return [torch.ldexp(k.to(torch.float64), e).to(value.dtype) for k in ks]


def _split(value: torch.Tensor, n: int, reduce: str, gen: torch.Generator) -> list:
    """n tensors whose `reduce` over the list equals `value` elementwise, exactly."""
    if n == 1:
        return [value.clone()]
    if value.is_complex():  # real and imaginary parts split alike (sum/avg only: no order on complex numbers)
        if reduce not in ("sum", "avg"):
            raise ValueError(f"Partial({reduce}) of a complex tensor")
        return [torch.view_as_complex(p.contiguous()) for p in _split(torch.view_as_real(value), n, reduce, gen)]
    if value.dtype == torch.bool:
        raise ValueError("Partial placement of a bool tensor")
    is_float = value.is_floating_point()
    if reduce in ("sum", "avg"):
        if is_float:
            return _exact_float_split(value, n, reduce, gen)
        total = value * n if reduce == "avg" else value
        pieces = [torch.randint(-5, 6, value.shape, dtype=value.dtype, generator=gen) for _ in range(n - 1)]
        return pieces + [total - sum(pieces)]
    if reduce in ("max", "min"):
        # One random owner per element keeps the exact value; the others are lower (max) or
        # higher (min; rounding is monotone, so never past the value), so the reduction gives
        # the value back exactly.
        owner = torch.randint(0, n, value.shape, generator=gen)
        sign = -1 if reduce == "max" else 1
        out = []
        for i in range(n):
            if is_float:
                scale = float(value.abs().max()) if value.numel() else 1.0
                shift = torch.randn(value.shape, dtype=value.dtype, generator=gen).abs() * (scale or 1.0)
            else:
                shift = torch.randint(1, 7, value.shape, dtype=value.dtype, generator=gen)
            out.append(torch.where(owner == i, value, value + sign * shift))
        return out
    raise ValueError(f"unknown partial reduce '{reduce}'")


def local_inputs(value: torch.Tensor, spec: str, mesh_shape, layouts: Layouts, gen) -> dict:
    """coord -> local tensor for a global `value` in placement `spec`.

    A rank's tensor depends only on its coordinates along the Shard mesh dims (which slice)
    and the Partial mesh dims (which piece): ranks that differ only along Replicate mesh dims
    are replicas and hold identical tensors, as they would on a real mesh.
    """
    parts = _spec_parts(spec)
    coords = list(itertools.product(*[range(n) for n in mesh_shape]))
    partial_dims = [m for m, (k, _) in enumerate(parts) if k == "P"]
    shard_dims = [m for m, (k, _) in enumerate(parts) if k == "S"]
    # Pieces per shard position: slice first, then split; splitting is elementwise, so the
    # reduction over a Partial group gives back the slice.
    shard_pieces = {}
    out = {}
    for c in coords:
        key = tuple(c[m] for m in shard_dims)
        if key not in shard_pieces:
            shape, offset = layouts(value.shape, mesh_shape, spec, c)
            tree = {(): _slice(value, shape, offset)}
            for m in partial_dims:  # one split per Partial mesh dim, nested in mesh-dim order
                nxt = {}
                for k, v in tree.items():
                    for i, piece in enumerate(_split(v, mesh_shape[m], parts[m][1], gen)):
                        nxt[k + (i,)] = piece
                tree = nxt
            shard_pieces[key] = tree
        out[c] = shard_pieces[key][tuple(c[m] for m in partial_dims)].clone()
    return out


def _reduce(tensors: list, how: str) -> torch.Tensor:
    """The Partial reduction; float sums accumulate in float64 so exact pieces reassemble exactly."""
    stacked = torch.stack(tensors)
    if stacked.is_complex() and how in ("sum", "avg"):
        return torch.view_as_complex(_reduce([torch.view_as_real(t.resolve_conj()) for t in tensors], how).contiguous())
    if how in ("sum", "avg"):
        acc = stacked.to(torch.float64) if stacked.is_floating_point() else stacked
        if how == "sum":
            return acc.sum(0).to(stacked.dtype)
        return acc.mean(0).to(stacked.dtype) if stacked.is_floating_point() else acc.sum(0) // len(tensors)
    if how == "max":
        return stacked.amax(0)
    if how == "min":
        return stacked.amin(0)
    raise ValueError(f"unknown partial reduce '{how}'")


def assemble(locals_by_coord: dict, global_shape, dtype, spec: str, mesh_shape, layouts: Layouts):
    """Global tensor from per-coordinate outputs, or (None, reason) when they are inconsistent."""
    parts = _spec_parts(spec)
    partial_dims = [m for m, (k, _) in enumerate(parts) if k == "P"]
    groups = {}
    for c, t in locals_by_coord.items():
        shape, offset = layouts(global_shape, mesh_shape, spec, c)
        if list(t.shape) != list(shape):
            return None, f"coord {list(c)}: local output shape {list(t.shape)}, expected {shape}"
        if t.dtype != dtype:
            return None, f"coord {list(c)}: local output dtype {t.dtype}, expected {dtype}"
        key = tuple(c[m] for m in range(len(c)) if m not in partial_dims)
        groups.setdefault(key, (shape, offset, {}))[2][tuple(c[m] for m in partial_dims)] = t
    result = torch.zeros(global_shape, dtype=dtype)
    written = torch.zeros(global_shape, dtype=torch.bool)
    for key, (shape, offset, members) in groups.items():
        # reduce Partial mesh dims innermost first: each is a reduction over one mesh dim
        vals = members
        for level in range(len(partial_dims) - 1, -1, -1):
            how = parts[partial_dims[level]][1]
            merged = {}
            for k, v in vals.items():
                merged.setdefault(k[:level], []).append((k[level], v))
            vals = {k: _reduce([v for _, v in sorted(lst, key=lambda p: p[0])], how) for k, lst in merged.items()}
        value = vals[()]
        region = tuple(slice(o, o + s) for o, s in zip(offset, shape))
        if region and value.numel() == 0:
            continue
        prev_written = written[region] if region else written
        if bool(prev_written.any()):
            prev = result[region] if region else result
            if not _close(value, prev):
                return None, f"replicas disagree at coord group {list(key)} (region offset {offset})"
            continue
        if region:
            result[region] = value
            written[region] = True
        else:
            result, written = value.clone(), torch.ones((), dtype=torch.bool)
    if not bool(written.all()):
        return None, "the output shards do not cover the global tensor"
    return result, ""


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the rounding of b's dtype (Partial pieces are exact, see _split)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        rtol, atol = TOLERANCE.get(b.dtype, (RTOL, ATOL))
        scale = float(b.abs().max()) if b.numel() else 0.0
        return torch.allclose(a, b, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True)
    return torch.equal(a, b)


# Cases run in float64; ops that compute in a narrower dtype (casts inside norms) round
# per shard differently from the whole (other summation order), so the bound follows the
# output dtype.
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-2, 2e-2), torch.bfloat16: (5e-2, 5e-2)}


# ------------------------------------------------------------------------ verification

def _op_callable(op: str):
    ns, name, overload = op.split(".", 2) if op.count(".") >= 2 else (*op.split("."), "default")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload)


def _outputs_of(result, node: dict) -> list:
    if isinstance(result, torch.Tensor):
        return [result]
    positions = (node.get("extra") or {}).get("output_positions")
    if positions is None:
        positions = [i for i, r in enumerate(result) if isinstance(r, torch.Tensor)]
    return [result[p] for p in positions]


@dataclass
class CaseResult:
    strategies: int = 0
    failures: list = field(default_factory=list)
    family: str = ""
    fell_back: bool = False
    skipped: str = ""


def enumerate_case(case: OpCase, mesh_shape) -> dict:
    """Every rule row of the case's node (no planner pruning of Partial inputs)."""
    doc = json.dumps(case.doc(mesh_shape), separators=(",", ":"))
    return json.loads(_C.enumerate_strategies(doc, True, False))[case.node_index]


def verify_case(case: OpCase, mesh_shape, seed: int = 0, strategies: list | None = None,
                layouts: Layouts | None = None) -> CaseResult:
    """Checks every strategy C++ emits for `case` on `mesh_shape` (or the given `strategies`)."""
    res = CaseResult()
    if case.op in EXCLUDED_OPS:
        res.skipped = EXCLUDED_OPS[case.op]
        return res
    layouts = layouts or Layouts()
    ir_json = json.dumps(case.doc(mesh_shape), separators=(",", ":"))
    if strategies is None:
        try:
            # prune_partials=False: on a one-op graph the placeholders never emit a Partial, so
            # the planner's pruning would hide every Partial-input row of the rule.
            entry = json.loads(_C.enumerate_strategies(ir_json, True, False))[case.node_index]
        except (ValueError, RuntimeError) as e:
            res.failures.append(f"FAIL {case.describe()} mesh={list(mesh_shape)}: enumerate_strategies raised "
                                f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            return res
        res.family, res.fell_back = entry.get("family", ""), bool(entry.get("fell_back"))
        strategies = entry["strategies"]
        if res.fell_back:  # replicate-only: no rule to verify
            return res
    fn = _op_callable(case.op)
    ref_args, ref_kwargs = _decode(case.node, case.inputs)
    random = is_random(case.op)
    rng_seed = seed + 7919
    if random:
        torch.manual_seed(rng_seed)
    ref_outs = _outputs_of(fn(*ref_args, **ref_kwargs), case.node)
    if case.op in SHAPE_ONLY_OPS:
        ref_outs = [torch.zeros_like(o) for o in ref_outs]
    coords = list(itertools.product(*[range(n) for n in mesh_shape]))
    gen = torch.Generator().manual_seed(seed)
    local_cache = {}
    for s in strategies:
        res.strategies += 1
        label = f"{case.describe()} strategy in={s['inputs']} out={s['outputs']} mesh={list(mesh_shape)}"
        try:
            per_input = []
            for i, (value, spec) in enumerate(zip(case.inputs, s["inputs"])):
                key = (i, spec)
                if key not in local_cache:
                    local_cache[key] = local_inputs(value, spec, mesh_shape, layouts, gen)
                per_input.append(local_cache[key])
            s_json = json.dumps(s)
            outs_by_coord = [dict() for _ in ref_outs]
            for c in coords:
                call = json.loads(_C.local_call_args(ir_json, case.node_index, s_json, list(c)))
                locals_ = [per_input[i][c] for i in range(len(case.inputs))]
                args = decode_arg(call["args"], lambda r: locals_[r[0]])
                kwargs = {k: decode_arg(v, lambda r: locals_[r[0]]) for k, v in call["kwargs"].items()}
                if random:  # the same generator state as the reference: the same global numbers
                    torch.manual_seed(rng_seed)
                    out_shapes = [o["shape"] for o in case.node["outputs"]]
                    result = run_sharded(case.op, fn, args, kwargs, out_shapes, s["outputs"], mesh_shape, c)
                else:
                    result = fn(*args, **kwargs)
                outs = _outputs_of(result, case.node)
                if case.op in SHAPE_ONLY_OPS:  # uninitialized memory: only shapes and dtypes count
                    outs = [torch.zeros_like(o) for o in outs]
                for j, o in enumerate(outs):
                    outs_by_coord[j][c] = o
            for j, (ref, spec) in enumerate(zip(ref_outs, s["outputs"])):
                got, why = assemble(outs_by_coord[j], list(ref.shape), ref.dtype, spec, mesh_shape, layouts)
                if got is None:
                    res.failures.append(f"FAIL {label}: output {j}: {why}")
                    break
                if case.op in SHAPE_ONLY_OPS:
                    continue
                if not _close(got, ref):
                    err = (got.double() - ref.double()).abs().max().item() if ref.numel() else 0.0
                    res.failures.append(f"FAIL {label}: output {j} differs from the global op (max abs err {err:.3g})")
                    break
        except Exception as e:  # a strategy whose local call raises is a failed strategy
            res.failures.append(f"FAIL {label}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return res


def _decode(node: dict, inputs: list):
    args = decode_arg(node["args"], lambda r: inputs[r[0]])
    kwargs = {k: decode_arg(v, lambda r: inputs[r[0]]) for k, v in node["kwargs"].items()}
    return args, kwargs


def parse_mesh(text: str) -> tuple:
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--mesh must look like 2x2 or 2x1x2, got '{text}'") from None
    if not shape or any(n <= 0 for n in shape) or len(shape) > 4:
        raise ValueError(f"--mesh needs 1 to 4 positive sizes, got '{text}'")
    return shape


DEFAULT_MESHES = ((2,), (2, 2), (2, 1, 2), (3, 2))


@dataclass
class MeshReport:
    mesh: tuple
    ops: set = field(default_factory=set)
    strategies: int = 0
    failures: list = field(default_factory=list)
    fallback_ops: set = field(default_factory=set)
    per_family: dict = field(default_factory=dict)  # family -> [cases, strategies, failures]


def verify_cases(cases: list, mesh_shape, seed: int = 0) -> MeshReport:
    rep = MeshReport(mesh=tuple(mesh_shape))
    layouts = Layouts()
    for i, case in enumerate(cases):
        if case.op in EXCLUDED_OPS:
            continue
        r = verify_case(case, mesh_shape, seed=seed * 1000003 + i, layouts=layouts)
        if r.fell_back:
            rep.fallback_ops.add(case.op)
            continue
        rep.ops.add(case.op)
        rep.strategies += r.strategies
        rep.failures += r.failures
        fam = rep.per_family.setdefault(r.family or "?", [0, 0, 0])
        fam[0] += 1
        fam[1] += r.strategies
        fam[2] += len(r.failures)
    return rep
