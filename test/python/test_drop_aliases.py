"""Eager rank programs drop the views that return their input unchanged
(_runtime/drop_aliases.py): the graph computes the same values, forward's outputs stay as
they were, and no two gradients become one tensor."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_localmap._runtime.drop_aliases import drop_unchanged_aliases

aten = torch.ops.aten


def _traced(fn, *args):
    return make_fx(fn, tracing_mode="fake")(*args)


def _count(gm, *targets):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target in targets)


def _program(x, w):
    a = torch.mm(x, w)
    same = a.view(4, 3)  # unchanged: dropped
    flat = same.reshape(12)  # another shape: kept
    d = a.detach()  # unchanged, but priced as a dispatch: kept
    return flat * 2, d.t().sum(), a.view(4, 3), a.view(4, 3)


def test_unchanged_aliases_are_dropped_and_the_values_kept():
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    expected = _program(x, w)

    forward = _traced(_program, x, w)
    views = _count(forward, aten.view.default)
    detaches = _count(forward, aten.detach.default)
    assert drop_unchanged_aliases(forward) == 1  # the view; outputs untouched
    assert _count(forward, aten.detach.default) == detaches == 1 and _count(forward, aten.view.default) == views - 1
    for got, want in zip(forward(x, w), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)

    backward = _traced(_program, x, w)  # as a backward graph: outputs are gradients
    assert drop_unchanged_aliases(backward, outputs_are_gradients=True) == 2  # one output view more
    outs = backward(x, w)
    assert outs[2] is not outs[3]  # two gradients never share one tensor
    for got, want in zip(outs, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_views_that_change_the_shape_stay():
    def fn(x):
        return x.view(2, 8).sum(), x.t().view(1, 4, 4), x.view(16)

    gm = _traced(fn, torch.randn(4, 4))
    assert drop_unchanged_aliases(gm, outputs_are_gradients=True) == 0
