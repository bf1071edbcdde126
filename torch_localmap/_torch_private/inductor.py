"""Compiling our per-rank graphs with Inductor, and reading the code it generated.

Written for torch 2.13 (torch._inductor.standalone_compile, its config and utils).
"""
from __future__ import annotations

import torch
import torch.fx as fx

from .fake_tensors import outside_fake_mode
from .node_meta import drop_recompute_tags


def inductor_compile(gm: fx.GraphModule, example_inputs: list):
    """`gm` (an aten graph with _c10d_functional collectives) compiled by Inductor for
    the shapes of `example_inputs` (torch._inductor.standalone_compile, 2.13); the
    result is called with the graph's inputs and returns its outputs."""
    from torch._inductor import standalone_compile

    # Inductor's FX bucketing merges collectives of one kind on one group into one call
    # (torch._inductor.config.bucket_*_fx, 2.13): fewer latencies, as DDP's buckets. Its
    # peak-memory reordering would issue each collective right before its wait (an issued
    # collective holds its output buffer); the graph arrives in the overlap schedule's
    # order, whose bound on bytes in flight already limits that memory.
    patches = {"bucket_all_gathers_fx": "all", "bucket_reduce_scatters_fx": "all", "bucket_all_reduces_fx": "all",
               "reorder_for_peak_memory": False}
    from torch._inductor.exc import InductorError

    drop_recompute_tags(gm)  # the graph is already partitioned: Inductor must not rematerialize again
    with outside_fake_mode():
        try:
            return standalone_compile(gm, example_inputs, dynamic_shapes="from_example_inputs",
                                      options={"config_patches": patches})
        except InductorError as e:
            if not any(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in example_inputs):
                raise
            # Inductor's C++ vectorizer (2.13) asserts on some int64 index arithmetic (a causal
            # mask built from aranges); the scalar C++ backend compiles it. Every rank has the
            # same graph, so every rank takes this same path: their collectives still match.
            import warnings

            warnings.warn(f"torch_localmap: Inductor's vectorized C++ code generation failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:200]}); compiling this graph without vectorization", stacklevel=2)
            return standalone_compile(gm, example_inputs, dynamic_shapes="from_example_inputs",
                                      options={"config_patches": {**patches, "cpp.simdlen": 1}})


def boxed_entry(artifact):
    """The function inside `artifact` (inductor_compile's result) that takes the graph's
    inputs as one list and empties it, so each input is freed after its last use inside the
    compiled code rather than when the call returns; None where the artifact is not built as
    2.13-2.14 build it. There `CacheCompiledArtifact._compiled_fn` is dynamo's disable
    wrapper around aot_autograd's `forward(*runtime_args)` (aot_module_simplified), which
    calls the boxed `compiled_fn(params_buffers_flat + runtime_args)`: with no parameters or
    buffers lifted from the graph, that boxed function is called with our own list."""
    forward = getattr(getattr(artifact, "_compiled_fn", None), "__wrapped__", None)
    code, closure = getattr(forward, "__code__", None), getattr(forward, "__closure__", None)
    if code is None or closure is None:
        return None
    cells = dict(zip(code.co_freevars, closure))
    try:
        inner, lifted = cells["compiled_fn"].cell_contents, cells["params_buffers_flat"].cell_contents
    except (KeyError, ValueError):  # another closure, or a cell not yet filled
        return None
    if lifted or not callable(inner) or not getattr(inner, "_boxed_call", False):
        return None
    return torch._disable_dynamo(inner)  # as the artifact's own wrapper: dynamo never traces into it


def inductor_code_of(fn):
    """(fn(), [the Python wrapper code Inductor generated while fn ran]), with the
    compile caches off so the code is generated (torch._inductor.utils.run_and_get_code,
    2.13)."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        return run_and_get_code(fn)
