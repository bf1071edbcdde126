"""Plain objects flattened by their attributes, for output containers that are neither
dataclasses nor registered pytree nodes (transformers' `Cache` types and the layer objects
they hold).

An object's children are the attributes that hold tensors (directly, or inside lists,
tuples, dicts or other such objects); every other attribute goes into the context as it
is. Unflattening sets the attributes on a new instance without running `__init__`, which
for caches computes from its arguments (DynamicCache concatenates, EncoderDecoderCache
reads sequence lengths): the rebuilt object equals the traced one with new tensors.
Objects met inside such an object that hold tensors get their class registered the same
way when first flattened, so a cache's layers need no list of layer types.
"""
from __future__ import annotations

import copy

import torch

from ._torch_private import pytrees

__all__ = ["register_attribute_pytree"]


def register_attribute_pytree(cls: type) -> None:
    """Makes `cls` (instances with a `__dict__`) a pytree node over its attributes;
    a class already registered (by us or its library) keeps its registration."""
    if pytrees.is_pytree_node(cls):
        return
    pytrees.register_object_pytree(cls, _flatten, lambda children, context: _unflatten(cls, children, context),
                                          _flatten_with_keys)


def _flatten(obj):
    names, children, static = [], [], []
    for name, value in sorted(vars(obj).items()):
        _register_holders(value, set())
        if _holds_tensor(value):
            names.append(name)
            children.append(value)
        else:
            static.append((name, value))
    return children, (tuple(names), tuple(static))


def _flatten_with_keys(obj):
    children, context = _flatten(obj)
    return [(pytrees.attribute_key(n), c) for n, c in zip(context[0], children)], context


def _unflatten(cls, children, context):
    names, static = context
    obj = cls.__new__(cls)
    state = vars(obj)
    for name, value in static:
        # Containers are copied: the rebuilt object must not share mutable state with the traced one.
        state[name] = copy.copy(value) if isinstance(value, (list, dict, set)) else value
    state.update(zip(names, children))
    return obj


def _holds_tensor(value) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in pytrees.pytree.tree_leaves(value))


def _register_holders(value, seen: set) -> None:
    """Registers the classes of plain objects inside `value` that hold tensors."""
    if id(value) in seen or isinstance(value, (torch.Tensor, type, torch.nn.Module, str, bytes)):
        return
    seen.add(id(value))
    if isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, dict):
        items = list(value.values())
    elif hasattr(value, "__dict__") and not pytrees.is_pytree_node(type(value)):
        items = list(vars(value).values())
        for item in items:
            _register_holders(item, seen)
        if any(isinstance(leaf, torch.Tensor) for item in items for leaf in pytrees.pytree.tree_leaves(item)):
            register_attribute_pytree(type(value))
        return
    else:
        return
    for item in items:
        _register_holders(item, seen)
