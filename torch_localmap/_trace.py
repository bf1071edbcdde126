"""Tracing a module, called the way its library calls it, into its joint graph.

`trace_joint(module, args, kwargs)` captures `module(*args, **kwargs)` with fake tensors
(no real compute) as one aten graph: forward and backward (or forward only under
torch.no_grad()), parameters and buffers as inputs, buffer writes as extra outputs.
Arguments and outputs may be any pytree (tuples, dicts, dataclasses, ModelOutput,
registered types); non-tensor leaves are constants of the graph.

A construct the graph cannot represent is an error that names the module (by FQN) and
the Python line, and says what to do instead: a Python attribute written in forward
(the planned program would not repeat the write), hooks on submodules, data-dependent
control flow, in-place writes into inputs.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import _trace_stamp
from ._gc_pause import gc_paused
from ._torch_private import descriptors, dynamo, fake_tensors, flex_attention, joint_export, node_meta, pytrees, tracing
from ._local_map import RegionMutationError
from ._integrations import tracing_context
from ._torch_private.pytrees import pytree
from ._log import get_logger
from ._value_lifetimes import tighten_value_lifetimes

_log = get_logger(__name__)


class UnsupportedModelError(ValueError):
    """A construct in the model's forward that a planned program cannot reproduce."""


@dataclass
class JointGraph:
    gm: fx.GraphModule
    num_fwd_outputs: int  # buffer writes + forward outputs: the partitioner's forward outputs
    param_names: list  # FQN per "param" placeholder, in placeholder order
    buffer_names: list
    input_spec: object = None  # pytree spec of (args, kwargs)
    input_leaves: list = field(default_factory=list)  # the example's flat (args, kwargs) leaves
    output_spec: object = None  # pytree spec of the module's output
    num_outputs: int = 0  # the module's (flat) outputs
    mutated_buffers: list = field(default_factory=list)  # FQNs, in mutation-output order
    backward: bool = True  # False: a forward-only graph (no_grad / nothing requires grad)
    training: bool = True  # module.training when traced
    module_calls: list = field(default_factory=list)  # ModuleCall per submodule call, in call order
    stamped: str = ""  # FQN of the layer stack traced four layers deep and stamped ("" when traced whole)

    @property
    def num_user_inputs(self) -> int:
        return sum(1 for x in self.input_leaves if isinstance(x, torch.Tensor))


def normalize_call(module, args, kwargs) -> tuple[tuple, dict]:
    """(args, kwargs) as a tuple and a dict, checked against module.forward's signature."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(module).__name__} ({module!r:.80}); wrap a "
                        f"function in a Module whose forward calls it")
    if isinstance(args, torch.Tensor):
        args = (args,)
    if args is None:
        args = ()
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"example args must be a tuple (or a single tensor), got {type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise TypeError(f"example kwargs must be a dict, got {type(kwargs).__name__}")
    try:
        inspect.signature(module.forward).bind(*args, **kwargs)
    except TypeError as e:
        raise ValueError(f"example arguments: {type(module).__name__}.forward{inspect.signature(module.forward)} "
                         f"cannot take {len(args)} positional arguments and keywords {sorted(kwargs)} ({e})") from None
    return tuple(args), dict(kwargs)


def check_example_inputs(module, example_inputs) -> tuple:
    """Positional example inputs (the older calling convention), checked."""
    args, _ = normalize_call(module, example_inputs, None)
    return args


_ROOT_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                    "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


@contextlib.contextmanager
def _root_hooks_off(module: torch.nn.Module):
    """The root module's forward hooks removed for the duration (restored after)."""
    saved = {k: dict(getattr(module, k)) for k in _ROOT_HOOK_DICTS if hasattr(module, k)}
    for k in saved:
        getattr(module, k).clear()
    try:
        yield
    finally:
        for k, v in saved.items():
            getattr(module, k).update(v)


def trace_joint(module: torch.nn.Module, args, kwargs=None, root_hooks: bool = True) -> JointGraph:
    """Joint graph of module(*args, **kwargs), traced with fake tensors (no real compute).

    `root_hooks=False`: the root's forward hooks stay out of the graph (parallelize runs them
    around the planned program, eagerly, at every call)."""
    if not root_hooks:
        with _root_hooks_off(module):
            return trace_joint(module, args, kwargs)
    try:
        t0 = time.perf_counter()
        # torch.compile'd pieces inside the model (a compiled submodule, a compiled mask
        # builder or attention function, as torchtitan writes them) run as their eager code:
        # compiled, they would run Inductor's kernels on the fake tensors instead of being traced.
        # Tensors a flex_attention score_mod / mask_mod closure captures become the op's buffers.
        # The collector paused: stamping copies a node per layer's op (_gc_pause.py).
        with dynamo.compiled_code_runs_eagerly(), flex_attention.flex_closure_tensors_lifted(), gc_paused():
            joint = _trace_joint(module, args, kwargs)
        _log.info("traced %s: %d graph nodes, %d module calls, in %.2f s", type(module).__name__,
                  len(joint.gm.graph.nodes), len(joint.module_calls), time.perf_counter() - t0)
        return joint
    except UnsupportedModelError as e:
        # A plain dataclass in the output (ModelOutput-like, never registered): register it
        # as a pytree, as its fields are what the model returns, and trace again.
        if _register_output_dataclass(e.__cause__):
            return trace_joint(module, args, kwargs)
        raise


_UNKNOWN_OUTPUT = re.compile(r"Found <class '([\w.]+)'> in output, which is not a known type")


def _register_output_dataclass(error) -> bool:
    m = _UNKNOWN_OUTPUT.search(str(error)) if error is not None else None
    if m is None:
        return False
    parts = m.group(1).split(".")
    for cut in range(len(parts) - 1, 0, -1):  # module prefix, then attributes (nested classes)
        obj = sys.modules.get(".".join(parts[:cut]))
        if obj is None:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name, None)
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            pytrees.register_dataclass_pytree(obj)
            return True
        return False
    return False


def _trace_joint(module: torch.nn.Module, args, kwargs) -> JointGraph:
    args, kwargs = normalize_call(module, args, kwargs)
    _refuse_submodule_hooks(module)
    flex_attention.register_block_mask_pytree()
    leaves, in_spec = pytree.tree_flatten((args, kwargs))
    traced = _trace_stamped(module, leaves, in_spec) if _trace_stamp.enabled() else None
    if traced is None:
        traced = (*_export(module, leaves, in_spec), "")
    gm, out_spec, calls, stamped = traced
    _merge_tied_state(gm, module)
    joint = _joint_of(gm, leaves, in_spec, out_spec, module.training)
    joint.module_calls = calls
    joint.stamped = stamped
    return joint


def _trace_stamped(module, leaves, in_spec):
    """(gm, out_spec, module calls, stack FQN) traced with four layers of a stack of alike layers and
    stamped to all of them; None when the module has no such stack or the stamp is refused
    (then it is traced whole, which gives the same graph, only slower)."""
    inner = _traced_module(module)
    if inner is not module and not hasattr(module, "_tlm_rewrap"):
        # A wrapper calling the model functionally that cannot be rebuilt around the
        # truncated stack would still hold every layer's parameters. Traced whole.
        return None
    stack = _trace_stamp.find_layer_stack(inner)
    if stack is None:
        return None
    t0 = time.perf_counter()
    try:
        _trace_stamp.check_layers_run_alike(module, stack, leaves, in_spec)
        with stack.truncated():
            # A wrapper (the mixed-precision cast) is rebuilt around the four layers kept,
            # casting each layer's parameters inside it as the whole model's wrapper does.
            traced = module if inner is module else module._tlm_rewrap(list(stack.container._modules.values()))
            gm, out_spec, calls = _export(traced, leaves, in_spec)
        gm, calls = _trace_stamp.stamp(gm, stack, calls)
    except Exception as e:  # noqa: BLE001  (the whole trace decides; it raises what is really wrong)
        _log.info("tracing '%s' whole: its %d layers do not stamp (%s: %s)", stack.path, stack.count,
                  type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return None
    _log.info("traced 4 of the %d layers of '%s' and stamped the rest in %.2f s", stack.count, stack.path,
              time.perf_counter() - t0)
    return gm, out_spec, calls, stack.path


def _export(module, leaves, in_spec):
    """(gm, out_spec, module calls) of one export of module(*args, **kwargs)."""
    before = _python_state(module)
    fake_mode = fake_tensors.FakeTensorMode()
    state = _fake_state(module, fake_mode)
    fake_args, fake_kwargs = pytree.tree_unflatten([_fake_like(x, fake_mode) for x in leaves], in_spec)
    with contextlib.ExitStack() as stack, _module_stack(module) as where:
        stack.enter_context(tracing_context())
        stack.enter_context(tracing.reentrant_checkpoints_refused())
        stack.enter_context(tracing.reparametrized(module, state))
        try:
            jd = joint_export.export_joint(stack, module, fake_args, fake_kwargs)
        except RegionMutationError:
            raise  # already names the region and what to do
        except UnsupportedModelError:
            raise
        except Exception as e:  # noqa: BLE001  (every tracing failure gets the place and a hint)
            raise _explain(e, module, where, leaves) from e
        gm = jd.graph_module
        out_spec = jd.out_spec
    _check_python_state(module, before)
    return gm, out_spec, list(where.calls)


def _fake_like(x, mode):
    """A fake tensor with `x`'s global shape, dtype, device and requires_grad (DTensors
    included); non-tensors unchanged."""
    if not isinstance(x, torch.Tensor):
        return x
    device = x.to_local().device if hasattr(x, "to_local") else x.device
    if device.type == "meta":
        # A model built on the meta device traces as CPU fake tensors: with meta tensors
        # some ops reach their Meta kernel without autograd (nll_loss in 2.13: cross-entropy
        # then has no backward at all). Fake tensors allocate nothing either way.
        device = torch.device("cpu")
    with mode:
        return torch.empty(tuple(x.shape), dtype=x.dtype, device=device, requires_grad=x.requires_grad)


def _fake_state(module: torch.nn.Module, mode) -> dict:
    """Fake parameters and buffers (global shapes) by FQN: plans never read the values, and
    a module that is already parallelized (DTensors) or on the meta device traces alike."""
    state = {n: _fake_like(p, mode) for n, p in module.named_parameters()}
    state.update({n: _fake_like(b, mode) for n, b in module.named_buffers()})
    return state


def _merge_tied_state(gm: torch.fx.GraphModule, module: torch.nn.Module) -> None:
    """One placeholder per tensor of state. Export lifts a tied weight (GPT-2's embedding and
    LM head) once per FQN; planned apart, its aliases could get different placements for one
    tensor. The aliases' uses move to the first FQN's placeholder (the name named_parameters()
    keeps) and their gradients are summed into its gradient, as autograd sums them."""
    canonical = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        canonical[name] = canonical.setdefault(id(t), name)
    keep, merged = {}, {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        role, name = descriptors.describe_input(n.meta.get("desc"))
        if role not in ("param", "buffer") or name not in canonical:
            continue
        first = canonical[name]
        if first not in keep:
            keep[first] = n
        else:
            merged[n] = keep[first]
    if not merged:
        return
    out = next(n for n in gm.graph.nodes if n.op == "output")
    outs, descs = list(out.args[0]), list(out.meta.get("desc") or [])
    grad_at = {}
    for k, d in enumerate(descs):
        role, name = descriptors.describe_output(d)
        if role == "mutation" and name in {descriptors.describe_input(m.meta.get("desc"))[1] for m in merged}:
            raise UnsupportedModelError(f"forward writes into buffer '{name}', which is tied to another buffer; "
                                        f"a planned program keeps one tensor per buffer")
        if role == "grad":
            grad_at[name] = k
    drop = set()
    for alias, target in merged.items():
        alias_name = descriptors.describe_input(alias.meta.get("desc"))[1]
        target_name = descriptors.describe_input(target.meta.get("desc"))[1]
        alias.replace_all_uses_with(target)
        ka, kt = grad_at.get(alias_name), grad_at.get(target_name)
        if ka is not None:
            ga, gt = outs[ka], outs[kt] if kt is not None else None
            if ga is not None and gt is not None:
                with gm.graph.inserting_before(out):
                    total = gm.graph.call_function(torch.ops.aten.add.Tensor, (gt, ga))
                total.meta = {k: v for k, v in gt.meta.items() if k in ("val", "tensor_meta", "partitioner_tag")}
                outs[kt] = total
            elif ga is not None and kt is not None:
                outs[kt] = ga
            drop.add(ka)
    out.args = ([o for k, o in enumerate(outs) if k not in drop],)
    out.meta["desc"] = [d for k, d in enumerate(descs) if k not in drop]
    for alias in merged:
        gm.graph.erase_node(alias)
    gm.graph.lint()
    gm.recompile()


def _joint_of(gm, leaves, in_spec, out_spec, training) -> JointGraph:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    descs = out.meta.get("desc") or []
    roles = [descriptors.describe_output(d) for d in descs]
    for role, target in roles:
        if role == "input_mutation":
            raise UnsupportedModelError(
                f"forward writes in place into its input ({target}); a planned program holds inputs as shards "
                f"and cannot write them back. Return the new value instead of writing into the argument.")
        if role == "unknown":
            raise UnsupportedModelError(f"the traced graph has an output torch_localmap does not understand ({target})")
    params, buffers, backward = [], [], False
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        role, name = descriptors.describe_input(n.meta.get("desc"))
        if role == "param":
            params.append(name)
        elif role == "buffer":
            buffers.append(name)
        elif role == "tangent":
            backward = True
        elif role == "unknown":
            raise UnsupportedModelError(f"the traced graph has an input torch_localmap does not understand ({name})")
    backward = backward or any(r == "grad" for r, _ in roles)
    tighten_value_lifetimes(gm, [r for r, _ in roles])
    return JointGraph(
        gm=gm,
        num_fwd_outputs=sum(1 for r, _ in roles if r in ("output", "mutation")),
        param_names=params,
        buffer_names=buffers,
        input_spec=in_spec,
        input_leaves=list(leaves),
        output_spec=out_spec,
        num_outputs=sum(1 for r, _ in roles if r == "output"),
        mutated_buffers=[t for r, t in roles if r == "mutation"],
        backward=backward,
        training=training,
    )


# ---- what a graph cannot represent ---------------------------------------------------

# Hooks a planned program needs no step of. Hugging Face's activation checkpointing (and PEFT,
# through the same call) registers `make_inputs_require_grads` on the input embeddings: it marks
# their output as requiring grad, so that a checkpointed layer sees a differentiable input even
# when the embeddings are frozen. The planned program differentiates its joint graph with
# respect to every parameter that requires grad, whatever the flags of the values between, so
# the hook has nothing left to do there.
_NO_STEP_HOOKS = {("transformers.modeling_utils",
                   "PreTrainedModel.enable_input_require_grads.<locals>.make_inputs_require_grads")}


def _needs_a_step(hook) -> bool:
    return (getattr(hook, "__module__", None), getattr(hook, "__qualname__", None)) not in _NO_STEP_HOOKS


def _refuse_submodule_hooks(module: torch.nn.Module) -> None:
    """Hooks on submodules run once, at trace time, not at every call: refuse them."""
    hooked = []
    for name, sub in module.named_modules():
        if not name:
            continue  # the root's hooks run around the planned program (ParallelModule)
        kinds = [k for k, d in (("forward pre-hook", sub._forward_pre_hooks), ("forward hook", sub._forward_hooks))
                 if any(_needs_a_step(h) for h in d.values())]
        if kinds:
            hooked.append(f"'{name}' ({', '.join(kinds)})")
    if hooked:
        raise UnsupportedModelError(
            f"submodules with hooks: {', '.join(hooked)}. A planned program runs the traced graph, so a hook on a "
            f"submodule would run once while tracing, not at every step. Remove the hooks before planning, or "
            f"register them on the root module (those run around every call).")


def _python_state(module: torch.nn.Module) -> dict:
    """Plain Python attributes of every submodule (ints, floats, strings, bools, None, and
    the lengths of lists/dicts): what a forward could write that the graph cannot record."""
    state = {}
    for name, sub in module.named_modules():
        for k, v in vars(sub).items():
            if k.startswith("_"):
                continue
            if isinstance(v, (bool, int, float, str, type(None))):
                state[(name, k)] = v
            elif isinstance(v, (list, dict, set)):
                state[(name, k)] = ("len", len(v))
    return state


def _check_python_state(module: torch.nn.Module, before: dict) -> None:
    after = _python_state(module)
    changed = [(k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after), key=str)
               if before.get(k) != after.get(k)]
    if changed:
        (name, attr), old, new = changed[0]
        where = f"'{name}'" if name else "the root module"
        raise UnsupportedModelError(
            f"forward of {where} changes its Python attribute '{attr}' ({old!r} -> {new!r}); the planned program "
            f"runs the traced graph and would not repeat that write. Keep such state in a registered buffer "
            f"(self.register_buffer) and update it with tensor ops, or move the update out of forward.")


MODULE_ANNOTATION = "tlm_module"  # node.meta["custom"] key: the module call that made the node


@dataclass(frozen=True)
class ModuleCall:
    """One call of a submodule while tracing, in call order. `name` is the FQN for a
    module's first call and "fqn@k" for its k-th repeat (as torch.export's unflatten
    names repeated calls); the root module is ""."""

    name: str
    fqn: str
    call: int
    type: str
    parent: str | None
    depth: int


@contextlib.contextmanager
def _module_stack(module: torch.nn.Module):
    """Tracks which submodule's forward is running (FQN, for error messages) and labels
    every traced node with the module call that made it (MODULE_ANNOTATION); backward
    nodes inherit their forward node's label."""
    stack: list = []  # (fqn, call name, annotation context)
    calls: list = []
    counts: dict = {}

    def enter(fqn, sub):
        def hook(*_args):
            if fqn == "":  # the root: tracing may run forward more than once; label the last run
                calls.clear()
                counts.clear()
            k = counts.get(fqn, 0)
            counts[fqn] = k + 1
            name = fqn if k == 0 else f"{fqn}@{k}"
            parent = stack[-1][1] if stack else None
            calls.append(ModuleCall(name, fqn, k, type(sub).__name__, parent, len(stack)))
            ctx = node_meta.node_annotation(MODULE_ANNOTATION, name)
            ctx.__enter__()
            stack.append((fqn, name, ctx))  # returns None: the hook changes nothing
        return hook

    def leave(*_args):
        if stack:
            stack.pop()[2].__exit__(None, None, None)

    handles = []
    for name, sub in _traced_module(module).named_modules():
        handles.append(sub.register_forward_pre_hook(enter(name, sub)))
        handles.append(sub.register_forward_hook(leave, always_call=True))
    where = _Where(stack, calls)
    try:
        yield where
    finally:
        while stack:
            stack.pop()[2].__exit__(None, None, None)
        for h in handles:
            h.remove()


def _traced_module(module: torch.nn.Module) -> torch.nn.Module:
    """The model whose submodules a wrapper's forward runs (a mixed-precision cast calls
    the model functionally), else the module itself."""
    return getattr(module, "_tlm_traced_module", module)


class _Where:
    def __init__(self, stack, calls):
        self.stack = stack
        self.calls = calls

    def module(self) -> str:
        return self.stack[-1][0] if self.stack else ""


_HINTS = (
    ("DataDependent", "the model branches on or sizes a tensor by its values (e.g. .item(), a boolean of a "
                      "tensor, a nonzero-sized result); a planned program is fixed when planned. Compute the "
                      "value outside forward and pass it as an argument, or wrap the code in "
                      "torch_localmap.local_map"),
    ("GuardOnDataDependent", "the model branches on a tensor's values; a planned program is fixed when "
                             "planned. Pass the decision as an argument instead"),
    ("RegionClosureError", "pass every tensor a local_map body reads as an argument of the local_map "
                           "function (with its in_placements), not through a closure"),
    ("DynamicOutputShape", "an output's size depends on tensor values (nonzero, boolean-mask indexing, unique); "
                           "a planned program has fixed shapes. Keep the shape fixed (torch.where or "
                           "masked_fill with the mask) or move the code out of forward and pass its result as an "
                           "argument"),
    ("ReentrantCheckpointError", "checkpoint with use_reentrant=False (Hugging Face: "
                                 "gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': "
                                 "False}), its default), or no checkpointing: the planner chooses what backward "
                                 "recomputes (parallelize's recompute=True)"),
    ("not a known type", "the model returns an object torch cannot flatten; return tensors, tuples, dicts, "
                         "dataclasses or ModelOutput, or register the type with "
                         "torch.utils._pytree.register_pytree_node"),
)


def _explain(e: BaseException, module: torch.nn.Module, where: _Where, leaves) -> Exception:
    text = f"{type(e).__name__}: {e}"
    hint = next((h for key, h in _HINTS if key in text), "check the model runs on the example inputs eagerly")
    mod = where.module()
    at = f" in '{mod}'" if mod else ""
    line = _user_line(e)
    shapes = [tuple(x.shape) for x in leaves if isinstance(x, torch.Tensor)]
    return UnsupportedModelError(
        f"tracing {type(module).__name__} with example inputs of shapes {shapes} failed{at}"
        f"{(' at ' + line) if line else ''}: {text.splitlines()[0]}\nWhat to do: {hint}.")


def _user_line(e: BaseException) -> str:
    """file:line of the innermost frame outside torch and torch_localmap."""
    skip = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)))
    frames = traceback.extract_tb(e.__traceback__)
    for f in reversed(frames):
        path = os.path.abspath(f.filename)
        if not path.startswith(skip) and "<" not in f.filename:
            return f"{f.filename}:{f.lineno} ({f.line.strip() if f.line else f.name})"
    return ""
