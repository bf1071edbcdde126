"""GraphModules whose code is generated late, and the generated code torch keeps.

Written for torch 2.13 (torch.fx._lazy_graph_module, torch.fx.graph_module._loader;
the loader checked on 2.11-2.15).
"""
from __future__ import annotations

import torch
import torch.fx as fx


def lazy_graph_module(root: torch.nn.Module, graph: fx.Graph) -> fx.GraphModule:
    """A GraphModule of `graph` whose Python code is generated at its first call, not now
    (torch.fx._lazy_graph_module, 2.13): planning reads the graph and never calls it, and
    code for a 7,000-node graph takes a third of a second."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    return _LazyGraphModule(root, graph)


def graph_code_keys() -> set:
    """torch.fx.graph_module._loader (2.11-2.15): every GraphModule's generated source is kept
    in this cache, for tracebacks, and never dropped. The keys now there."""
    from torch.fx import graph_module

    return set(graph_module._loader.eval_cache)


def forget_graph_code(keys) -> None:
    """Drops the kept source of these GraphModules (graph_code_keys) and its linecache
    entry: programs that are gone no longer hold memory (their tracebacks lose source lines)."""
    import linecache

    from torch.fx import graph_module

    for key in keys:
        graph_module._loader.eval_cache.pop(key, None)
        linecache.cache.pop(key, None)


def call_boxed(gm: fx.GraphModule) -> None:
    """Regenerates `gm`'s code to take its inputs as one list, which the code empties once it
    has read them (torch.fx.graph._BoxedCodeGen, 2.11-2.15, the convention aot_autograd's
    backward uses): the caller then holds no reference, and each input is freed after its
    last use in the graph instead of when the call returns. Call as `gm([x, y, ...])`."""
    from torch.fx.graph import _BoxedCodeGen

    from .._runtime.recompile import recompile

    gm.graph.set_codegen(_BoxedCodeGen())
    recompile(gm)
