"""Sliding windows and a log-sigmoid loss planned like other ops (core/strategies/view.cpp,
pointwise.cpp): a time-series model cuts its input into patches with Tensor.unfold (as
PatchTST does) and trains on a log-sigmoid loss (as SigLIP does). On 4 gloo ranks, with
the batch sharded, the loss and gradients equal one process's."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

TOL = dict(rtol=2e-4, atol=2e-5)


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Linear(3, 3)  # the windows cut an activation: unfold has a backward
        self.embed = nn.Linear(4, 16)  # a patch of 4 steps
        self.head = nn.Linear(16, 1)

    def forward(self, series, sign):
        patches = self.lift(series).unfold(1, 4, 2)  # (batch, windows, channels, 4), windows overlapping
        score = self.head(F.gelu(self.embed(patches))).mean((1, 2, 3))
        return -F.logsigmoid(sign * score).mean()


def _model():
    torch.manual_seed(0)
    return PatchNet()


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 11, 3, generator=g), torch.randint(0, 2, (8,), generator=g).float() * 2 - 1


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
    specs = {n["op"]: n["strategy"] for n in pmodel.plan.to_document()["nodes"]
             if "unfold" in n["op"] or "log_sigmoid" in n["op"]}
    return (float(_full(loss.detach())), {k: _full(p.grad) for k, p in pmodel.named_parameters()}, specs,
            list(pmodel.plan.summary.fallback_ops))


@pytest.mark.timeout(600)
def test_unfold_and_log_sigmoid_on_sharded_batches_match_one_process():
    ref_loss, ref_grads = _reference()
    for rank, (loss, grads, specs, fallbacks) in enumerate(run_distributed(_rank, 4, timeout=300)):
        assert fallbacks == [], fallbacks
        assert set(specs) == {"aten.unfold.default", "aten.unfold_backward.default",
                              "aten.log_sigmoid_forward.default", "aten.log_sigmoid_backward.default"}, specs
        assert "S(0)" in specs["aten.unfold.default"]["outputs"][0], specs  # windows of each rank's samples
        assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (rank, loss, ref_loss)
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"rank {rank} {k}: {m}")
