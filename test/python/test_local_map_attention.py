"""Attention and random ops inside local_map regions (issue 29, part 1).

A region's backward recomputes what it needs of the region's forward; on the ranks it reads
the forward's values instead (recompute_sharing.py), so an op torch tags as random (SDPA,
whose dropout_p draws nothing at 0) is not drawn again, and a real dropout keeps one mask for
forward and backward. Regions take q/k/v made the usual way (transposed views). Each result
is compared with the model run without regions in one process, gradients included, with
Partial input gradients (context-parallel attention: k and v replicated over cp).
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_localmap as tlm
from dist_utils import full_value, make_mesh, run_distributed

HEADS, DIM = 4, 16


def _cp_attention_1d(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)


# Sequence-split queries, whole k/v on every cp rank: their gradients are partial sums.
REGIONS = {
    (2,): dict(out_placements="S(2)", in_placements=("S(2)", "R", "R"),
               in_grad_placements=("S(2)", "P(sum)", "P(sum)")),
    (2, 2): dict(out_placements="S(0)S(2)", in_placements=("S(0)S(2)", "S(0)R", "S(0)R"),
                 in_grad_placements=("S(0)S(2)", "S(0)P(sum)", "S(0)P(sum)")),
}
NAMES = {(2,): ("cp",), (2, 2): ("dp", "cp")}
_REGION_FNS = {shape: tlm.local_map(**kw)(_cp_attention_1d) for shape, kw in REGIONS.items()}


class Attention(nn.Module):
    """x [B, S, D] -> loss; q/k/v are `view(b, s, h, d).transpose(1, 2)` (not contiguous)."""

    def __init__(self, attn):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.qkv = nn.Parameter(torch.randn(DIM, 3 * DIM, generator=g) / DIM ** 0.5)
        self.out = nn.Parameter(torch.randn(DIM, DIM, generator=g) / DIM ** 0.5)
        self.attn = attn

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, HEADS, DIM // HEADS).transpose(1, 2) for t in (x @ self.qkv).split(DIM, -1))
        a = self.attn(q, k, v).transpose(1, 2).reshape(b, s, DIM)
        return (a @ self.out).square().mean()


def _inputs():
    return torch.randn(4, 8, DIM, generator=torch.Generator().manual_seed(1))


def _grads(model):
    return {n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad) for n, p in
            model.named_parameters()}


def _rank_attention(rank, world_size, mesh_shape, mode):
    mesh = make_mesh(mesh_shape, NAMES[mesh_shape])
    model = Attention(_REGION_FNS[mesh_shape])
    x = _inputs()
    if mode == "backend":
        run = torch.compile(model, backend="localmap", options={"mesh": mesh})
    else:
        run = tlm.parallelize(model, mesh, (x,), device="cpu", time_limit=2.0, compile=(mode == "compiled"))
    losses = []
    for _ in range(2):  # the second step reuses the program
        loss = run(x)
        loss.backward()
        losses.append(loss.detach().full_tensor() if hasattr(loss, "full_tensor") else loss.detach())
    return {"losses": losses, "grads": _grads(model)}


def _reference():
    model = Attention(_cp_attention_1d)
    loss = model(_inputs())
    loss.backward()
    # Two steps without an optimizer: gradients accumulate twice.
    return loss.detach(), {n: 2 * g for n, g in _grads(model).items()}


@pytest.mark.parametrize("mesh_shape,mode", [((2,), "eager"), ((2,), "compiled"), ((2,), "backend"),
                                             ((2, 2), "eager")])
def test_sdpa_region_matches_one_process(mesh_shape, mode):
    loss, grads = _reference()
    world = 1
    for d in mesh_shape:
        world *= d
    for r in run_distributed(_rank_attention, world, mesh_shape, mode, timeout=600.0):
        for step_loss in r["losses"]:
            torch.testing.assert_close(step_loss, loss)
        assert r["grads"].keys() == grads.keys()
        for name in grads:
            torch.testing.assert_close(r["grads"][name], grads[name], msg=name)


# ---- a real dropout inside a region: one mask for forward and backward ---------------------

P = 0.5


@tlm.local_map(out_placements="S(0)", in_placements=("S(0)",))
def _dropout_region(h):
    return F.dropout(h, p=P, training=True)


class DropoutModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, DIM))

    def forward(self, x, c):
        y = _dropout_region(x * self.w)
        return (y * c).sum(), y


def _dropout_inputs():
    g = torch.Generator().manual_seed(2)
    return torch.randn(8, DIM, generator=g) + 3.0, torch.randn(8, DIM, generator=g)


def _check_one_mask(x, c, y, grad_w):
    """y = mask * (x * w) / (1 - P) draws the mask; d loss / d w must use the same mask."""
    kept = (y != 0).to(x.dtype)
    assert 0.2 < kept.mean().item() < 0.8, "the region should drop about half of the values"
    torch.testing.assert_close(grad_w, (kept * c * x / (1 - P)).sum(0))


def _rank_dropout(rank, world_size):
    mesh = make_mesh((world_size,), ("dp",))
    model = DropoutModel()
    x, c = _dropout_inputs()
    pm = tlm.parallelize(model, mesh, (x, c), device="cpu", time_limit=2.0)
    loss, y = pm(x, c)
    loss.backward()
    return {"y": y.detach().full_tensor(), "grad_w": full_value(model.w.grad)}


def test_dropout_region_keeps_one_mask_on_ranks():
    x, c = _dropout_inputs()
    for r in run_distributed(_rank_dropout, 2, timeout=300.0):
        _check_one_mask(x, c, r["y"], r["grad_w"])


def test_dropout_region_keeps_one_mask_on_one_process():
    """On plain tensors under a mesh the region runs every rank's body in one process (the
    HOP's dense kernel); backward replays the forward's RNG state."""
    model = DropoutModel()
    x, c = _dropout_inputs()
    with tlm.use_mesh((2,)):
        loss, y = model(x, c)
        loss.backward()
    _check_one_mask(x, c, y.detach(), model.w.grad)
