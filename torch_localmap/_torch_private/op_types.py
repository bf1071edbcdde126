"""The op types graph nodes target: checks of a node's target compare with these.

Written for torch 2.13 (torch._ops; the same names in 2.11-2.15).
"""
from __future__ import annotations

from torch._ops import HigherOrderOperator, OpOverload  # noqa: F401
