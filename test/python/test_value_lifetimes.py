"""The joint graph's order as a training runtime runs it (_value_lifetimes.py): a mixed-
precision wrapper's parameter casts sit where their layers use them, not all at forward's
start, and each gradient's upcast right after backward makes it, not all at backward's end.
The planner's memory model follows the graph's order, so without this a bf16 Llama would
hold every layer's cast weights and unreduced gradients at once."""
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from torch_localmap import models
from torch_localmap import _mixed_precision as mp
from torch_localmap._torch_private import descriptors, node_meta
from torch_localmap._trace import trace_joint

POLICY = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
aten = torch.ops.aten


def _joint():
    torch.manual_seed(0)
    model, inputs = models.build("llama", models.tiny_config("llama"), batch=2)
    return trace_joint(mp.CastParameters(model, POLICY), inputs)


def test_parameter_casts_sit_just_before_their_first_use():
    graph = _joint().gm.graph
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    # Casts, views and slices of parameters and buffers (rotary tables), and of those.
    made_from_state = {n for n in nodes if n.op == "placeholder"
                       and descriptors.describe_input(n.meta.get("desc"))[0] in ("param", "buffer")}
    for n in nodes:
        if n.op == "call_function" and len(n.all_input_nodes) == 1 and n.all_input_nodes[0] in made_from_state:
            made_from_state.add(n)
    casts = [n for n in nodes if n.target is aten._to_copy.default and n.args[0].op == "placeholder"
             and n.meta["val"].dtype == torch.bfloat16 and not node_meta.is_backward_node(n)]
    assert len(casts) > 10
    for c in casts:
        first = min(c.users, key=pos.__getitem__)
        between = nodes[pos[c] + 1:pos[first]]
        assert all(b in made_from_state for b in between), (c, first, between)
    # Interleaved with the layers' compute: some forward compute runs before the last cast.
    last_cast = max(pos[c] for c in casts)
    assert any(n.op == "call_function" and n not in made_from_state for n in nodes[:last_cast])


def test_gradient_upcasts_follow_the_gradients_backward_makes():
    joint = _joint()
    graph = joint.gm.graph
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    out = nodes[-1]
    upcasts = [a for a in out.args[0] if isinstance(a, torch.fx.Node) and a.target is aten._to_copy.default
               and a.meta["val"].dtype == torch.float32 and a.args[0].meta["val"].dtype == torch.bfloat16]
    assert len(upcasts) > 10
    for u in upcasts:
        # Right after its input, or after the views between it and the op that made the gradient.
        chain = [u]
        while len(chain[-1].all_input_nodes) == 1 and pos[chain[-1]] - pos[chain[-1].all_input_nodes[0]] == 1:
            chain.append(chain[-1].all_input_nodes[0])
        maker = chain[-1]
        assert maker.target not in (aten.t.default, aten._to_copy.default, aten.view.default), (u, chain)
    # Spread over backward: the first upcast comes well before backward's last node.
    first_upcast = min(pos[u] for u in upcasts)
    assert first_upcast < len(nodes) - len(upcasts) - 10
