"""The rank program's backward computes a transposed product in the layout it is used in
(_runtime/transposed_products.py): same values, a contiguous gradient, and no rewrite where
a reader could depend on the transposed layout."""
import torch
import torch.fx as fx

from torch_localmap._runtime.transposed_products import contiguous_transposed_products

aten = torch.ops.aten


def _graph(reader):
    """x: (4, 3), g: (4, 5) -> t(mm(t(x), g)) read by `reader` ("output" or "view": an unsqueeze)."""
    g = fx.Graph()
    x, grad = g.placeholder("x"), g.placeholder("g")
    prod = g.call_function(aten.t.default, (g.call_function(aten.mm.default, (g.call_function(aten.t.default, (x,)), grad)),))
    out = prod if reader == "output" else g.call_function(aten.unsqueeze.default, (prod, 0))
    g.output((out,))
    gm = fx.GraphModule(torch.nn.Module(), g)
    for n, v in zip([n for n in g.nodes if n.op == "placeholder"], (torch.randn(4, 3), torch.randn(4, 5))):
        n.meta["val"] = v
    for n in g.nodes:
        if n.op == "call_function":
            n.meta["val"] = n.target(*fx.node.map_arg(n.args, lambda a: a.meta["val"]))
    return gm


def test_a_gradient_read_by_the_output_is_computed_contiguous_with_the_same_values():
    gm = _graph("output")
    x, g = torch.randn(4, 3), torch.randn(4, 5)
    before = gm(x, g)[0]
    assert not before.is_contiguous()
    assert contiguous_transposed_products(gm) == 1
    after = gm(x, g)[0]
    assert after.is_contiguous() and after.shape == (5, 3)
    torch.testing.assert_close(after, before)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"].count(aten.mm.default) == 1
    assert next(n for n in gm.graph.nodes if n.target is aten.mm.default).meta["val"].shape == (5, 3)


def test_a_transposed_product_read_by_a_view_is_left_alone():
    gm = _graph("view")
    code = gm.code
    assert contiguous_transposed_products(gm) == 0
    assert gm.code == code
