"""Calibrates the cost model on the live mesh a plan is made for, cached per machine and mesh.

    parallelize(model, mesh, args, calibration="live")

The table figures of a device (docs/cost_model.md) say what the hardware can do; a plan is
judged by what its ranks achieve on this machine: the threads each rank really has, ranks
sharing cores, the process group's real collectives. So every rank of the mesh measures at
the same time (a barrier before each timed round, so oversubscribed ranks slow each other
down as they do in training):

- matmul time at a few shapes (grown where a device runs them all in a launch's time), each
  call on operands out of the caches (as a training step finds them), fitted to
  `overhead + flops / rate x (1 + n_half / d)` (d: the smallest dim; float32, bfloat16 too
  on CUDA): the rate is the profile's peak with efficiency 1, n_half
  its matmul_half_dim;
- copy bandwidth (a tensor copy, read + write);
- on CPU, flash attention (float32) at a few head widths and key counts, fitted to
  `flops / rate x (1 + attention_half_dim / head width)` with the matmul rate, and causal
  against full at 1024 keys, whose ratio gives the key tile the kernel computes whole
  (attention_causal_tile; cost_model.h);
- the time of one node of an FX graph of tiny ops: the per-op Python and dispatch cost of
  our runtime, which runs each rank's program as FX graphs (kernel_overhead_s);
- AdamW's step over small DTensor parameters, per kernel beyond a graph node's
  (optimizer_kernel_overhead_s: the optimizer runs eagerly on the DTensor parameters), and
  over large plain ones, the bytes/s its updates stream (optimizer_bandwidth) -- for each
  implementation (the per-tensor loop, foreach, fused: meta.optimizer_impls); the device
  fields hold torch's default one, and parallelize's optimizer_impl picks another;
- all_gather / reduce_scatter / all_reduce / all_to_all on every mesh dim's process group at
  sizes from 16 KiB to 16 MiB (the C++ side fits latency and bandwidth per collective); on
  CPU each call follows a burst of compute, as in a training step, where the peers must be
  woken and have drifted apart (_between_compute_seconds).

Each figure is the median of its timed rounds on a rank, then the slowest rank's (a step ends
when its slowest rank does); every rank gets rank 0's profile, so all plan alike. The profile
is written under the cache directory ($TLM_CACHE_DIR, else ~/.cache/torch_localmap) named by
what it depends on (host, device, torch, backend, world, mesh shape, threads per rank) and
reused by later plans on the same machine and mesh; the file is an ordinary calibration
profile, so it can also be passed as `calibration=path`.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import platform
import socket
import statistics
import time
import warnings

import torch

from ._calibrate import _sync
from ._runtime.host_memory import keep_freed_host_memory

__all__ = ["live_profile", "cache_path", "measure_mesh", "collective_call", "with_optimizer_impl", "OPTIMIZER_IMPLS"]

PROFILE_VERSION = 1
# Part of the cache key: raised when measure_mesh changes what it writes, so profiles cached by
# an earlier release are measured afresh. 2: the topology (ranks per node) is always written.
# 3: CPU collectives timed between compute (_between_compute_seconds); optimizer_bandwidth.
# 4: the optimizer figures of every AdamW implementation (meta.optimizer_impls). 5: CPU
# meshes measured with malloc keeping freed memory (_runtime/host_memory.py). 6: the per-node
# overhead measured through the Python bindings the eager runtime now calls. 7: matmul_half_dim.
# 8: products timed on operands out of the caches, rate and n-half fitted together.
# 9: attention_half_dim and attention_causal_tile (CPU).
MEASURE_REVISION = 9
COLLECTIVE_SIZES = (16 << 10, 256 << 10, 2 << 20, 16 << 20)
MATMUL_SHAPES = ((64, 512, 512), (256, 512, 2048), (512, 1024, 1024), (1024, 1024, 2048))
# Products with few rows (a rank's slice of a small batch), in the three a linear layer runs:
# x @ W.t() in forward, grad @ W (contiguous) and grad.t() @ x in backward (cost_model.h:
# matmul_half_dim).
SKINNY_MATMUL_ROWS = (8, 32)
SKINNY_MATMUL_KN = 1024
# The largest of MATMUL_SHAPES has 128 times the smallest's flops; where it takes under this
# many times as long, launches dominate and the shapes are grown (_flop_bound_matmul_samples).
MATMUL_SPAN = 8
# The least share of some sample's time a fitted flop term must explain to count as a rate
# (_fit_matmul): grown products put it near 1, launch-bound ones at rounding noise (1e-25).
MIN_FLOP_SHARE = 1e-3
# Flash attention samples (keys, head width) of one sequence of ATTENTION_HEADS heads, not
# causal: the widths models use, a short and a moderate key count (_fit_attention). Causal
# against full at ATTENTION_CAUSAL_KEYS keys gives the tile (_causal_tile): on the 2-core VM
# torch's CPU kernel cost as much causal as full up to 512 keys, 0.74 of full at 1024.
ATTENTION_SHAPES = ((64, 32), (256, 32), (256, 64), (256, 128))
ATTENTION_HEADS = 8
ATTENTION_CAUSAL_KEYS = 1024
_ROUND_SECONDS = 0.02  # each timed round runs the op at least this long (timer and scheduler noise)
_ROUNDS = 5


def _dist():
    import torch.distributed as dist

    return dist


def _device_of(mesh) -> torch.device:
    if mesh.device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(mesh.device_type)


def _max_over_ranks(values, device) -> list:
    t = torch.tensor(list(values), dtype=torch.float64, device=device)
    _dist().all_reduce(t, op=_dist().ReduceOp.MAX)
    return [float(x) for x in t.tolist()]


def _median_per_call(timed_round, device, group, min_calls: int, max_calls: int) -> float:
    """Median seconds of one call over timed rounds that every rank runs together;
    `timed_round(calls)` makes `calls` calls and returns the seconds it timed. The calls per
    round are agreed on (the most any rank needs to fill a round), so ranks overlap for the
    whole round. Returns this rank's figure."""
    timed_round(1)  # warm-up: allocation, kernel choice, connections
    probe = max(timed_round(1), 1e-7)
    calls = int(_max_over_ranks([min(max_calls, max(min_calls, int(_ROUND_SECONDS / probe) + 1))], device)[0])
    per_call = []
    for _ in range(_ROUNDS):
        _dist().barrier(group=group)
        per_call.append(timed_round(calls) / calls)
    return statistics.median(per_call)


def _per_call_seconds(fn, device, group=None) -> float:
    """Median seconds of one call of `fn`, the calls of a round back to back."""

    def timed_round(calls: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        return time.perf_counter() - t0

    return _median_per_call(timed_round, device, group, min_calls=1, max_calls=10_000)


def _between_compute_seconds(fn, device, group=None) -> float:
    """Median seconds a rank spends inside one call of collective `fn` when every call
    follows a burst of compute, as a training step issues its collectives: the peers are
    not all waiting in the collective already, so each call pays for waking them (on ranks
    that share cores, for a scheduler slice) and for their drift. Back-to-back calls hide
    that: the ranks stay in lockstep, and on this project's 2-core VM with 4 gloo ranks a
    256 KiB all-reduce of a 2-rank group took 0.6 ms back to back against 2.5-3.1 ms waited
    in a training step. Returns this rank's figure."""
    a = torch.randn(128, 256, device=device)
    b = torch.randn(256, 256, device=device)

    def timed_round(calls: int) -> float:
        seconds = 0.0
        for _ in range(calls):
            for _ in range(8):  # about 1 ms of one core, as a layer's ops between collectives
                torch.mm(a, b)
            t0 = time.perf_counter()
            fn()
            seconds += time.perf_counter() - t0
        return seconds

    return _median_per_call(timed_round, device, group, min_calls=3, max_calls=1_000)


def _matmul_operand_pool(m: int, k: int, n: int, transpose_a: bool, transpose_b: bool, device, dtype) -> list:
    """[(a, b, out)] copies of one product's operands and result, as many as together exceed
    _cold_pool_bytes(device): taking the next copy for each call finds it out of the caches,
    as a training step finds its weights and activations since their last use."""
    nbytes = (m * k + k * n + m * n) * dtype.itemsize
    pool = []
    for _ in range(max(2, -(-_cold_pool_bytes(device) // nbytes))):
        # Filled, not empty: no page faults inside the timed calls.
        a = torch.full((k, m) if transpose_a else (m, k), 0.5, device=device, dtype=dtype)
        b = torch.full((n, k) if transpose_b else (k, n), 0.5, device=device, dtype=dtype)
        pool.append((a.t() if transpose_a else a, b.t() if transpose_b else b,
                     torch.zeros(m, n, device=device, dtype=dtype)))
    return pool


def _cold_pool_bytes(device) -> int:
    """Bytes whose sweep evicts a product's operands: on CUDA four times the L2 cache; on CPU
    256 MiB. This VM's CPU reports a 480 MiB last-level cache shared with its host: a
    64 x 512 x 2048 float32 product whose operands a 64 MiB sweep had passed over ran as fast
    as a cached one (1.1 ms), after a 256 MiB sweep in 1.6-2.0 ms; in a training step of the
    4-layer MLP its products took 1.1-1.9 ms."""
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        return 4 * l2 if l2 > 0 else 256 << 20
    return 256 << 20


def _matmul_samples(device, dtype, scale: int = 1) -> list:
    """[(flops, smallest dim, this rank's seconds)] of one product per shape of MATMUL_SHAPES
    (large; each dim times `scale`), and of SKINNY_MATMUL_ROWS rows x SKINNY_MATMUL_KN in the
    three products of a linear layer (x @ W.t() in forward; grad @ W and the weight gradient
    grad.t() @ x, the rows contracted, in backward), each call on operands out of the caches."""
    kn = SKINNY_MATMUL_KN
    cases = [(m * scale, k * scale, n * scale, False, False) for m, k, n in MATMUL_SHAPES]
    for rows in SKINNY_MATMUL_ROWS:
        cases += [(rows, kn, kn, False, True), (rows, kn, kn, False, False), (kn, rows, kn, True, False)]
    samples = []
    for m, k, n, transpose_a, transpose_b in cases:
        copies = itertools.cycle(_matmul_operand_pool(m, k, n, transpose_a, transpose_b, device, dtype))

        def product():
            a, b, out = next(copies)
            torch.mm(a, b, out=out)
        samples.append((2.0 * m * k * n, min(m, k, n), _per_call_seconds(product, device)))
        del copies  # the pool's memory, before the next shape's
    return samples


def _flop_bound_matmul_samples(device, dtype) -> list:
    """_matmul_samples with every rank's slowest time, their large shapes grown (each dim x2)
    until the largest product takes MATMUL_SPAN times the smallest: below that every product
    costs its launch alone and the samples show no rate. On an H200, bfloat16 products up to
    1024 x 1024 x 2048 all took 16-18 us (their flops need 6 us at 720 TFLOP/s). The times are
    every rank's slowest, so all ranks grow alike."""
    for scale in (1, 2, 4, 8):
        samples = _matmul_samples(device, dtype, scale)
        times = _max_over_ranks([t for *_, t in samples], device)
        samples = [(f, d, t) for (f, d, _), t in zip(samples, times)]
        large = sorted(samples[:len(MATMUL_SHAPES)])  # by flops
        if large[-1][2] >= MATMUL_SPAN * large[0][2]:
            break
    return samples


def _fit_matmul(samples) -> dict:
    """{overhead_s, rate, half_dim} of t = overhead + flops / rate * (1 + half_dim / d) over
    samples [(flops, smallest dim d, seconds)]: least squares on the relative error (the
    samples span three decades of time) with every coefficient >= 0 (a term the samples do
    not show is dropped and the rest refitted: half_dim 0 is no shape effect)."""
    rows = [(1.0, f, f / d) for f, d, _ in samples]
    times = [t for *_, t in samples]
    active = [0, 1, 2]
    while True:
        a = torch.tensor([[r[j] / t for j in active] for r, t in zip(rows, times)], dtype=torch.float64)
        coef = torch.linalg.lstsq(a, torch.ones(len(rows), 1, dtype=torch.float64)).solution.flatten().tolist()
        negative = [i for i, (j, c) in enumerate(zip(active, coef)) if c < 0 and j != 1]  # the flop term stays
        if not negative:
            break
        del active[min(negative, key=lambda i: coef[i])]
    full = [0.0, 0.0, 0.0]
    for j, c in zip(active, coef):
        full[j] = c
    overhead, per_flop, per_skinny_flop = full
    # Where every sample costs the same (launch-bound products) least squares puts the flop
    # term at rounding noise, +-1e-30 s/flop with a sign that depends on the LAPACK build: a
    # rate is only shown where its term explains a real share of some sample's time.
    flop_share = max(((per_flop * f + per_skinny_flop * f / d) / t for f, d, t in samples), default=0.0)
    if per_flop <= 0 or flop_share < MIN_FLOP_SHARE:
        raise RuntimeError(f"live calibration: the matmul timings fit no positive rate (samples {samples})")
    return {"overhead_s": overhead, "rate": 1.0 / per_flop, "half_dim": per_skinny_flop / per_flop}


def _attention_flops(keys: int, width: int, heads: int = ATTENTION_HEADS) -> float:
    """Forward flops of full attention over one sequence (cost model: QK^T and PV)."""
    return 2.0 * heads * keys * keys * (2 * width)


def _attention_seconds(device, keys: int, width: int, causal: bool, heads: int = ATTENTION_HEADS) -> float:
    """This rank's seconds for one float32 scaled_dot_product_attention call (flash on CPU)."""
    import torch.nn.functional as F

    q, k, v = (torch.randn(1, heads, keys, width, device=device) for _ in range(3))
    return _per_call_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), device)


def _fit_attention(samples, rate: float) -> float:
    """attention_half_dim a of t = flops / rate x (1 + a / e) over samples [(flops, head
    width e, seconds)]: least squares on the relative error, a >= 0 (0: attention runs at the
    matmul rate)."""
    # Relative residual (f / rate (1 + a / e) - t) / t = (u - 1) + a u / e with u = f / (rate t).
    us = [(f / (rate * t), e) for f, e, t in samples]
    den = sum((u / e) ** 2 for u, e in us)
    return max(0.0, -sum((u - 1) * u / e for u, e in us) / den) if den > 0 else 0.0


def _causal_tile(causal_s: float, full_s: float, keys: int) -> float:
    """The key tile whose diagonal a causal kernel computes whole, from its time against full
    attention over `keys` keys (causal / full = (1 + tile / keys) / 2), within [0, keys]: at
    or above full time the kernel saved nothing at this length."""
    return min(float(keys), max(0.0, keys * (2 * causal_s / full_s - 1)))


def _attention_figures(device, rate: float) -> dict:
    """{attention_half_dim, attention_causal_tile} of float32 flash attention as every rank
    runs it now (the slowest rank's times), priced against the measured matmul `rate`."""
    full = [_attention_seconds(device, keys, width, causal=False) for keys, width in ATTENTION_SHAPES]
    heads = ATTENTION_HEADS // 2  # the long pair: half the heads, the same ratio
    pair = [_attention_seconds(device, ATTENTION_CAUSAL_KEYS, 64, causal, heads) for causal in (True, False)]
    times = _max_over_ranks(full + pair, device)
    samples = [(_attention_flops(keys, width), width, t) for (keys, width), t in zip(ATTENTION_SHAPES, times)]
    return {"attention_half_dim": _fit_attention(samples, rate),
            "attention_causal_tile": _causal_tile(times[-2], times[-1], ATTENTION_CAUSAL_KEYS)}


def _fx_node_seconds(device) -> float:
    """Seconds per node of an FX graph of 64 tiny aten ops, called as the eager runtime calls
    them (through their Python bindings, _runtime/direct_calls.py): what our runtime pays per
    op beyond the kernel's own work (Python, dispatch, launch). The few op kinds it still
    calls as OpOverloads pay about 1 us more on CPU; they are a tenth of a step's ops."""
    import torch.fx as fx

    from ._runtime.direct_calls import call_directly

    graph = fx.Graph()
    x = graph.placeholder("x")
    nodes = 64
    for _ in range(nodes):
        x = graph.call_function(torch.ops.aten.add.Tensor, (x, x))
    graph.output(x)
    gm = fx.GraphModule(torch.nn.Module(), graph)
    call_directly(gm)
    tiny = torch.zeros(1, device=device)
    return _per_call_seconds(lambda: gm(tiny), device) / nodes


# The AdamW implementations a training loop may run (torch.optim.AdamW's foreach / fused
# flags; torchtitan's optimizer.implementation names them the same way). Their costs differ
# several-fold: on this project's 2-core VM, over the step-time benchmark's llama parameters
# on 4 ranks, the per-tensor loop took 27 ms on DTensor parameters (18 ms plain), the fused
# kernel 8 ms (6 ms plain) -- DTensor's dispatch is paid per kernel, and the loop runs 7 per
# parameter where the fused step runs one over all of them.
OPTIMIZER_IMPLS = ("for-loop", "foreach", "fused")


def default_optimizer_impl(device_type: str) -> str:
    """The implementation torch.optim.AdamW runs when neither foreach nor fused is given:
    foreach on CUDA, the per-tensor loop elsewhere (torch/optim/optimizer.py,
    _default_to_fused_or_foreach)."""
    return "foreach" if device_type == "cuda" else "for-loop"


def adamw_flags(impl: str) -> dict:
    """torch.optim.AdamW's keyword arguments that select implementation `impl`."""
    return {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]


def _adamw(params, impl: str):
    return torch.optim.AdamW(params, lr=1e-3, **adamw_flags(impl))


def _optimizer_kernel_seconds(mesh, device, node_s: float, impl: str) -> float:
    """Seconds per optimizer kernel beyond a graph node's: AdamW's step (implementation
    `impl`) over small DTensor parameters on the mesh, as the user's optimizer runs on a
    planned module's parameters (cost_model.h: optimizer_kernel_overhead_s, priced for the
    7 kernels per parameter of the loop; a foreach or fused step shares its kernels among
    the parameters, so its figure per parameter is smaller)."""
    from torch.distributed.tensor import Replicate, distribute_tensor

    params = []
    for _ in range(8):
        p = torch.nn.Parameter(distribute_tensor(torch.zeros(16, device=device), mesh, [Replicate()] * mesh.ndim))
        p.grad = distribute_tensor(torch.ones(16, device=device), mesh, [Replicate()] * mesh.ndim)
        params.append(p)
    opt = _adamw(params, impl)
    per_param = _per_call_seconds(opt.step, device) / len(params)
    return max(per_param / 7 - node_s, 0.0)


def _optimizer_bandwidth(device, impl: str) -> float:
    """Bytes/s AdamW's step (implementation `impl`) streams over plain parameters whose state
    is larger than the caches, as a model's is, counted as the 19 parameter-sized tensors the
    loop reads or writes per step (cost_model.h: optimizer_bandwidth): an implementation
    that streams fewer (the fused kernel reads and writes each once) measures faster."""
    numel = (16 << 20) if device.type == "cuda" else (1 << 20)
    params = []
    for _ in range(4):
        p = torch.nn.Parameter(torch.zeros(numel, device=device))
        p.grad = torch.full_like(p, 1e-3)
        params.append(p)
    opt = _adamw(params, impl)
    seconds = _per_call_seconds(opt.step, device)
    return 19 * 4 * numel * len(params) / seconds


def _optimizer_figures(mesh, device, node_s: float) -> dict:
    """{implementation: its optimizer_kernel_overhead_s and optimizer_bandwidth}, each the
    slowest rank's."""
    out = {}
    for impl in OPTIMIZER_IMPLS:
        overhead, neg_bandwidth = _max_over_ranks(
            [_optimizer_kernel_seconds(mesh, device, node_s, impl), -_optimizer_bandwidth(device, impl)], device)
        out[impl] = {"optimizer_kernel_overhead_s": overhead, "optimizer_bandwidth": -neg_bandwidth}
    return out


def check_optimizer_impl(impl) -> None:
    """ValueError unless `impl` names an AdamW implementation (None: torch's default)."""
    if impl is not None and impl not in OPTIMIZER_IMPLS:
        raise ValueError(f"optimizer_impl must be one of {', '.join(OPTIMIZER_IMPLS)} or None, got {impl!r} "
                         "(torch.optim.AdamW's foreach=False, foreach=True, fused=True; None: torch's default)")


def with_optimizer_impl(profile: dict, impl: str) -> dict:
    """`profile` pricing the optimizer step as implementation `impl` of AdamW runs it: its
    device figures for the optimizer replaced by the ones measured for `impl`
    (meta.optimizer_impls, written by measure_mesh)."""
    check_optimizer_impl(impl)
    figures = (profile.get("meta") or {}).get("optimizer_impls") or {}
    if impl not in figures:
        raise ValueError(f"optimizer_impl={impl!r}: this calibration profile has no optimizer figures measured for "
                         f"it (meta.optimizer_impls holds {sorted(figures) or 'none'}); a profile made by "
                         "calibration='live' measures every implementation")
    meta = dict(profile["meta"], optimizer_impl=impl)
    return dict(profile, device=dict(profile["device"], **figures[impl]), meta=meta)


def _without_rename_warning(call):
    """`call` with torch's FutureWarning about the collective's new name silenced: newer
    torch renames all_gather_into_tensor / reduce_scatter_tensor (to *_single), and the old
    name runs on every supported version."""

    def quiet():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            call()
    return quiet


def collective_call(name: str, nbytes: int, world: int, device, group=None):
    """(a call of collective `name` on float32 buffers of about `nbytes` over `group` of
    `world` ranks, its size in the cost model's convention: the whole buffer -- gathered
    output, unreduced input, all-reduce buffer, all-to-all send buffer)."""
    dist = _dist()
    numel = max(world, nbytes // 4 // world * world)
    if name == "all_gather":
        src, dst = torch.ones(numel // world, device=device), torch.empty(numel, device=device)
        return _without_rename_warning(lambda: dist.all_gather_into_tensor(dst, src, group=group)), numel * 4
    if name == "reduce_scatter":
        src, dst = torch.ones(numel, device=device), torch.empty(numel // world, device=device)
        return _without_rename_warning(lambda: dist.reduce_scatter_tensor(dst, src, group=group)), numel * 4
    if name == "all_reduce":
        buf = torch.ones(numel, device=device)
        return (lambda: dist.all_reduce(buf, group=group)), numel * 4
    src, dst = torch.ones(numel, device=device), torch.empty(numel, device=device)
    return (lambda: dist.all_to_all_single(dst, src, group=group)), numel * 4


def _hosts() -> list:
    dist = _dist()
    names = [None] * dist.get_world_size()
    dist.all_gather_object(names, socket.gethostname())
    return names


def measure_mesh(mesh, table: str) -> dict:
    """A calibration profile of `mesh` as its ranks run now (every rank calls this together)."""
    from . import _C

    dist = _dist()
    device = _device_of(mesh)
    table_figures = _C.device_profile(table)
    fields = {"compute_efficiency": 1.0, "memory_efficiency": 1.0}
    fits = {}
    for dtype, field in ((torch.float32, "peak_flops_fp32"), (torch.bfloat16, "peak_flops_bf16")):
        if dtype == torch.bfloat16 and device.type != "cuda":
            continue  # CPU training here runs float32; the table keeps the rest
        samples = _flop_bound_matmul_samples(device, dtype)
        fit = _fit_matmul(samples)
        fields[field] = fit["rate"]
        # One figure for every dtype: the one training computes in wins (float32 on CPU,
        # bfloat16 on CUDA, measured last).
        fields["matmul_half_dim"] = fit["half_dim"]
        fits[field] = {"overhead_s": fit["overhead_s"], "samples": [list(x) for x in samples],
                       "columns": ["flops", "smallest_dim", "seconds"]}
    if device.type == "cpu":
        # On CUDA flash attention at sizes a calibration affords in milliseconds costs its
        # launch, not its flops; the table's figures (none: the matmul rate) stay there.
        fields.update(_attention_figures(device, fields["peak_flops_fp32"]))
    # Fields not measured keep the table's achievable rate (peak x its efficiency).
    for key in ("peak_flops_fp32", "peak_flops_bf16", "peak_flops_fp8", "peak_flops_fp64"):
        fields.setdefault(key, table_figures[key] * table_figures["compute_efficiency"])
    copy_bytes = (256 << 20) if device.type == "cuda" else (8 << 20)
    src = torch.ones(copy_bytes // 4, device=device)
    dst = torch.empty_like(src)
    copy_s, node_s = _max_over_ranks([_per_call_seconds(lambda: dst.copy_(src), device), _fx_node_seconds(device)],
                                     device)
    fields["memory_bandwidth"] = 2 * copy_bytes / copy_s
    fields["kernel_overhead_s"] = node_s
    # Every AdamW implementation's figures are kept (parallelize's optimizer_impl picks one);
    # the device fields price the one torch runs by default on this device.
    optimizers = _optimizer_figures(mesh, device, node_s)
    fields.update(optimizers[default_optimizer_impl(device.type)])
    del src, dst

    hosts = _hosts()
    coords = mesh.mesh.flatten().tolist()  # global ranks in mesh order
    rows = []
    for dim in range(mesh.ndim):
        group = mesh.get_group(dim)
        n = mesh.size(dim)
        if n < 2:
            continue
        members = dist.get_process_group_ranks(group)
        link = "intra" if len({hosts[r] for r in members}) == 1 else "inter"
        for name in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all"):
            for nbytes in COLLECTIVE_SIZES:
                fn, size = collective_call(name, nbytes, n, device, group)
                # On CPU, timed as a step issues them (between compute); NCCL's run on their own
                # streams, asynchronous to the compute, and are timed back to back as nccl-tests do.
                timing = _between_compute_seconds if device.type == "cpu" else _per_call_seconds
                seconds = _max_over_ranks([timing(fn, device, group)], device)[0]
                rows.append({"collective": name, "group_size": n, "bytes": int(size), "seconds": seconds,
                             "link": link})
    profile = {
        "version": PROFILE_VERSION,
        "meta": {"how": "torch_localmap._live_calibration.measure_mesh", "key": _key(mesh),
                 "table_device": table, "matmul_fits": fits, "statistic":
                 "median of timed rounds run by every rank together, then the slowest rank's",
                 "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                 "optimizer_impls": optimizers, "optimizer_impl": default_optimizer_impl(device.type)},
        "device": fields,
        "collectives": rows,
    }
    # Which mesh dims' groups cross hosts follows from ranks per node; on one host that is every
    # rank. Written always: the device table's own figure (2 for "cpu") would price a group of 4
    # ranks on one host as two nodes, half its hops on an inter-node link nothing here measured.
    profile["topology"] = {"ranks_per_node": hosts.count(hosts[coords[0]])}
    return profile


def _key(mesh) -> dict:
    dist = _dist()
    device = _device_of(mesh)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or "cpu")
    return {"host": socket.gethostname(), "device": f"{device.type}:{name}", "cpus": os.cpu_count(),
            "torch": torch.__version__, "backend": str(dist.get_backend()), "world": dist.get_world_size(),
            "mesh": list(mesh.shape), "threads": torch.get_num_threads(), "version": PROFILE_VERSION,
            "revision": MEASURE_REVISION}


def cache_dir() -> str:
    return os.environ.get("TLM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torch_localmap")


def cache_path(mesh, table: str, directory: str | None = None) -> str:
    """Where the live profile of `mesh` (priced for device `table`) is cached on this machine."""
    key = dict(_key(mesh), table=table)
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(directory or cache_dir(), f"calibration-{digest}.json")


def _read_valid(path: str, table: str):
    from .cost_model import load_cost_model

    try:
        with open(path) as f:
            text = f.read()
        load_cost_model(table, text)  # a damaged or outdated file is measured afresh
        return text
    except (OSError, ValueError):
        return None


def live_profile(mesh, table: str, directory: str | None = None, refresh: bool = False) -> dict:
    """The calibration profile of `mesh` priced for `table`: rank 0's cached file when it has
    one (and not `refresh`), else measured now by every rank and cached by rank 0. Every rank
    of the mesh calls this; all return rank 0's profile."""
    dist = _dist()
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("calibration='live' measures the mesh's process groups: call it on a mesh whose "
                         "process group is initialized (torch.distributed.init_process_group)")
    if mesh.size() != dist.get_world_size():
        raise ValueError(f"calibration='live' needs a mesh over every rank: the mesh has {mesh.size()} ranks, "
                         f"the process group {dist.get_world_size()}; pass a profile file instead")
    path = cache_path(mesh, table, directory)
    first = mesh.mesh.flatten().tolist()[0]
    found = [_read_valid(path, table) if dist.get_rank() == first and not refresh else None]
    dist.broadcast_object_list(found, src=first)
    if found[0] is not None:
        return json.loads(found[0])
    if mesh.device_type == "cpu":  # measured with malloc set as the CPU rank programs run with it
        keep_freed_host_memory()
    profile = measure_mesh(mesh, table)
    box = [profile]
    dist.broadcast_object_list(box, src=first)
    profile = box[0]
    if dist.get_rank() == first:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(profile, f, indent=1)
        os.replace(tmp, path)  # readers never see half a file
    return profile
