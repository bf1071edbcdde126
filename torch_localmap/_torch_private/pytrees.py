"""Flattening user arguments and model outputs (torch.utils._pytree), and teaching it types.

Written for torch 2.13. `pytree` is torch.utils._pytree itself: import it from here.
"""
from __future__ import annotations

from torch.utils import _pytree as pytree  # noqa: F401


def register_dataclass_pytree(cls) -> None:
    """Makes a dataclass a pytree node (its fields the children), so tracing can flatten
    model outputs of that type. torch.utils._pytree.register_dataclass (2.13)."""
    from torch.utils import _pytree

    _pytree.register_dataclass(cls)


def register_object_pytree(cls, flatten, unflatten, flatten_with_keys) -> None:
    """Makes `cls` a pytree node with the given functions (flatten(obj) -> (children,
    context); flatten_with_keys(obj) -> ([(GetAttrKey, child)], context)), so tracing can
    flatten outputs of that type. torch.utils._pytree.register_pytree_node (2.13)."""
    from torch.utils import _pytree

    _pytree.register_pytree_node(cls, flatten, unflatten, flatten_with_keys_fn=flatten_with_keys,
                                 serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")


def is_pytree_node(cls) -> bool:
    """Whether pytree already flattens `cls` (torch.utils._pytree.SUPPORTED_NODES, 2.13)."""
    from torch.utils import _pytree

    return cls in _pytree.SUPPORTED_NODES


def attribute_key(name: str):
    """The pytree path key of an attribute (torch.utils._pytree.GetAttrKey, 2.13)."""
    from torch.utils import _pytree

    return _pytree.GetAttrKey(name)
