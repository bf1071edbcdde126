"""What the planning trace runs under: make_fx, export's flags, a module's swapped state,
op recording, the meta kernel widened for tracing and deep copies of traced tensors.

Written for torch 2.13; grouped_mm_shapes_for_every_dtype also handles a torch without
the meta kernel it widens.
"""
from __future__ import annotations

import contextlib

import torch
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: F401


@contextlib.contextmanager
def exporting():
    """The flags torch.export sets while it traces (torch._export.utils._compiling_state_context,
    2.13): torch.compiler.is_compiling() and is_exporting() are True, so libraries take their
    trace-friendly paths (transformers skips data-dependent mask shortcuts)."""
    from torch._export.utils import _compiling_state_context

    with _compiling_state_context():
        yield


def reparametrized(module: torch.nn.Module, tensors: dict):
    """Context in which `module`'s parameters and buffers (by FQN, tied weights included) are
    `tensors` (torch.nn.utils.stateless._reparametrize_module, 2.13; what torch.func.
    functional_call uses)."""
    from torch.nn.utils.stateless import _reparametrize_module

    return _reparametrize_module(module, tensors, tie_weights=True)


def recording_ops(record):
    """Context: each aten op call is passed to record(func, args, kwargs) before it runs
    (a TorchDispatchMode, torch.utils._python_dispatch, 2.13)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            record(func, args, kwargs)
            return func(*args, **kwargs)

    return _Recorder()


_grouped_mm_depth = [0, None]


@contextlib.contextmanager
def grouped_mm_shapes_for_every_dtype():
    """aten._grouped_mm's meta kernel (torch._meta_registrations.meta_grouped_mm, 2.13)
    insists on bfloat16 -- a constraint of its CUDA kernel -- while the CPU kernel computes
    float32 too (transformers' MoE experts call it so). Fake tensors run the meta kernel,
    so tracing such a model fails. While this context is active the Meta kernel computes
    the same shapes for any floating dtype; torch's own registration is back afterwards
    (torch.library.Library registrations end when the library is destroyed)."""
    import warnings

    try:
        from torch._meta_registrations import meta_grouped_mm
    except ImportError:  # a torch without this meta kernel (2.11) has nothing to widen
        yield
        return

    if _grouped_mm_depth[0] == 0:
        def meta(a, b, offs=None, bias=None, out_dtype=None):
            if a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16:
                return meta_grouped_mm(a, b, offs=offs, bias=bias, out_dtype=out_dtype)
            bf16 = torch.bfloat16
            out = meta_grouped_mm(a.to(bf16), b.to(bf16), offs=offs, bias=None if bias is None else bias.to(bf16),
                                  out_dtype=bf16)
            return out.to(out_dtype or a.dtype)

        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": on purpose, undone below
            # allow_override: torch 2.11 defaults to False and remembers destroyed libraries' kernels
            lib.impl("_grouped_mm", meta, "Meta", allow_override=True)
        _grouped_mm_depth[1] = lib
    _grouped_mm_depth[0] += 1
    try:
        yield
    finally:
        _grouped_mm_depth[0] -= 1
        if _grouped_mm_depth[0] == 0:
            _grouped_mm_depth[1]._destroy()
            _grouped_mm_depth[1] = None


@contextlib.contextmanager
def deepcopy_of_traced_tensors():
    """copy.deepcopy of a tensor made while tracing. torch's Tensor.__deepcopy__ (2.13) asks a
    wrapper subclass for data_ptr() to pick its clone() path, and the tensors a trace makes
    (FunctionalTensor, FakeTensor) raise there instead of answering 0, so a model that
    deep-copies state in forward (transformers' Dory copies its cache layers once per loop)
    does not trace. While this context is active such a tensor is copied by clone(), the
    path torch takes for wrappers without storage; every other tensor, and a non-leaf one
    (which torch refuses), goes through torch's own method."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    original = torch.Tensor.__deepcopy__
    if getattr(original, "_traced_tensors", False):  # nested: already in place
        yield
        return

    def __deepcopy__(self, memo):
        if not isinstance(self, (FunctionalTensor, FakeTensor)) or not self.is_leaf:
            return original(self, memo)
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            copied = self.clone()
        if self.requires_grad:
            copied.requires_grad_()
        memo[id(self)] = copied
        return copied

    __deepcopy__._traced_tensors = True
    torch.Tensor.__deepcopy__ = __deepcopy__
    try:
        yield
    finally:
        torch.Tensor.__deepcopy__ = original


class ReentrantCheckpointError(RuntimeError):
    """A reentrant activation checkpoint met while tracing (reentrant_checkpoints_refused)."""


@contextlib.contextmanager
def reentrant_checkpoints_refused():
    """torch.utils.checkpoint(..., use_reentrant=True) refused while tracing. Its autograd
    Function runs the checkpointed function under no_grad and differentiates it inside its own
    backward, which the joint trace cannot follow: torch raises when some input requires grad,
    and when none does (frozen embeddings, where eager's inputs are flagged by a forward hook
    the trace does not see) the layer's parameters would silently get no gradient.
    use_reentrant=False traces and trains like one process. CheckpointFunction (2.13; 2.11 and
    2.15 alike) is what use_reentrant=True calls."""
    from torch.utils import checkpoint

    original = checkpoint.CheckpointFunction.apply

    def refuse(*_args, **_kwargs):
        raise ReentrantCheckpointError(
            "torch.utils.checkpoint with use_reentrant=True cannot be traced into a planned program")

    checkpoint.CheckpointFunction.apply = refuse
    try:
        yield
    finally:
        checkpoint.CheckpointFunction.apply = original
