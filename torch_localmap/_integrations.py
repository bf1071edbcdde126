"""What tracing needs from the libraries users' models come from.

Only libraries the user already imported are touched (we never import them), and
only through their own public helpers.

- transformers: causal LMs return a `DynamicCache` (past_key_values) from forward, also
  in training, and encoder-decoders an `EncoderDecoderCache`. They hold tensors, so our
  outputs must flatten them: every `Cache` subclass is flattened by its attributes
  (`_object_pytree.py`), found by walking `Cache`'s subclasses at each trace, so caches
  defined by newer releases or by users count too, and so do the layers they hold.
  transformers' own registration for torch.export
  (`integrations.executorch.register_dynamic_cache_export_support`) is not used: it refuses
  a DynamicCache holding anything but attention layers, which hybrid models (Jamba's Mamba
  layers) return. Where it was registered before us (the user exported a model), it is kept.
"""
from __future__ import annotations

import contextlib
import sys

from ._torch_private import pytrees, torch_local_map, tracing
from ._object_pytree import register_attribute_pytree

__all__ = ["tracing_context"]


def _register_transformers_outputs() -> None:
    if "transformers" not in sys.modules:
        return
    try:
        from transformers.cache_utils import Cache
    except ImportError:  # a transformers without cache classes returns none
        return
    for cls in _subclasses(Cache):
        register_attribute_pytree(cls)  # keeps a registration that exists


def _subclasses(base: type) -> list:
    """Every subclass of `base`, transitively, in a deterministic order."""
    found, todo = {}, [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            key = f"{sub.__module__}.{sub.__qualname__}"
            if key not in found:
                found[key] = sub
                todo.append(sub)
    return [found[k] for k in sorted(found)]


@contextlib.contextmanager
def tracing_context():
    """Everything active while we trace a user's model (and its per-rank program)."""
    _register_transformers_outputs()
    with tracing.exporting(), tracing.grouped_mm_shapes_for_every_dtype(), tracing.deepcopy_of_traced_tensors(), \
            torch_local_map.torch_local_map_calls_go_to(_torch_region_as_ours):
        yield


def _torch_region_as_ours(original, func, out_placements, in_placements, in_grad_placements, device_mesh,
                          redistribute_inputs, *args, **kwargs):
    """A region of torch's local_map met while tracing: on plain (fake) tensors torch would
    run the body on whole tensors and the region would vanish from the graph; it becomes
    our local_map region instead, pinned by the planner like ours. DTensor calls keep
    torch's own behaviour."""
    from torch.distributed.tensor import DTensor

    from ._local_map import local_map

    if any(isinstance(a, DTensor) for a in pytrees.pytree.tree_leaves((args, kwargs))):
        return original(func, out_placements, in_placements, in_grad_placements, device_mesh, redistribute_inputs,
                        *args, **kwargs)
    region = local_map(func, out_placements=out_placements, in_placements=in_placements,
                       in_grad_placements=in_grad_placements, device_mesh=device_mesh,
                       redistribute_inputs=redistribute_inputs)
    return region(*args, **kwargs)
