"""A forward output the loss does not use: its parameters get no gradient, as in eager.

Models return more than their loss (a pooled output, an auxiliary head's logits); a caller
that backpropagates the loss alone leaves `.grad` None on the parameters only those other
outputs read, and AdamW skips them (no weight decay, no moment update). A planned program
that handed them zero gradients instead would decay and move them: after a few steps its
parameters would differ from the single-process model's. Parameters are forced onto sharded
placements (each rank holds a piece; the pooler's gradient would come back through a gather).
"""
import torch
import torch.nn as nn

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

STEPS = 3
TOL = dict(rtol=2e-4, atol=2e-5)


class Pooled(nn.Module):
    """A loss and a pooled output: the pooler is read by the second output only."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        self.pooler = nn.Linear(16, 16)

    def forward(self, x, y):
        h = torch.tanh(self.body(x))
        loss = ((self.head(h) - y) ** 2).mean()
        return loss, torch.tanh(self.pooler(h.mean(0, keepdim=True)))


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def _train(model, call):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)  # weight decay 0.01 moves any parameter with a gradient
    x, y = _batch()
    nones = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _pooled = call(x, y)
        loss.backward()
        nones.append(sorted(k for k, p in model.named_parameters() if p.grad is None))
        opt.step()
    return nones, {k: _full(v) for k, v in model.state_dict().items()}


def _rank(rank, world_size):
    import torch_localmap

    mesh = make_mesh((2, 2))
    out = {}
    torch.manual_seed(0)
    planned = torch_localmap.parallelize(Pooled(), mesh, _batch(), calibration=FORCE_SHARDING)
    sharded = {k for k, spec in planned.plan.state_placements().items() if set(spec) != {"R"}}
    out["parallelize"] = _train(planned, planned) + (sharded,)
    torch.manual_seed(0)
    model = Pooled()
    compiled = torch.compile(model, backend="localmap", options={"mesh": mesh, "calibration": FORCE_SHARDING})
    out["backend"] = _train(model, compiled)
    return out


def test_parameters_of_an_output_the_loss_does_not_use_get_no_gradient_and_do_not_move():
    torch.manual_seed(0)
    model = Pooled()
    initial_pooler = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("pooler")}
    ref_nones, ref_state = _train(model, model)
    assert ref_nones == [["pooler.bias", "pooler.weight"]] * STEPS  # what eager autograd does
    results = run_distributed(_rank, 4, timeout=300)
    sharded = results[0]["parallelize"][2]
    assert any(k.startswith("pooler") for k in sharded), f"the pooler should be sharded; sharded: {sorted(sharded)}"
    for mode in ("parallelize", "backend"):
        for rank, res in enumerate(results):
            nones, state = res[mode][:2]
            assert nones == ref_nones, (mode, rank, nones)
            for k, v in ref_state.items():
                torch.testing.assert_close(state[k], v, **TOL, msg=lambda m: f"{mode} rank {rank} {k}: {m}")
            for k, v in initial_pooler.items():
                assert torch.equal(state[k], v), f"{mode} rank {rank}: {k} moved without a gradient"
