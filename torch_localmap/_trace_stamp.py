"""Tracing a stack of identical layers once and stamping its copies.

A 32-layer transformer's joint graph is 32 copies of one layer's forward and backward
between an embedding and a head; exporting it runs the same Python 32 times (most of the
planning time of an 8B model). When a module holds a ModuleList (or Sequential) of N >=
MIN_LAYERS layers that are alike (same submodule types, parameter and buffer shapes and
dtypes, same Python attributes apart from a layer index), the model is traced with four of
its layers — the first three and the last — and the graph of the third is stamped for the
layers in between.

The stamp is checked, not assumed. Before tracing, the whole forward runs once on meta
tensors (check_layers_run_alike): layers 1..N-1 must get the same arguments, and
the model must do the same between any two of them. After tracing, layers 1, 2 and N-1
must give the same operations on the same shapes, each wired to its neighbour the same way (layer t reads layer t-1's
node at the same position forward and layer t+1's backward), reading its own parameters
and otherwise only nodes outside the stack that every layer shares. Anything else — a
layer reading a node two layers back, a per-layer buffer written in forward, the head
collecting every layer's hidden state, layers that differ in a Python attribute (a drop
path rate, a sliding window flag) — refuses the stamp and the model is traced whole, so
the result is always the graph a whole trace gives. One case no check sees: a layer whose
own forward branches on its index attribute in a way layers 0, 1, 2 and N-1 do not show
(say, only layer 17 differs). Set TLM_TRACE_STAMP=0 to trace such a model whole.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from dataclasses import dataclass

import torch
import torch.fx as fx

from ._torch_private import descriptors, graph_module, node_meta, tracing
from ._integrations import tracing_context
from ._torch_private.pytrees import pytree

MIN_LAYERS = 6  # four are traced; below six the stamp saves too little to be worth a check
_TRACED = 4
_ENV = "TLM_TRACE_STAMP"


class StampRefused(Exception):
    """The traced layers do not stamp into the whole graph (the reason says why)."""


def enabled() -> bool:
    value = os.environ.get(_ENV, "1").strip().lower()
    if value not in ("0", "1", "false", "true", "off", "on"):
        raise ValueError(f"{_ENV}={value!r}: expected 1 (stamp repeated layers, the default) or 0 (trace whole)")
    return value in ("1", "true", "on")


@dataclass
class LayerStack:
    """A ModuleList/Sequential at `path` whose `layers` are alike."""

    path: str
    container: torch.nn.Module
    layers: list

    @property
    def count(self) -> int:
        return len(self.layers)

    def prefix(self, t) -> str:
        return f"{self.path}.{t}" if self.path else str(t)

    @contextlib.contextmanager
    def truncated(self):
        """The container holds layers 0, 1, 2 and N-1 (as "0".."3") for the duration."""
        saved = self.container._modules
        kept = [self.layers[0], self.layers[1], self.layers[2], self.layers[-1]]
        self.container._modules = type(saved)((str(k), m) for k, m in enumerate(kept))
        try:
            yield
        finally:
            self.container._modules = saved


# ---- finding the stack ------------------------------------------------------------------

def find_layer_stack(module: torch.nn.Module) -> LayerStack | None:
    """The stack of alike layers with the most parameters, or None."""
    best, best_size = None, 0
    shared = _shared_tensor_ids(module)
    for path, sub in module.named_modules():
        if not isinstance(sub, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        keys = list(sub._modules.keys())
        layers = list(sub._modules.values())
        if len(layers) < MIN_LAYERS or keys != [str(k) for k in range(len(keys))] or any(m is None for m in layers):
            continue
        if not _alike(layers) or any(id(t) in shared for m in layers for t in _state(m)):
            continue
        size = sum(p.numel() for m in layers for p in m.parameters())
        if size > best_size or best is None:
            best, best_size = LayerStack(path, sub, layers), size
    return best


def _state(m: torch.nn.Module) -> list:
    return list(m.parameters()) + list(m.buffers())


def _shared_tensor_ids(module: torch.nn.Module) -> set:
    """Ids of tensors reachable under two or more names (tied weights)."""
    seen, shared = set(), set()
    for _, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        (shared if id(t) in seen else seen).add(id(t))
    return shared


def _alike(layers: list) -> bool:
    signatures = [_signature(m) for m in layers]
    attrs = [s.pop() for s in signatures]
    if any(s != signatures[0] for s in signatures):
        return False
    # Python attributes: equal in every layer, except an int that counts the layers (layer_idx).
    for key in set().union(*attrs):
        values = [a.get(key, _MISSING) for a in attrs]
        if all(_same(v, values[0]) for v in values):
            continue
        if all(type(v) is int for v in values) and values == list(range(values[0], values[0] + len(values))):
            continue
        return False
    return True


_MISSING = object()
_SCALARS = (bool, int, float, str, type(None), torch.dtype, torch.device)


def _same(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, _SCALARS) or isinstance(a, (tuple, list)):
        return type(a) is type(b) and a == b
    return False  # other objects: only the very same object (a shared config) is alike


def _signature(m: torch.nn.Module) -> list:
    """[submodule types and modes, parameter and buffer metadata, {(submodule, attribute): value}]."""
    types = tuple((n, type(s).__qualname__, s.training) for n, s in m.named_modules())
    def meta(t):
        return (tuple(t.shape), t.dtype, t.requires_grad, type(t).__name__, str(getattr(t, "placements", "")))
    params = tuple((n, meta(p)) for n, p in m.named_parameters())
    buffers = tuple((n, meta(b)) for n, b in m.named_buffers())
    attrs = {}
    for n, s in m.named_modules():
        for k, v in vars(s).items():
            if not k.startswith("_"):
                attrs[(n, k)] = v
    return [types, params, buffers, attrs]


# ---- checking the whole forward -------------------------------------------------------

def check_layers_run_alike(module, stack, leaves, in_spec) -> None:
    """Runs the whole model's forward once on meta tensors (no graph, no gradients) and
    refuses the stamp unless layers 1..N-1 are called once each with the same argument
    shapes and values and the model runs the same ops (usually none) between consecutive
    layers. The truncated trace sees layers at positions 0-3 only: this catches what
    depends on a layer's place in the whole stack (arguments the parent computes from the
    loop index, a step every k-th layer) that layers 0, 1, 2 and N-1 alone would not show.
    Inside a layer, ops follow from its attributes (compared by find_layer_stack) and its
    arguments (compared here), so layers 2..N-1 are not run: each returns a copy of layer
    1's output (same shapes), and the check costs a forward of two layers."""
    n = stack.count
    inputs: list = [None] * n
    after = [[] for _ in range(n)]
    calls = [0] * n
    recorder = [None, None]  # the op-recording mode while it is on, and the layer it follows
    first_output = []

    def like_first_output(*_args, **_kwargs):
        if not first_output:
            raise StampRefused(f"a layer runs before {stack.prefix(1)}")
        return pytree.tree_map_only(torch.Tensor, lambda t: torch.empty_like(t), first_output[0])

    def record(func, args, kwargs):
        after[recorder[1]].append(_op_key(func, args, kwargs))

    def stop():
        if recorder[0] is not None:
            recorder[0].__exit__(None, None, None)
            recorder[0] = None

    def enter(i):
        def hook(_module, args, kwargs):
            stop()
            calls[i] += 1
            inputs[i] = _op_key("call", args, kwargs)
        return hook

    def leave(i):
        def hook(_module, _args, output):
            if i == 1:
                first_output.append(output)
            recorder[0], recorder[1] = tracing.recording_ops(record), i
            recorder[0].__enter__()
        return hook

    # Meta tensors: shapes only, C++ meta kernels; only calls and ops are compared.
    def meta(x):
        if not isinstance(x, torch.Tensor):
            return x
        local = x.to_local() if hasattr(x, "to_local") else x
        return torch.empty(tuple(x.shape), dtype=local.dtype, device="meta", requires_grad=x.requires_grad)

    state = {k: meta(t) for k, t in list(module.named_parameters()) + list(module.named_buffers())}
    meta_args, meta_kwargs = pytree.tree_unflatten([meta(x) for x in leaves], in_spec)
    handles = []
    for i, layer in enumerate(stack.layers):
        handles.append(layer.register_forward_pre_hook(enter(i), with_kwargs=True))
        handles.append(layer.register_forward_hook(leave(i)))
    for layer in stack.layers[2:]:
        layer.forward = like_first_output  # an instance attribute, deleted below
    try:
        with contextlib.ExitStack() as ctx:
            ctx.enter_context(tracing_context())
            ctx.enter_context(tracing.reparametrized(module, state))
            ctx.enter_context(torch.no_grad())
            try:
                module(*meta_args, **meta_kwargs)
            finally:
                stop()
    finally:
        for h in handles:
            h.remove()
        for layer in stack.layers[2:]:
            del layer.forward
    if calls != [1] * n:
        raise StampRefused(f"the layers are called {calls} times (expected once each)")
    for i in range(2, n):
        if inputs[i] != inputs[1]:
            raise StampRefused(f"layer {stack.prefix(i)} is called with other arguments than "
                                            f"{stack.prefix(1)}")
    for i in range(2, n - 1):
        if after[i] != after[1]:
            raise StampRefused(f"the model runs other ops after {stack.prefix(i)} than after "
                                            f"{stack.prefix(1)}")


def _op_key(func, args, kwargs) -> tuple:
    def leaf(x):
        if isinstance(x, torch.Tensor):
            return (tuple(x.shape), x.dtype)
        return repr(x)
    return (str(func), tuple(leaf(x) for x in pytree.tree_leaves((args, kwargs))))


# ---- checking the traced layers and stamping -------------------------------------------

@dataclass
class _Layer:
    fwd: list
    bwd: list

    @property
    def nodes(self) -> list:
        return self.fwd + self.bwd


def _module_annotation() -> str:
    """The node-meta key tracing labels module calls with (_trace.MODULE_ANNOTATION; read
    when used: _trace imports this module)."""
    from ._trace import MODULE_ANNOTATION

    return MODULE_ANNOTATION


def _layer_of(label: str | None, stack: LayerStack) -> int | None:
    """Traced layer index (0..3) of a module-call label, -1 for a label outside the stack,
    None for no label."""
    if label is None:
        return None
    for t in range(_TRACED):
        p = stack.prefix(t)
        if label == p or label.startswith(p + ".") or label.startswith(p + "@"):
            if "@" in label:
                raise StampRefused(f"layer '{p}' runs a submodule more than once ({label})")
            return t
    return -1


def _split(gm: fx.GraphModule, stack: LayerStack) -> tuple[list, dict]:
    """The traced layers' nodes (forward and backward, each a contiguous run) and each
    node's owner (0..3, or -1 outside the stack). An unlabelled node (a gradient
    accumulation) belongs to the labelled node before it: autograd sums a tensor's
    gradients right after the last use's gradient is made, in the layer that used it."""
    owner, previous_owner = {}, -1
    key = _module_annotation()
    body = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    for n in body:
        t = _layer_of(node_meta.node_annotations(n).get(key), stack)
        if t is None:
            t = previous_owner
        owner[n] = previous_owner = t
    runs = {}
    previous = None
    for n in body:
        key = (owner[n], node_meta.is_backward_node(n))
        if key != previous and key[0] >= 0:
            if key in runs:
                raise StampRefused(f"layer {stack.prefix(key[0])}'s {'backward' if key[1] else 'forward'} nodes are "
                                   f"not one run (interleaved with other nodes)")
            runs[key] = []
        if key[0] >= 0:
            runs[key].append(n)
        previous = key
    layers = []
    for t in range(_TRACED):
        if (t, False) not in runs:
            raise StampRefused(f"no forward nodes labelled '{stack.prefix(t)}'")
        layers.append(_Layer(runs[(t, False)], runs.get((t, True), [])))
    return layers, owner


def _state_name(node: fx.Node, stack: LayerStack):
    """(kind, traced layer, name inside the layer) of a layer's parameter/buffer placeholder."""
    if node.op != "placeholder":
        return None
    role, name = descriptors.describe_input(node.meta.get("desc"))
    if role not in ("param", "buffer"):
        return None
    for t in range(_TRACED):
        p = stack.prefix(t) + "."
        if name.startswith(p):
            return role, t, name[len(p):]
    return None


def _leaves(n: fx.Node) -> list:
    out = []
    fx.node.map_aggregate((n.args, n.kwargs), out.append)
    return out


def _skeleton(n: fx.Node, gm: fx.GraphModule):
    """What must be equal between corresponding nodes, node arguments left out (a constant
    by its value: each layer's constant has its own name)."""
    if n.op == "get_attr":
        value = getattr(gm, n.target, None)
        if isinstance(value, torch.Tensor):
            return ("get_attr", tuple(value.shape), value.dtype, value.detach().cpu().flatten().tolist()
                    if value.numel() <= 4096 and value.device.type != "meta" else id(value))
    val = n.meta.get("val")
    shape = (tuple(val.shape), val.dtype, tuple(val.stride())) if isinstance(val, torch.Tensor) else type(val)
    leaves = tuple("<node>" if isinstance(x, fx.Node) else (type(x), repr(x)) for x in _leaves(n))
    return (n.op, str(n.target), shape, node_meta.is_backward_node(n), leaves)


def _check_alike(gm, a: int, layers: list, stack: LayerStack, pos: dict, owner: dict) -> None:
    """Traced layers a and a+1 run the same operations, wired alike: every node argument
    of layer a+1 is its own node at the same position, layer a's node where layer a reads
    layer a-1's (forward chaining), layer a+2's where layer a reads layer a+1's (backward),
    its own parameter where layer a reads its own, or the same shared node."""
    b = a + 1
    la, lb = layers[a].nodes, layers[b].nodes
    if len(la) != len(lb) or len(layers[a].fwd) != len(layers[b].fwd):
        raise StampRefused(f"layers {stack.prefix(a)} and {stack.prefix(b)} trace to different graphs "
                           f"({len(la)} and {len(lb)} nodes)")
    for x, y in zip(la, lb):
        if _skeleton(x, gm) != _skeleton(y, gm):
            raise StampRefused(f"layers {stack.prefix(a)} and {stack.prefix(b)} differ at {x.name} / {y.name} "
                               f"({x.target})")
        for u, v in zip(_leaves(x), _leaves(y)):
            if isinstance(u, fx.Node) and not _wired_alike(u, v, a, b, pos, owner, stack):
                raise StampRefused(f"layers {stack.prefix(a)} and {stack.prefix(b)} read different inputs at "
                                   f"{x.name} / {y.name} ({u.name} / {v.name})")


def _wired_alike(u, v, a, b, pos, owner, stack) -> bool:
    su, sv = _state_name(u, stack), _state_name(v, stack)
    if su is not None or sv is not None:  # each reads its own parameter of the same name
        return su is not None and sv is not None and (su[0], su[2]) == (sv[0], sv[2]) and (su[1], sv[1]) == (a, b)
    tu, tv = owner.get(u, -1), owner.get(v, -1)
    if tu == -1 and tv == -1:
        return u is v  # a node outside the stack that every layer shares
    if tv == -1 and b == _TRACED - 1 and tu == b:  # the last layer's backward starts from the head
        return True
    # own node, the previous layer's (forward) or the next layer's (backward), same position
    return tu + 1 == tv and tv in (a, b, b + 1) and pos[u] == pos[v]


def stamp(gm: fx.GraphModule, stack: LayerStack, calls: list) -> tuple[fx.GraphModule, list]:
    """The whole model's joint graph (and module calls) from the graph traced with
    `stack.truncated()`. Raises StampRefused when the traced layers do not stamp."""
    layers, owner = _split(gm, stack)
    pos = {n: k for layer in layers for k, n in enumerate(layer.nodes)}
    # Layers 0 and N-1 are traced as they are; what is stamped is layer 2, so it must match
    # layer 1 (its wiring to the previous layer) and layer N-1 (to the next). Layer 0 may
    # differ (its input may need no gradient).
    for a in (1, 2):
        _check_alike(gm, a, layers, stack, pos, owner)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for n in layers[1].nodes + layers[2].nodes:
        for user in n.users:
            if user is not out and owner.get(user, -1) == -1:
                raise StampRefused(f"{user.name} outside the layers reads {n.name} of a middle layer "
                                   f"(every layer's copy would need it)")
    try:
        graph = _Stamper(gm, stack, layers, owner, pos).build()
    except KeyError as e:  # a node read before it is made: the layers do not chain as checked
        raise StampRefused(f"stamped layers read {e} out of order") from None
    graph.lint()
    return graph_module.lazy_graph_module(gm, graph), _stamp_calls(calls, stack)


class _Stamper:
    """Builds the whole graph: traced layers 0 and 1 as they are, traced layer 2 once per
    layer 2..N-2 (forward in layer order, backward in reverse), traced layer 3 as N-1."""

    def __init__(self, gm, stack, layers, owner, pos):
        self.gm, self.stack, self.layers, self.owner, self.pos = gm, stack, layers, owner, pos
        self.annotation = _module_annotation()
        self.n = stack.count
        self.copies = range(2, self.n - 1)
        self.template = layers[2]
        nrs = [m.meta["seq_nr"] for m in gm.graph.nodes if isinstance(m.meta.get("seq_nr"), int)]
        self.seq_span = 1 + max(nrs, default=0)  # copies get their own autograd sequence numbers
        self.graph = fx.Graph()
        self.env = {}  # traced node -> new node (everything but traced layer 2)
        self.primals = 0
        self.inst = {layer: {} for layer in self.copies}  # layer -> {traced layer-2 node: new node}
        self.state = {layer: {} for layer in self.copies}  # layer -> {(kind, name): placeholder}

    def real(self, t: int) -> int:
        return self.n - 1 if t == _TRACED - 1 else t

    def build(self) -> fx.Graph:
        layer2_state = {}  # kind ("param" / "buffer") -> traced layer 2's placeholders of that kind
        for n in self.gm.graph.nodes:
            s = _state_name(n, self.stack)
            if s is not None and s[1] == 2:
                layer2_state.setdefault(s[0], []).append(n)
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node, layer2_state)
            elif node.op == "output":
                self.output(node)
            elif self.owner.get(node, -1) == 2:
                run = self.template.fwd if node is self.template.fwd[0] else \
                    self.template.bwd if self.template.bwd and node is self.template.bwd[0] else None
                if run is not None:  # every copy's run, where the traced one was
                    for layer in (self.copies if run is self.template.fwd else reversed(self.copies)):
                        for m in run:
                            self.inst[layer][m] = self.copy(m, layer, lambda x, layer=layer: self.read(x, layer))
            else:
                t = self.owner.get(node, -1)
                self.env[node] = self.copy(node, self.real(t) if t >= 0 else None, lambda x, t=t: self.read_traced(x, t))
        return self.graph

    def copy(self, node, layer, read):
        new = self.graph.node_copy(node, read)
        meta = dict(node.meta)
        if layer is not None:
            custom = dict(node_meta.node_annotations(node))
            label = custom.get(self.annotation)
            t = _layer_of(label, self.stack)
            if t is not None and t >= 0:
                custom[self.annotation] = self.stack.prefix(layer) + label[len(self.stack.prefix(t)):]
                meta["custom"] = custom
            if self.owner.get(node) == 2 and isinstance(meta.get("seq_nr"), int):
                meta["seq_nr"] += (layer - 2) * self.seq_span
        new.meta = meta
        return new

    def read(self, x, layer):
        """What stamped layer `layer`'s copy of a traced layer-2 node reads for argument x."""
        s = _state_name(x, self.stack)
        if s is not None:
            return self.state[layer][(s[0], s[2])]
        t = self.owner.get(x, -1)
        if t == 2:
            return self.inst[layer][x]
        if t == 1:  # the previous layer's node at the same position
            return self.inst[layer - 1][self.template.nodes[self.pos[x]]] if layer > 2 else self.env[x]
        if t == 3:  # the next layer's
            return self.inst[layer + 1][self.template.nodes[self.pos[x]]] if layer < self.n - 2 else self.env[x]
        return self.env[x]

    def read_traced(self, x, reader: int):
        """What a node outside traced layer 2 reads: layer 1 reads layer 2's first copy
        (backward), layer 3 (now N-1) its last (forward)."""
        if self.owner.get(x, -1) == 2:
            return self.inst[2 if reader == 1 else self.n - 2][x]
        return self.env[x]

    def placeholder(self, node, layer2_state):
        s = _state_name(node, self.stack)
        if s is not None and s[1] == 2:
            group = layer2_state[s[0]]
            if node is group[0]:  # the group of every layer 2..N-2, in layer order
                for layer in self.copies:
                    for p in group:
                        kind, _, name = _state_name(p, self.stack)
                        new = self.new_placeholder(p)
                        new.meta["desc"] = descriptors.state_input_desc(kind, f"{self.stack.prefix(layer)}.{name}")
                        self.state[layer][(kind, name)] = new
            return
        new = self.new_placeholder(node)
        if s is not None and s[1] == _TRACED - 1:
            new.meta["desc"] = descriptors.state_input_desc(s[0], f"{self.stack.prefix(self.n - 1)}.{s[2]}")
        self.env[node] = new

    def new_placeholder(self, node):
        """A copy of placeholder `node`; inputs are numbered afresh in order, as a whole
        trace numbers them (primals_1, ... in a joint graph; arg0_1, ... forward-only)."""
        name = str(node.target)
        if re.fullmatch(r"primals_\d+", name):
            self.primals += 1
            name = f"primals_{self.primals}"
        elif re.fullmatch(r"arg\d+_1", name):
            self.primals += 1
            name = f"arg{self.primals - 1}_1"
        new = self.graph.placeholder(name, type_expr=node.type)
        new.meta = dict(node.meta)
        return new

    def output(self, node):
        values, descs = list(node.args[0]), list(node.meta.get("desc") or [])
        if len(values) != len(descs):
            raise StampRefused("the graph's outputs carry no descriptors")
        roles = [descriptors.describe_output(d) for d in descs]
        prefix2, prefix3 = self.stack.prefix(2) + ".", self.stack.prefix(_TRACED - 1) + "."
        of_2 = [k for k, (role, name) in enumerate(roles) if role == "grad" and name.startswith(prefix2)]
        new_values, new_descs = [], []
        for k, (value, desc, (role, name)) in enumerate(zip(values, descs, roles)):
            if role == "mutation" and any(name.startswith(self.stack.prefix(t) + ".") for t in range(_TRACED)):
                raise StampRefused(f"forward writes buffer '{name}' of a layer (per-layer state is traced whole)")
            if k in of_2:
                if k != of_2[0]:
                    continue
                for layer in self.copies:  # every layer's gradients, in parameter order
                    for j in of_2:
                        v, rel = values[j], roles[j][1][len(prefix2):]
                        if v is not None and self.owner.get(v, -1) != 2:
                            raise StampRefused(f"the gradient of {prefix2}{rel} is not made in its layer")
                        new_values.append(self.inst[layer][v] if v is not None else None)
                        new_descs.append(descriptors.param_grad_desc(f"{self.stack.prefix(layer)}.{rel}"))
                continue
            if value is not None and self.owner.get(value, -1) == 2:
                raise StampRefused(f"output {name} is made in a middle layer")
            new_values.append(self.env[value] if value is not None else None)
            if role == "grad" and name.startswith(prefix3):
                desc = descriptors.param_grad_desc(f"{self.stack.prefix(self.n - 1)}.{name[len(prefix3):]}")
            new_descs.append(desc)
        out = self.graph.output(tuple(new_values) if isinstance(node.args[0], tuple) else new_values)
        out.meta = dict(node.meta)
        out.meta["desc"] = new_descs
        self.env[node] = out


def _stamp_calls(calls: list, stack: LayerStack) -> list:
    """Module calls with traced layer 3 renamed N-1 and layer 2's calls repeated for 3..N-2."""
    def layer(call):
        return next((t for t in range(_TRACED) if call.fqn == stack.prefix(t)
                     or call.fqn.startswith(stack.prefix(t) + ".")), None)

    def rename(call, t, real):
        def sub(text):
            p = stack.prefix(t)
            if text is not None and (text == p or text.startswith(p + ".") or text.startswith(p + "@")):
                return stack.prefix(real) + text[len(p):]
            return text
        return dataclasses.replace(call, name=sub(call.name), fqn=sub(call.fqn), parent=sub(call.parent))

    of_2 = [c for c in calls if layer(c) == 2]
    out = []
    for c in calls:
        t = layer(c)
        out.append(rename(c, t, stack.count - 1) if t == _TRACED - 1 else c)
        if t == 2 and c is of_2[-1]:
            for real in range(3, stack.count - 1):
                out.extend(rename(x, 2, real) for x in of_2)
    return out
