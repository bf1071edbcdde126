"""Draws of a given size planned like other ops (core/strategies/random.cpp): Hugging Face's
stochastic depth keeps or drops each sample of a residual branch by `torch.rand((batch, 1,
1))`. On 4 gloo ranks with the batch sharded, every rank draws the whole mask and keeps its
rows (_runtime/random_ops.py), so the loss and gradients equal one process's under the same
seed."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

TOL = dict(rtol=2e-4, atol=2e-5)
SEED = 5
DRAWS = {"aten.rand.default", "aten.randn_like.default", "aten.uniform.default", "aten.exponential.default"}


def drop_path(x, p):
    """Hugging Face's drop_path: a per-sample keep mask from rand, the kept rows rescaled."""
    keep = 1 - p
    mask = (keep + torch.rand((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype, device=x.device)).floor()
    return x.div(keep) * mask


class StochasticDepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 16)
        self.branch = nn.Linear(16, 16)
        self.noise = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x, y):
        h = self.inp(x)
        h = h + drop_path(F.gelu(self.branch(h)), 0.5)
        h = h + 0.1 * self.noise(torch.randn_like(h))  # a draw shaped like a tensor
        # in-place draws (functionalized to uniform / exponential of a fresh tensor)
        h = h * torch.empty_like(h).uniform_(0.9, 1.1) - 0.01 * torch.empty_like(h).exponential_()
        return F.mse_loss(self.head(h).mean(1), y)


def _model():
    torch.manual_seed(0)
    return StochasticDepthNet()


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 5, 6, generator=g), torch.randn(8, 3, generator=g)


def _reference():
    model = _model()
    torch.manual_seed(SEED)
    loss = model(*_batch())
    loss.backward()
    return float(loss.detach()), {k: p.grad.clone() for k, p in model.named_parameters()}


def _rank(rank, world_size):
    import torch_localmap

    mesh = make_mesh((2, 2))
    # slow compute and fast links: the planner splits the batch
    pmodel = torch_localmap.parallelize(_model(), mesh, _batch(), time_limit=5, calibration=FORCE_SHARDING)
    torch.manual_seed(SEED)
    loss = pmodel(*_batch())
    loss.backward()
    draws = {n["op"]: n["strategy"]["outputs"][0] for n in pmodel.plan.to_document()["nodes"]
             if n["op"] in DRAWS}
    return (float(_full(loss.detach())), {k: _full(p.grad) for k, p in pmodel.named_parameters()}, draws,
            list(pmodel.plan.summary.fallback_ops))


@pytest.mark.timeout(600)
def test_sized_and_like_draws_on_sharded_batches_match_one_process():
    ref_loss, ref_grads = _reference()
    for rank, (loss, grads, draws, fallbacks) in enumerate(run_distributed(_rank, 4, timeout=300)):
        assert fallbacks == [], fallbacks
        assert set(draws) == DRAWS, draws
        assert all("S(0)" in spec for spec in draws.values()), draws  # drawn whole, kept in pieces
        assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (rank, loss, ref_loss)
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"rank {rank} {k}: {m}")
