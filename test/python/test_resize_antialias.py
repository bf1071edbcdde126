"""Antialiased resizing planned (core/strategies/conv.cpp): a vision transformer run at
another image size resizes its learned position grid with interpolate(..., antialias=True),
an op torch does not decompose. On 4 gloo ranks the loss and gradients equal one process's."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

TOL = dict(rtol=2e-4, atol=2e-5)
OPS = {"aten._upsample_bicubic2d_aa.default", "aten._upsample_bicubic2d_aa_backward.default",
       "aten._upsample_bilinear2d_aa.default", "aten._upsample_bilinear2d_aa_backward.default"}


class ResizedGrid(nn.Module):
    def __init__(self):
        super().__init__()
        self.grid = nn.Parameter(torch.randn(1, 8, 6, 6))  # positions learned at 6x6
        self.patch = nn.Conv2d(3, 8, 2, stride=2)
        self.head = nn.Linear(8, 2)

    def forward(self, images, y):
        h = self.patch(images)  # 4x4 patches
        pos = F.interpolate(self.grid, size=(4, 4), mode="bicubic", antialias=True)
        pos = pos + F.interpolate(self.grid, size=(4, 4), mode="bilinear", antialias=True)
        return F.mse_loss(self.head((h + pos).mean((2, 3))), y)


def _model():
    torch.manual_seed(0)
    return ResizedGrid()


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 3, 8, 8, generator=g), torch.randn(4, 2, generator=g)


def _reference():
    model = _model()
    loss = model(*_batch())
    loss.backward()
    return float(loss.detach()), {k: p.grad.clone() for k, p in model.named_parameters()}


def _rank(rank, world_size):
    import torch_localmap

    mesh = make_mesh((2, 2))
    pmodel = torch_localmap.parallelize(_model(), mesh, _batch(), time_limit=5, calibration=FORCE_SHARDING)
    loss = pmodel(*_batch())
    loss.backward()
    ops = {n["op"] for n in pmodel.plan.to_document()["nodes"]}
    return (float(_full(loss.detach())), {k: _full(p.grad) for k, p in pmodel.named_parameters()}, ops & OPS,
            list(pmodel.plan.summary.fallback_ops))


@pytest.mark.timeout(600)
def test_antialiased_resizes_match_one_process():
    ref_loss, ref_grads = _reference()
    for rank, (loss, grads, ops, fallbacks) in enumerate(run_distributed(_rank, 4, timeout=300)):
        assert fallbacks == [], fallbacks
        assert ops == OPS, ops
        assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (rank, loss, ref_loss)
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"rank {rank} {k}: {m}")
