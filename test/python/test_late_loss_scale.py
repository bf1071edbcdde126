"""The mean loss's gradients rescaled late (_runtime/late_loss_scale.py), on hand-built graphs:
which reads keep a gradient scaled and which rescale it first. Numerical parity on ranks is
in test_deferred_loss.py and test_torch_plans.py (a MoE whose auxiliary loss joins)."""
import operator

import torch
import torch.fx as fx

from torch_localmap._runtime.late_loss_scale import scale_loss_gradients_late, scales_late

aten = torch.ops.aten
c10d = torch.ops._c10d_functional
N, C = 6, 5


def _graphs(extra):
    """A forward that reduces its loss's token count and saves it, and a backward whose
    nll_loss_backward reads it; `extra(graph, grad, saved)` adds backward's reads of the
    loss's gradient and returns backward's outputs."""
    fw = fx.Graph()
    logp, target = fw.placeholder("primals_1"), fw.placeholder("primals_2")
    nll = fw.call_function(aten.nll_loss_forward.default, (logp, target, None, 1, -100))
    count = fw.call_function(operator.getitem, (nll, 1))
    reduced = fw.call_function(c10d.all_reduce.default, (count, "sum", "0"))
    waited = fw.call_function(c10d.wait_tensor.default, (reduced,))
    loss = fw.call_function(operator.getitem, (nll, 0))
    fw.output((loss, logp, target, waited))
    for n, v in ((logp, torch.randn(N, C).log_softmax(1)), (target, torch.zeros(N, dtype=torch.long)),
                 (count, torch.tensor(6.0)), (reduced, torch.tensor(6.0)), (waited, torch.tensor(6.0))):
        n.meta["val"] = v

    bw = fx.Graph()
    saved = {name: bw.placeholder(name) for name in ("primals_1", "primals_2", "waited")}
    tangent = bw.placeholder("tangents_1")
    saved["primals_1"].meta["val"] = logp.meta["val"]
    saved["primals_2"].meta["val"] = target.meta["val"]
    saved["waited"].meta["val"] = torch.tensor(6.0)
    grad = bw.call_function(aten.nll_loss_backward.default,
                            (tangent, saved["primals_1"], saved["primals_2"], None, 1, -100, saved["waited"]))
    grad.meta["val"] = torch.zeros(N, C)
    bw.output(extra(bw, grad, saved, tangent))
    return fx.GraphModule(torch.nn.Module(), fw), fx.GraphModule(torch.nn.Module(), bw)


def _call(graph, op, *args):
    node = graph.call_function(op, args)
    node.meta["val"] = torch.zeros(N, C)
    return node


def _muls(gm):
    return [n for n in gm.graph.nodes if n.target is aten.mul.Tensor and n.args[1].target is aten.div.Tensor]


def test_linear_reads_keep_the_gradient_scaled_and_a_sum_with_another_gradient_rescales_it():
    def extra(g, grad, saved, tangent):
        v = _call(g, aten.view.default, grad, [N, C])
        m = _call(g, aten.mul.Tensor, v, saved["primals_1"])  # a product with a saved value: still scaled
        other = _call(g, aten.mul.Tensor, saved["primals_1"], tangent)  # another loss's gradient
        return (_call(g, aten.add.Tensor, m, other), None)

    fw, bw = _graphs(extra)
    assert scales_late(fw, bw)
    assert scale_loss_gradients_late(fw, bw, num_fwd_outputs=1)
    nll = next(n for n in bw.graph.nodes if n.target is aten.nll_loss_backward.default)
    assert nll.args[6].target is aten.clamp_min.default  # the rank's own count
    (mul,) = _muls(bw)
    add = next(n for n in bw.graph.nodes if n.target is aten.add.Tensor)
    assert mul.args[0].target is aten.mul.Tensor and add.args[0] is mul  # rescaled right before the sum
    # Forward saves the count's reduction unwaited; backward waits for it before the rescale.
    fw_out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    assert fw_out[3].target is c10d.all_reduce.default
    assert not any(n.target is c10d.wait_tensor.default for n in fw.graph.nodes)
    order = list(bw.graph.nodes)
    wait = next(n for n in order if n.target is c10d.wait_tensor.default)
    assert order.index(wait) < order.index(mul)


def test_a_nonlinear_read_or_a_collective_rescales_first():
    def extra(g, grad, saved, tangent):
        square = _call(g, aten.div.Tensor, grad, grad)  # g / g is no linear map of g
        reduced = _call(g, c10d.all_reduce.default, grad, "sum", "0")  # each rank's scale differs
        return (square, reduced)

    fw, bw = _graphs(extra)
    assert scale_loss_gradients_late(fw, bw, num_fwd_outputs=1)
    (mul,) = _muls(bw)  # one rescaled copy, read by both
    div = next(n for n in bw.graph.nodes if n.target is aten.div.Tensor and n.args[0] is n.args[1])
    reduce = next(n for n in bw.graph.nodes if n.target is c10d.all_reduce.default)
    assert div.args == (mul, mul) and reduce.args[0] is mul


def test_a_count_read_elsewhere_in_backward_is_left_alone():
    def extra(g, grad, saved, tangent):
        return (_call(g, aten.mul.Tensor, grad, saved["waited"]), None)

    fw, bw = _graphs(extra)
    assert not scales_late(fw, bw)
    before = [str(n) for n in bw.graph.nodes]
    assert not scale_loss_gradients_late(fw, bw, num_fwd_outputs=1)
    assert [str(n) for n in bw.graph.nodes] == before
