"""The C++ ops of torch.ops.localmap (csrc/torch/ops) as this package calls them."""
from __future__ import annotations

import torch

from .. import _C  # noqa: F401  (loading the extension registers torch.ops.localmap)

# Touch the ops once so `torch.ops.localmap` lists them (the namespace fills lazily).
OPS = (torch.ops.localmap.sharding_constraint, torch.ops.localmap.redistribute)


def constrain(x: torch.Tensor, spec: str, grad_spec: str | None) -> torch.Tensor:
    """localmap.sharding_constraint on canonical spec strings (checked by the op itself)."""
    return torch.ops.localmap.sharding_constraint(x, spec, grad_spec)
