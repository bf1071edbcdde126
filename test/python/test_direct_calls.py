"""The eager rank program calls its most frequent ops through torch's Python bindings
(_runtime/direct_calls.py): each binding must compute what its OpOverload computes, for the
argument forms traced graphs pass (positional, keywords, scalars, lists), views staying views."""
import pytest
import torch
import torch.fx as fx

from torch_localmap._runtime.direct_calls import DIRECT, call_directly

aten = torch.ops.aten


def _cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x, y, x3 = r(4, 6), r(4, 6), r(3, 4, 5)
    return [
        (aten.view.default, (x, [6, 4]), {}),
        (aten.expand.default, (r(1, 6), [4, 6]), {}),
        (aten.permute.default, (x3, [2, 0, 1]), {}),
        (aten.transpose.int, (x3, 0, 2), {}),
        (aten.transpose.int, (x3, -1, -3), {}),
        (aten.t.default, (x,), {}),
        (aten.unsqueeze.default, (x, 1), {}),
        (aten.unsqueeze.default, (x, -1), {}),
        (aten.squeeze.dim, (r(4, 1, 6), 1), {}),
        (aten.select.int, (x3, 1, 2), {}),
        (aten.select.int, (x3, -1, -1), {}),
        (aten.detach.default, (x,), {}),
        (aten.clone.default, (x3.transpose(0, 2),), {"memory_format": torch.contiguous_format}),
        (aten.clone.default, (x3.transpose(0, 2),), {}),
        (aten.mm.default, (x, r(6, 3)), {}),
        (aten.bmm.default, (x3, r(3, 5, 2)), {}),
        (aten.addmm.default, (r(3), x, r(6, 3)), {}),
        (aten.addmm.default, (r(4, 3), x, r(6, 3)), {"beta": 0.5, "alpha": 2.0}),
        (aten.mul.Tensor, (x, y), {}),
        (aten.mul.Tensor, (x, 2.5), {}),
        (aten.mul.Tensor, (torch.arange(6), 0.5), {}),
        (aten.add.Tensor, (x, y), {"alpha": 3}),
        (aten.add.Tensor, (x, 1), {}),
        (aten.add.Tensor, (torch.arange(6), torch.arange(6)), {}),
        (aten.sub.Tensor, (x, y), {}),
        (aten.sub.Tensor, (x, 2.0), {"alpha": 2}),
        (aten.div.Tensor, (x, y), {}),
        (aten.div.Tensor, (torch.arange(6), 4), {}),
        (aten.neg.default, (x,), {}),
        (aten.sum.dim_IntList, (x3, [1]), {}),
        (aten.sum.dim_IntList, (x3, [1, -1], True), {"dtype": torch.float64}),
        (aten.mean.dim, (x3, [0, 2]), {}),
        (aten.mean.dim, (x3, [-1], True), {}),
        (aten.cat.default, ([x, y],), {}),
        (aten.cat.default, ([x, y], 1), {}),
        (aten.split_with_sizes.default, (x, [1, 3]), {}),
        (aten.split_with_sizes.default, (x, [2, 4], 1), {}),
        (aten.stack.default, ([x, y],), {}),
        (aten.stack.default, ([x, y], -1), {}),
        (aten.unbind.int, (x3, 1), {}),
        (aten.div.Scalar, (x, 3), {}),
        (aten.mean.default, (x,), {}),
        (aten.mean.default, (x,), {"dtype": torch.float64}),
        (aten.pow.Tensor_Scalar, (x, 2), {}),
        (aten.pow.Tensor_Scalar, (x.abs(), 0.5), {}),
        (aten.rsqrt.default, (x.abs() + 0.1,), {}),
        (aten.exp.default, (x,), {}),
        (aten.eq.Tensor, (torch.arange(6) % 3, torch.arange(6) % 2), {}),
        (aten.lt.Scalar, (x, 0.25), {}),
        (aten.where.self, (x > 0, x, y), {}),
        (aten.cumsum.default, (x, 1), {}),
        (aten.cumsum.default, (torch.arange(6), 0), {"dtype": torch.float32}),
        (aten.silu.default, (x,), {}),
        (aten.embedding.default, (x, torch.tensor([[0, 3], [2, 2]])), {}),
        (aten.embedding.default, (x, torch.tensor([0, 3, 1]), 1), {}),
        (aten._softmax.default, (x3, -1, False), {}),
        (aten._log_softmax.default, (x3, 1, False), {}),
        (aten.native_layer_norm.default, (x3, [5], r(5), r(5), 1e-5), {}),
        (aten.native_layer_norm.default, (x3, [4, 5], None, None, 1e-6), {}),
    ]


def _flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


@pytest.mark.parametrize("op,args,kwargs", _cases(), ids=lambda v: str(v) if isinstance(v, torch._ops.OpOverload)
                         else "")
def test_binding_computes_what_the_overload_computes(op, args, kwargs):
    want, got = _flat(op(*args, **kwargs)), _flat(DIRECT[op](*args, **kwargs))
    assert len(got) == len(want)
    base = args[0] if isinstance(args[0], torch.Tensor) else None
    for w, o in zip(want, got):
        assert (o.shape, o.dtype, o.stride()) == (w.shape, w.dtype, w.stride())
        torch.testing.assert_close(o, w, rtol=0, atol=0)
        if base is not None:  # a view of the input stays one; a new tensor stays new
            assert (o.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()) == \
                   (w.untyped_storage().data_ptr() == base.untyped_storage().data_ptr())


def test_every_listed_op_has_a_case():
    assert set(DIRECT) == {op for op, _, _ in _cases()}


def test_a_traced_graph_runs_the_same_through_the_bindings():
    def f(a, b):
        h = torch.ops.aten.mm.default(a, torch.ops.aten.t.default(b))
        h = torch.ops.aten.view.default(h, [2, 2, 3])
        h = torch.ops.aten.sum.dim_IntList(torch.ops.aten.mul.Tensor(h, 2.0), [1], True)
        return torch.ops.aten.sigmoid.default(h)  # not listed: keeps its OpOverload

    gm = fx.symbolic_trace(f)
    a, b = torch.randn(4, 5), torch.randn(3, 5)
    want = gm(a, b)
    metas = {n.name: dict(n.meta) for n in gm.graph.nodes}
    assert call_directly(gm) == 5
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.sigmoid.default in targets and not any(t in DIRECT for t in targets)
    assert {n.name: dict(n.meta) for n in gm.graph.nodes} == metas
    torch.testing.assert_close(gm(a, b), want, rtol=0, atol=0)


def test_generated_code_names_every_binding():
    """FX writes a call_function target into the graph's code by its qualified name: each
    binding must be found again under that name."""
    import importlib

    from torch.fx.node import _get_qualified_name

    for op, binding in DIRECT.items():
        head, *rest = _get_qualified_name(binding).split(".")
        obj = importlib.import_module(head)
        for part in rest:
            obj = getattr(obj, part)
        assert obj is binding, op
