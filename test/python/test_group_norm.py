"""GroupNorm planned, not replicated: its batch dim shards, and so does its channel dim when
each shard holds whole groups (core/strategies/norm.cpp). On 4 gloo ranks, a convolution, a
GroupNorm and a head train like one process, with the norm's parameters left to the planner
and pinned to channel shards."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed
from test_zoo import _full

TOL = dict(rtol=2e-4, atol=2e-5)
CHANNEL_SHARDS = {"gn.weight": "RS(0)", "gn.bias": "RS(0)"}


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)  # 4 groups of 2 channels: 2 shards hold 2 groups each
        self.head = nn.Linear(8, 5)

    def forward(self, x, y):
        h = F.gelu(self.gn(self.conv(x)))
        return F.mse_loss(self.head(h.mean((2, 3))), y)


def _model():
    torch.manual_seed(0)
    return GroupNormNet()


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 3, 6, 6, generator=g), torch.randn(4, 5, generator=g)


def _reference():
    model = _model()
    loss = model(*_batch())
    loss.backward()
    return float(loss.detach()), {k: p.grad.clone() for k, p in model.named_parameters()}


def _rank(rank, world_size):
    import torch_localmap

    mesh = make_mesh((2, 2))
    out = {}
    for mode, fixed in (("planned", None), ("channel_shards", CHANNEL_SHARDS)):
        pmodel = torch_localmap.parallelize(_model(), mesh, _batch(), time_limit=5, fixed_params=fixed)
        loss = pmodel(*_batch())
        loss.backward()
        norm_specs = [n["strategy"] for n in pmodel.plan.to_document()["nodes"] if "group_norm" in n["op"]]
        out[mode] = (float(_full(loss.detach())), {k: _full(p.grad) for k, p in pmodel.named_parameters()},
                     norm_specs, list(pmodel.plan.summary.fallback_ops))
    return out


@pytest.mark.timeout(600)
def test_group_norm_sharded_by_batch_and_by_channel_groups_matches_one_process():
    ref_loss, ref_grads = _reference()
    results = run_distributed(_rank, 4, timeout=300)
    for rank, res in enumerate(results):
        for mode, (loss, grads, norm_specs, fallbacks) in res.items():
            assert fallbacks == [], (mode, fallbacks)
            assert len(norm_specs) == 2, (mode, norm_specs)  # forward and backward, planned by the rule
            assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (mode, rank, loss, ref_loss)
            for k, g in ref_grads.items():
                torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"{mode} rank {rank} {k}: {m}")
        # Pinned to channel shards, the norm runs on them: input and output sharded on dim 1.
        forward = res["channel_shards"][2][0]
        assert forward["inputs"][0].endswith("S(1)") and forward["outputs"][0].endswith("S(1)"), forward
