"""Cases from small hand-made one-op programs: edge shapes the models do not produce, and
overloads that tracing decomposes (called directly, traced at pre-dispatch level)."""
from __future__ import annotations

import torch

from .op_case import cases_from_graph


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
        # an antialiased resize (a position embedding to another image size), not decomposed
        ("resize_bicubic_aa", lambda a: grad_of(lambda x: F.interpolate(x, size=(5, 3), mode="bicubic", antialias=True),
                                               a), (r(2, 4, 7, 6),)),
        ("resize_bilinear_aa", lambda a: grad_of(lambda x: F.interpolate(x, size=(3, 5), mode="bilinear",
                                                                         antialias=True), a), (r(2, 4, 7, 6),)),
        # sliding windows (time-series patches) and a log-sigmoid loss (SigLIP's)
        ("unfold", lambda a: grad_of(lambda x: x.unfold(1, 3, 2), a), (r(4, 7, 5),)),
        ("log_sigmoid", lambda a: grad_of(F.logsigmoid, a), (r(4, 6),)),
        # channel shards must hold whole groups (4 groups of 2 channels); odd batch and no affine
        ("group_norm", lambda x, w, b: grad_of(lambda x, w, b: F.group_norm(x, 4, w, b), x, w, b),
         (r(4, 8, 3, 2), r(8), r(8))),
        ("group_norm_plain", lambda x: grad_of(lambda x: F.group_norm(x, 3), x), (r(3, 6, 5),)),
        ("transpose_view", lambda a: (a.t().reshape(-1), a.view(3, 5).unsqueeze(1).expand(3, 2, 5)), (r(5, 3),)),
        ("reshape_factor", lambda a: (a.reshape(2, 3, 5), a.reshape(5, 6), a.flatten()), (r(6, 5),)),
        ("cat_stack", lambda a, b: (torch.cat([a, b], 0), torch.stack([a, a], 1)), (r(3, 5), r(1, 5))),
        ("split_select", lambda a: (torch.split(a, 2, 1)[2], a[:, 1], a[1:4:2]), (r(5, 5),)),
        ("gelu_where", lambda a, b: grad_of(lambda x, y: torch.where(x > 0, F.gelu(x), y), a, b), (r(5, 3), r(5, 3))),
        ("cross_entropy_ignore", lambda x, t: grad_of(lambda x: F.cross_entropy(x, t, ignore_index=1), x),
         (r(7, 5), torch.tensor([0, 1, 4, 2, 1, 3, 0]))),
        ("embedding_odd", lambda w, i: grad_of(lambda w: F.embedding(i, w), w), (r(7, 3), torch.tensor([[0, 6, 2]]))),
        ("cumsum_odd", lambda a: grad_of(lambda x: torch.cumsum(x, 1), a), (r(3, 5),)),
        # Fourier transforms (FNet's token mixing, spectral layers): real to complex, complex to
        # complex and back to real, each over some dims with others left as a batch
        ("fftn_real_part", lambda a: grad_of(lambda x: torch.fft.fftn(x, dim=(1, 2)).real, a), (r(4, 5, 6),)),
        ("rfft_irfft", lambda a: grad_of(lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=2) * 2, n=6, dim=2), a),
         (r(3, 5, 6),)),
        ("casts", lambda a: (a.to(torch.float32), (a > 0).to(torch.int64), a.to(torch.float32).to(torch.float64)),
         (r(3, 5),)),
        ("factories", lambda a: (torch.zeros_like(a), torch.ones(3, 5, dtype=a.dtype), a.new_zeros(5, 1),
                                 torch.full_like(a, 2.0), torch.arange(5),
                                 a[:, :3] + torch.eye(3, dtype=a.dtype), torch.eye(3, 5, dtype=a.dtype) * a),
         (r(3, 5),)),
        ("conv_odd", lambda x, w: grad_of(lambda x, w: F.conv2d(x, w, padding=1), x, w), (r(3, 2, 5, 5), r(5, 2, 3, 3))),
        # monotone ops carry P(max)/P(min) (kinds swapped when non-increasing)
        ("monotone", lambda a: (torch.exp(a), torch.tanh(a), torch.sigmoid(a), torch.floor(a * 3), torch.erfc(a),
                                a * -2.0, 3.0 - a, torch.clamp(a, -0.5, 0.5), F.leaky_relu(a), F.softplus(a),
                                F.hardtanh(a), torch.sign(a), torch.atan(a), a / -4.0, (a * 3).to(torch.int64)),
         (r(3, 5),)),
        ("monotone_binary", lambda a, b: (a - b, torch.rsub(a, b), torch.add(a, b, alpha=-2)), (r(3, 5), r(5))),
        # ops of the front-door model zoo (transformers, timm, torchtitan-style models)
        # stochastic depth's keep masks (Hugging Face: rand of a size), and draws like a tensor
        ("random_draws", lambda a: (torch.ops.aten.rand.default([3, 5], dtype=torch.float64),
                                    torch.ops.aten.randn.default([4, 2], dtype=torch.float64),
                                    torch.ops.aten.rand_like.default(a),
                                    torch.ops.aten.randn_like.default(a),
                                    torch.ops.aten.exponential.default(a, 2.0),
                                    torch.ops.aten.uniform.default(a, -1.0, 1.0)), (r(3, 5),)),
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
        # Whisper's tiling: new leading dims, dims tiled and dims repeated once, and its gradient
        ("repeat", lambda a: grad_of(lambda x: x.repeat(2, 1, 3, 1), a) + (a.repeat(1, 1, 1),), (r(4, 3, 6),)),
        # interpolate's unchecked gathers as its decomposition writes them (None entries keep
        # batch and channel dims whole) and its backward's scatter; an index list with a gap
        # between its tensors (the result's B first)
        ("upsample", lambda a, h, w: (torch.ops.aten._unsafe_index(a, [None, None, h, w]),
                                      torch.ops.aten._unsafe_index_put(torch.zeros_like(a), [None, None, h, w],
                                                                       a.repeat(1, 1, 2, 2), True)),
         (r(4, 6, 3, 4), torch.tensor([0, 0, 1, 1, 2, 2]).view(6, 1), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))),
        ("index_gaps", lambda a, i, j: (a[:, i], a[i, :, j], a[:, :, j],
                                        torch.ops.aten.index_put(a, [None, i], a[:, i] * 2, True)),
         (r(4, 5, 6), torch.tensor([3, 0, 2]), torch.tensor([5, 1, 1]))),
        ("vector_norm", lambda a: grad_of(lambda x: torch.linalg.vector_norm(x, dim=-1, keepdim=True), a)
         + (torch.linalg.vector_norm(a, ord=float("inf"), dim=(0, 2)), torch.linalg.vector_norm(a)),
         (r(4, 3, 6),)),
        ("new_empty_strided", lambda a: (a.new_empty_strided((4, 6), (6, 1)), a.new_empty_strided((4, 6), (1, 4)),
                                         torch.empty_strided((3, 5), (5, 1), dtype=a.dtype)), (r(3, 5),)),
        # sliding windows as columns and back (TNT's F.unfold): batched and not, channels 6 and 3
        ("unfold_fold", lambda a, b: grad_of(lambda x: F.unfold(x, 2, stride=2), a)
         + (F.fold(F.unfold(b, (2, 3), padding=1), (4, 5), (2, 3), padding=1), F.unfold(a[0], 3, padding=1)),
         (r(4, 6, 4, 6), r(2, 3, 4, 5))),
        # reflection and replication padding (TResNet's anti-aliasing) over 1-3 trailing dims
        ("reflect_replicate_pad", lambda a, b, v: grad_of(lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"), a)
         + grad_of(lambda x: F.pad(x, (2, 1, 1, 0), mode="replicate"), a)
         + grad_of(lambda x: F.pad(x, (1, 2), mode="reflect"), b) + grad_of(lambda x: F.pad(x, (1, 1), mode="replicate"), b)
         + grad_of(lambda x: F.pad(x, (1, 0, 1, 1, 0, 1), mode="reflect"), v)
         + grad_of(lambda x: F.pad(x, (1, 0, 1, 1, 0, 1), mode="replicate"), v),
         (r(4, 3, 5, 6), r(4, 6, 5), r(2, 3, 3, 4, 5))),
        # XLNet's and MoE loops' index_add: rows (dim 0) and columns (dim 1), with alpha
        ("index_add", lambda a, i, src: grad_of(lambda x, y: torch.index_add(x, 0, i, y), a, src)
         + (torch.index_add(a.t(), 1, i, src.t(), alpha=-2.0),), (r(5, 4), torch.tensor([4, 0, 4]), r(3, 4))),
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


def hand_cases(seed: int) -> list:
    from .._torch_private.tracing import make_fx

    cases = []
    torch.manual_seed(seed)  # the programs' inputs are drawn from the global generator
    for pre_dispatch, programs in ((False, _hand_programs()), (True, _direct_programs())):
        for name, fn, inputs in programs:
            inputs = tuple(x.clone() for x in inputs)
            gm = make_fx(fn, pre_dispatch=pre_dispatch)(*inputs)
            cases += cases_from_graph(gm, [x.clone() for x in inputs], f"hand:{name}")
    return cases
