"""Placing a parameter or buffer at a dotted path of a holder module."""
from __future__ import annotations

import torch.nn as nn


def attach_tensor(root: nn.Module, fqn: str, tensor, as_param: bool) -> None:
    """Puts `tensor` (the object itself, not a copy) at `fqn` under `root`, creating empty
    submodules along the path, so state_dict names and functional_call see the model's FQNs."""
    owner = root
    *path, leaf = fqn.split(".")
    for part in path:
        if part not in owner._modules:
            owner.add_module(part, nn.Module())
        owner = owner._modules[part]
    (owner._parameters if as_param else owner._buffers)[leaf] = tensor
