"""Ops that once fell back to replicate, planned and run on 4 gloo ranks like one process.

A sweep over models users train (docs/user_guide.md, the model list) found these ops
without a rule: GroupNorm (PoolFormer, BiT, diffusers' UNets), draws of a size and draws
shaped like a tensor (Hugging Face's stochastic depth, router jitter), sliding windows and a
log-sigmoid loss (PatchTST, SigLIP), antialiased resizes (timm's ViTs at another image
size). Each case is a small model built on them; the planned program's loss and gradients
must equal the single-process model's, with the ops planned by their rules (no fallback),
sharded where the case says.
"""
from typing import Callable, NamedTuple, Optional

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

TOL = dict(rtol=2e-4, atol=2e-5)


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)  # 4 groups of 2 channels: 2 shards hold 2 groups each
        self.head = nn.Linear(8, 5)

    def forward(self, x, y):
        h = F.gelu(self.gn(self.conv(x)))
        return F.mse_loss(self.head(h.mean((2, 3))), y)


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


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Linear(3, 3)  # the windows cut an activation: unfold has a backward
        self.embed = nn.Linear(4, 16)  # a patch of 4 steps
        self.head = nn.Linear(16, 1)

    def forward(self, series, sign):
        patches = self.lift(series).unfold(1, 4, 2)  # (batch, windows, channels, 4), overlapping
        score = self.head(F.gelu(self.embed(patches))).mean((1, 2, 3))
        return -F.logsigmoid(sign * score).mean()


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


def _inputs(*shapes_and_kinds):
    g = torch.Generator().manual_seed(1)
    return tuple(torch.randint(0, 2, s, generator=g).float() * 2 - 1 if kind == "sign" else torch.randn(*s, generator=g)
                 for s, kind in shapes_and_kinds)


class Case(NamedTuple):
    model: Callable[[], nn.Module]
    batch: tuple
    ops: frozenset  # every op the plan must hold, each planned by its rule
    sharded: frozenset = frozenset()  # of those, the ops whose first output must be sharded on dim 0
    options: dict = {}  # parallelize's
    seed: Optional[int] = None  # the generator's state before forward (random ops)
    channel_shards: bool = False  # the norm's first input and output sharded on dim 1


_DRAWS = frozenset({"aten.rand.default", "aten.randn_like.default", "aten.uniform.default",
                    "aten.exponential.default"})
_NORM = frozenset({"aten.native_group_norm.default", "aten.native_group_norm_backward.default"})
_SPLIT = {"calibration": FORCE_SHARDING}  # slow compute and fast links: the planner splits the batch
CASES = {
    "group_norm": Case(GroupNormNet, _inputs(((4, 3, 6, 6), "x"), ((4, 5), "x")), _NORM),
    # the norm's parameters pinned to channel shards: the norm runs on them
    "group_norm_channels": Case(GroupNormNet, _inputs(((4, 3, 6, 6), "x"), ((4, 5), "x")), _NORM,
                                options={"fixed_params": {"gn.weight": "RS(0)", "gn.bias": "RS(0)"}},
                                channel_shards=True),
    "random_draws": Case(StochasticDepthNet, _inputs(((8, 5, 6), "x"), ((8, 3), "x")), _DRAWS, _DRAWS,
                         _SPLIT, seed=5),
    "unfold_log_sigmoid": Case(PatchNet, _inputs(((8, 11, 3), "x"), ((8,), "sign")),
                               frozenset({"aten.unfold.default", "aten.unfold_backward.default",
                                          "aten.log_sigmoid_forward.default", "aten.log_sigmoid_backward.default"}),
                               frozenset({"aten.unfold.default"}), _SPLIT),
    "resize_antialias": Case(ResizedGrid, _inputs(((4, 3, 8, 8), "x"), ((4, 2), "x")),
                             frozenset({"aten._upsample_bicubic2d_aa.default",
                                        "aten._upsample_bicubic2d_aa_backward.default",
                                        "aten._upsample_bilinear2d_aa.default",
                                        "aten._upsample_bilinear2d_aa_backward.default"}),
                             options=_SPLIT),
}


def _model(case):
    torch.manual_seed(0)
    return case.model()


def _step(model, case):
    if case.seed is not None:
        torch.manual_seed(case.seed)
    loss = model(*case.batch)
    loss.backward()
    return loss


def _rank(rank, world_size, name):
    import torch_localmap

    case = CASES[name]
    pmodel = torch_localmap.parallelize(_model(case), make_mesh((2, 2)), case.batch, time_limit=5, **case.options)
    loss = _step(pmodel, case)
    specs = {n["op"]: n["strategy"] for n in pmodel.plan.to_document()["nodes"] if n["op"] in case.ops}
    return (float(_full(loss.detach())), {k: _full(p.grad) for k, p in pmodel.named_parameters()}, specs,
            list(pmodel.plan.summary.fallback_ops))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_planned_on_ranks_matches_one_process(name):
    case = CASES[name]
    model = _model(case)
    ref_loss = float(_step(model, case).detach())
    ref_grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    for rank, (loss, grads, specs, fallbacks) in enumerate(run_distributed(_rank, 4, name, timeout=300)):
        assert fallbacks == [], fallbacks
        assert set(specs) == case.ops, specs
        for op in case.sharded:  # drawn or cut whole, kept in pieces
            assert "S(0)" in specs[op]["outputs"][0], (op, specs[op])
        if case.channel_shards:
            norm = specs["aten.native_group_norm.default"]
            assert norm["inputs"][0].endswith("S(1)") and norm["outputs"][0].endswith("S(1)"), norm
        assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (rank, loss, ref_loss)
        for k, g in ref_grads.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"rank {rank} {k}: {m}")
