"""parallelize takes the model's own calling convention (issue 14): keyword arguments,
non-tensor flags (constants of a plan: another value re-plans), output structures
(dataclass, tuple with a dict), inputs given whole, as each rank's shard
(`input_placements`) or as DTensors, and a loss computed outside the model."""
import dataclasses

import torch
import torch.nn as nn

from dist_utils import full_value, make_mesh, run_distributed


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    aux: dict


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1 = nn.Linear(12, 16)
        self.l2 = nn.Linear(16, 6)

    def forward(self, x, extra=None, scale=1.0, as_tuple=False):
        h = self.l1(x) * scale
        if extra is not None:
            h = h + extra
        y = self.l2(torch.tanh(h))
        return (y, {"h": h}) if as_tuple else Out(logits=y, aux={"h": h})


def _data():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 12, generator=g), torch.randn(8, 16, generator=g), torch.randint(0, 6, (8,), generator=g)


def _reference():
    x, e, y = _data()
    net = Net()
    out = net(x, scale=2.0)
    nn.functional.cross_entropy(out.logits, y).backward()
    return {"s2": out.logits.detach(), "s3": net(x, scale=3.0).logits.detach(),
            "tuple": tuple(t.detach() for t in (net(x, e, as_tuple=True)[0], net(x, e, as_tuple=True)[1]["h"])),
            "grads": {k: p.grad.clone() for k, p in net.named_parameters()}}


def _rank(rank, world_size):
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    import torch_localmap

    mesh = make_mesh((2, 2))
    x, e, y = _data()
    res = {}
    pmodel = torch_localmap.parallelize(Net(), mesh, (x,), {"scale": 2.0}, time_limit=2)
    out = pmodel(x, scale=2.0)
    res["types"] = (type(out).__name__, type(out.logits).__name__, type(out.aux["h"]).__name__)
    labels = DTensor.from_local(y, mesh, [Replicate(), Replicate()], run_check=False)
    nn.functional.cross_entropy(out.logits, labels).backward()  # the loss outside the model
    res["s2"] = out.logits.detach().full_tensor()
    res["grads"] = {k: full_value(p.grad) for k, p in pmodel.named_parameters()}
    res["s3"] = pmodel(x, scale=3.0).logits.detach().full_tensor()  # another flag value: a new plan
    logits, aux = pmodel(x, e, as_tuple=True)
    res["tuple"] = (logits.detach().full_tensor(), aux["h"].detach().full_tensor())
    res["plans"] = len(pmodel._plans)

    # Each rank holds its dp shard of the batch (a data loader's view), or a DTensor.
    local_x = x.chunk(2)[mesh.get_coordinate()[0]]
    sharded = torch_localmap.parallelize(Net(), mesh, (local_x,), {"scale": 2.0}, time_limit=2,
                                         input_placements={"x": [Shard(0), Replicate()]})
    res["local_in"] = sharded(local_x, scale=2.0).logits.detach().full_tensor()
    res["local_spec"] = sharded.plan.placeholder_specs()
    res["dtensor_in"] = pmodel(distribute_tensor(x, mesh, [Shard(0), Replicate()]), scale=2.0).logits.detach() \
        .full_tensor()
    return res


def test_kwargs_flags_output_structures_sharded_inputs_and_outside_loss():
    ref = _reference()
    for r in run_distributed(_rank, 4, timeout=300):
        assert r["types"] == ("Out", "DTensor", "DTensor")
        torch.testing.assert_close(r["s2"], ref["s2"])
        for k, g in ref["grads"].items():
            torch.testing.assert_close(r["grads"][k], g, msg=k)
        torch.testing.assert_close(r["s3"], ref["s3"])
        torch.testing.assert_close(r["tuple"][0], ref["tuple"][0])
        torch.testing.assert_close(r["tuple"][1], ref["tuple"][1])
        assert r["plans"] == 3  # scale=2.0, scale=3.0, (extra, as_tuple=True)
        torch.testing.assert_close(r["local_in"], ref["s2"])
        assert "S(0)R" in r["local_spec"]  # the batch is planned where the loader put it
        torch.testing.assert_close(r["dtensor_in"], ref["s2"])


class _CopiesStateInForward(nn.Module):
    """Deep-copies an object holding a tensor made in forward, as transformers' Dory copies
    its cache layers once per loop."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.l1 = nn.Linear(8, 8)

    def forward(self, x):
        import copy
        import types

        state = types.SimpleNamespace(offset=torch.full((8,), 0.5))
        copied = copy.deepcopy(state)
        state.offset.add_(1.0)  # the copy keeps its own values
        return (self.l1(x) + copied.offset).sum()


def test_a_forward_that_deep_copies_tensors_it_made_is_planned_and_computes_the_same():
    from torch_localmap.plan import plan_module

    model = _CopiesStateInForward()
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    deepcopy_before = torch.Tensor.__deepcopy__
    plan = plan_module(model, (2,), (x,), time_limit=2)
    assert list(plan.summary.fallback_ops) == []
    assert torch.Tensor.__deepcopy__ is deepcopy_before  # torch's own method is back after the trace
    ref = model(x)
    for out in run_distributed(_rank_copies_state, 2, timeout=300):
        torch.testing.assert_close(out, ref)


def _rank_copies_state(rank, world_size):
    import torch_localmap

    model = _CopiesStateInForward()
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    out = torch_localmap.parallelize(model, make_mesh((2,)), (x,), time_limit=2)(x)
    return out.full_tensor() if hasattr(out, "full_tensor") else out
