"""The loss over the global batch, waited for when it is read (_runtime/deferred_loss.py).

On gloo meshes a rank program returns its loss as a PendingTensor and divides the loss's
gradients by the global token count late in backward (_runtime/late_loss_scale.py): neither
forward nor backward's start waits for the other ranks' forwards, and the loss and gradients
are exact whenever they are read -- before backward, after it, or never until the next step.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dist_utils import make_mesh, run_distributed

from torch_localmap._runtime.deferred_loss import PendingTensor, _Tail, lazy_views

TOL = dict(rtol=1e-10, atol=1e-12)
VOCAB, DIM, BATCH, SEQ = 16, 8, 4, 6


def _pending(value, calls):
    def tail(v):
        calls.append(1)
        return v * 2

    return PendingTensor(_Tail(tail, [value]), value.shape, value.dtype, value.device)


def test_pending_tensor_reads_its_value_once_and_not_for_autograds_seed():
    calls = []
    p = _pending(torch.tensor(1.5, dtype=torch.float64), calls)
    seed = torch.ones_like(p)
    assert type(seed) is torch.Tensor and seed.item() == 1.0 and calls == []  # metadata only
    with lazy_views():
        v = p.view(())  # as DTensor.from_local views what it wraps: still pending
    assert isinstance(v, PendingTensor) and calls == []
    assert v.item() == 3.0 and calls == [1]
    out = p + 1  # any other op reads the value, computed once
    assert type(out) is torch.Tensor and out.item() == 4.0 and calls == [1]
    assert type(p.view(())) is torch.Tensor  # outside lazy_views a view is a plain tensor
    assert "3." in repr(p)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens, targets):
        h = torch.tanh(self.proj(self.emb(tokens)))
        return F.cross_entropy(self.head(h).view(-1, VOCAB), targets.view(-1))


def _example(ignored="some"):
    torch.manual_seed(0)
    model = TinyLM().double()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    targets[0, :4] = -100  # ignored tokens, all in rank 0's half: the ranks' counts differ
    targets[3, 5] = -100
    if ignored == "all_of_rank_1":  # a rank with no target counted: its gradients are zero
        targets[BATCH // 2:] = -100
    return model, tokens, targets


def _reference(ignored="some"):
    model, tokens, targets = _example(ignored)
    loss = model(tokens, targets)
    loss.backward()
    return loss.detach(), {k: p.grad.detach().clone() for k, p in model.named_parameters()}


def _rank_deferred(rank, world, like, ignored):
    from torch.distributed.tensor import Shard
    from torch_localmap import parallelize

    model, tokens, targets = _example(ignored)
    local = (tokens.chunk(world)[rank], targets.chunk(world)[rank])
    pm = parallelize(model, make_mesh((world,)), local, device="cpu", time_limit=2.0, like=like,
                     input_placements={0: [Shard(0)], 1: [Shard(0)]})
    out = {}
    loss = pm(*local)
    with lazy_views():
        out["pending_inside"] = isinstance(getattr(loss, "_local_tensor", None), PendingTensor)
    out["loss_before_backward"] = loss.full_tensor().detach().clone()
    loss.backward()
    out["grads"] = {k: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).detach().clone()
                    for k, p in pm.named_parameters()}
    out["loss_after_backward"] = loss.full_tensor().detach().clone()
    fw = pm._program.fw
    nodes = [n for n in fw.graph.nodes if n.op == "call_function"]
    names = [str(n.target) for n in nodes]
    out["tails"] = len(pm._program.tails)
    out["scaled_late"] = pm._program.scaled_late
    out["forward_waits"] = sum("wait_tensor" in s for s in names)
    # Backward's wait for what forward reduced (a saved value; FSDP2's gathers are its own).
    bw_nodes = [n for n in pm._program.bw.graph.nodes if n.op == "call_function"]
    first_product = min(i for i, n in enumerate(bw_nodes) if "mm" in str(n.target))
    count_waits = [i for i, n in enumerate(bw_nodes) if "wait_tensor" in str(n.target) and n.args[0].op == "placeholder"]
    out["backward_waits_after_products"] = len(count_waits) == 1 and count_waits[0] > first_product
    # A step whose loss nobody reads, then one under no_grad: the first is settled by the second.
    for p in pm.parameters():
        p.grad = None
    pm(*local).backward()
    with torch.no_grad():
        out["no_grad_loss"] = pm(*local).full_tensor().detach().clone()
    out["left_pending"] = len(pm._program.pending)
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("like,ignored", [("ddp", "some"), ("fsdp2", "some"), ("ddp", "all_of_rank_1")])
def test_the_global_loss_is_exact_whenever_read_and_backward_does_not_wait_for_it(like, ignored):
    ref_loss, ref_grads = _reference(ignored)
    for r in run_distributed(_rank_deferred, 2, like, ignored, timeout=600):
        # The loss the user holds is pending inside its DTensor until read; the gradients are
        # divided by the global token count late (late_loss_scale.py): backward waits for the
        # count only after its first products.
        assert r["tails"] == 1 and r["pending_inside"] and r["scaled_late"], r
        assert r["backward_waits_after_products"], r
        if like == "ddp":  # no collective but the loss's own in forward, and it is not waited for
            assert r["forward_waits"] == 0, r
        torch.testing.assert_close(r["loss_before_backward"], ref_loss, **TOL)
        torch.testing.assert_close(r["loss_after_backward"], ref_loss, **TOL)
        for k, g in ref_grads.items():
            torch.testing.assert_close(r["grads"][k], g, **TOL, msg=lambda m: f"grad {k}: {m}")
        torch.testing.assert_close(r["no_grad_loss"], ref_loss, **TOL)  # the same weights: no step taken
        assert r["left_pending"] == 0, r
