"""Measures the device this process runs on, in the cost model's calibration format.

    profile = device_profile(torch.device("cuda"), table="H100")
    load_cost_model("H100", profile)   # the planner then prices with measured rates

What is measured (best of `reps` timed runs after a warm-up, the device synchronized
around each): matmul throughput per dtype (fp32, bf16 where the device runs it), the
scaled-dot-product attention throughput (reported; the cost model prices attention with
the matmul rate), copy bandwidth, and the time of a tiny kernel (launch + dispatch
overhead). Measured rates are written as the peaks with efficiency 1, so the cost model
prices with what this device achieves. Collective bandwidth across ranks comes from
benchmarks/calibrate_collectives.py (gloo on CPU, --backend nccl on GPUs) in the same format.
"""
from __future__ import annotations

import time

import torch

__all__ = ["device_profile", "measure"]

_DTYPE_FIELD = {torch.float32: "peak_flops_fp32", torch.bfloat16: "peak_flops_bf16", torch.float64: "peak_flops_fp64"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_seconds(fn, device: torch.device, reps: int) -> float:
    fn()  # warm-up: allocations, kernel selection
    _sync(device)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _supports(device: torch.device, dtype: torch.dtype) -> bool:
    if device.type == "cuda":
        return dtype != torch.bfloat16 or torch.cuda.is_bf16_supported()
    return True


def measure(device: torch.device, matmul_n: int = 4096, attn_shape=(8, 16, 1024, 64), copy_bytes: int = 1 << 28,
            dtypes=(torch.float32, torch.bfloat16), reps: int = 5) -> dict:
    """Achieved rates on `device`: {"matmul_flops": {dtype: flop/s}, "attention_flops": flop/s,
    "memory_bandwidth": B/s, "kernel_overhead_s": s}."""
    device = torch.device(device)
    out = {"matmul_flops": {}}
    for dtype in dtypes:
        if not _supports(device, dtype):
            continue
        a = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
        b = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
        out["matmul_flops"][str(dtype).replace("torch.", "")] = 2 * matmul_n ** 3 / _best_seconds(
            lambda: torch.mm(a, b), device, reps)
    batch, heads, seq, dim = attn_shape
    dtype = torch.bfloat16 if device.type == "cuda" and _supports(device, torch.bfloat16) else torch.float32
    q, k, v = (torch.randn(batch, heads, seq, dim, device=device, dtype=dtype) for _ in range(3))
    attn_flops = 4 * batch * heads * seq * seq * dim  # QK^T and PV
    out["attention_flops"] = attn_flops / _best_seconds(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), device, reps)
    src = torch.empty(copy_bytes // 4, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    out["memory_bandwidth"] = 2 * copy_bytes / _best_seconds(lambda: dst.copy_(src), device, reps)  # read + write
    tiny = torch.ones(1, device=device)
    out["kernel_overhead_s"] = _best_seconds(lambda: tiny.add_(1.0), device, max(reps, 20))
    return out


def device_profile(device, table: str, **measure_args) -> dict:
    """A calibration profile (docs/cost_model.md) for the cost model's `table` device,
    with this device's measured rates; meta records the table figures beside them."""
    from . import _C

    device = torch.device(device)
    m = measure(device, **measure_args)
    fields = {"compute_efficiency": 1.0, "memory_efficiency": 1.0,
              "memory_bandwidth": m["memory_bandwidth"], "kernel_overhead_s": m["kernel_overhead_s"]}
    for name, rate in m["matmul_flops"].items():
        fields[_DTYPE_FIELD[getattr(torch, name)]] = rate
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {
        "version": 1,
        "meta": {"measured_on": name, "torch": torch.__version__, "table_device": table,
                 "table": _C.device_profile(table), "attention_flops": m["attention_flops"]},
        "device": fields,
    }
