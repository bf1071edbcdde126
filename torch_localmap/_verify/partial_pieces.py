"""Splitting a value into the pieces ranks hold under Partial(sum|avg|max|min), exactly, and the
reduction that gives it back."""
from __future__ import annotations

import torch


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


def split(value: torch.Tensor, n: int, reduce: str, gen: torch.Generator) -> list:
    """n tensors whose `reduce` over the list equals `value` elementwise, exactly."""
    if n == 1:
        return [value.clone()]
    if value.is_complex():  # real and imaginary parts split alike (sum/avg only: no order on complex numbers)
        if reduce not in ("sum", "avg"):
            raise ValueError(f"Partial({reduce}) of a complex tensor")
        return [torch.view_as_complex(p.contiguous()) for p in split(torch.view_as_real(value), n, reduce, gen)]
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


def reduce(tensors: list, how: str) -> torch.Tensor:
    """The Partial reduction; float sums accumulate in float64 so exact pieces reassemble exactly."""
    stacked = torch.stack(tensors)
    if stacked.is_complex() and how in ("sum", "avg"):
        return torch.view_as_complex(reduce([torch.view_as_real(t.resolve_conj()) for t in tensors], how).contiguous())
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
