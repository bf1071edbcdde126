"""Training under torch.autocast, the way Hugging Face Trainer and most hand-written loops run
mixed precision: the module planned outside autocast (parallelize's example call), every
training call made inside `with torch.autocast(...)`, backward outside it.

Before the autocast state was part of a call's signature, such a call ran the float32
program under autocast: its forward made bfloat16 products where the backward graph,
traced without autocast, expected float32 (`expected m1 and m2 to have the same dtype`).
Now a call under autocast plans and traces its own program, with autocast's casts in the
graph, and the rank programs run with autocast off so nothing is cast twice. The parity
reference is the model in one process under the same autocast.
"""
import pytest
import torch

import zoo
from dist_utils import make_mesh, run_distributed
from test_mixed_precision import _mismatches
from test_zoo import FORCE_SHARDING, _full, _sharded_fraction

STEPS = 2
LR = 0.5  # SGD with a large step: parameters move by much more than bf16 noise


def _step(model, case, opt):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(*case.args, **case.kwargs)
        loss = case.loss(out, case.target)
    loss.backward()
    grads = {n: _full(p.grad) for n, p in model.named_parameters()}  # a collective on ranks: every rank
    opt.step()
    return float(_full(loss.detach())), out.logits.dtype, grads


def _reference():
    case = zoo.MODELS["hf_llama"](seed=0)
    opt = torch.optim.SGD(case.model.parameters(), lr=LR, momentum=0.9)
    steps = [_step(case.model, case, opt) for _ in range(STEPS)]
    with torch.no_grad():
        fp32_loss = float(case.loss(case.model(*case.args, **case.kwargs), case.target))
    return steps, fp32_loss


def _rank(rank, world_size):
    import torch_localmap

    case = zoo.MODELS["hf_llama"](seed=0)
    pmodel = torch_localmap.parallelize(case.model, make_mesh((2, 2)), case.args, case.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING)  # planned for a float32 call
    opt = torch.optim.SGD(pmodel.parameters(), lr=LR, momentum=0.9)
    steps = [_step(pmodel, case, opt) for _ in range(STEPS)]
    stats = pmodel.plan_cache_stats
    with torch.no_grad():  # outside autocast again: the float32 program
        fp32 = pmodel(*case.args, **case.kwargs)
        fp32_loss = float(_full(case.loss(fp32, case.target)))
    casts = sum(1 for n in pmodel.plan.graph.fx_nodes
                if n.op == "call_function" and "_to_copy" in str(n.target))
    return ([(loss, dtype) for loss, dtype, _ in steps], [g for _, _, g in steps] if rank == 0 else None, stats,
            _sharded_fraction(pmodel), fp32.logits.dtype, fp32_loss, casts)


# The launcher's own timeout reports which rank hung; pytest's must not cut it short.
@pytest.mark.timeout(900)
def test_training_under_autocast_matches_one_process_under_autocast():
    ref_steps, ref_fp32_loss = _reference()
    results = run_distributed(_rank, 4, timeout=600)
    for losses, _, stats, sharded, fp32_dtype, fp32_loss, _ in results:
        assert [dtype for _, dtype in losses] == [torch.bfloat16] * STEPS  # autocast applied
        torch.testing.assert_close(torch.tensor([loss for loss, _ in losses]),
                                   torch.tensor([loss for loss, _, _ in ref_steps]), rtol=1e-2, atol=1e-2)
        assert sharded >= 0.5, sharded  # the parity is a sharded program's
        assert stats["misses"] == 2, stats  # the example call, then the autocast calls: planned anew
        assert fp32_dtype == torch.float32
        torch.testing.assert_close(fp32_loss, ref_fp32_loss, rtol=1e-2, atol=1e-2)
    grads = results[0][1]
    for step in range(STEPS):
        assert all(g.dtype == torch.float32 for g in grads[step].values())
        bad = _mismatches(grads[step], ref_steps[step][2])
        assert not bad, f"step {step}: gradients off one process under autocast: {bad}"


def _rank_backend(rank, world_size):
    import torch_localmap  # noqa: F401  (registers the backend)

    case = zoo.MODELS["hf_llama"](seed=0)
    compiled = torch.compile(case.model, backend="localmap",
                             options={"mesh": make_mesh((2, 2)), "calibration": FORCE_SHARDING})
    opt = torch.optim.SGD(case.model.parameters(), lr=LR, momentum=0.9)
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(*case.args, **case.kwargs)
        loss = case.loss(out, case.target)
    loss.backward()
    grads = {n: _full(p.grad) for n, p in case.model.named_parameters()}
    return float(_full(loss.detach())), out.logits.dtype, grads if rank == 0 else None


@pytest.mark.timeout(900)
def test_compile_backend_under_autocast_matches_one_process():
    ref_steps, _ = _reference()
    results = run_distributed(_rank_backend, 4, timeout=600)
    for loss, dtype, _ in results:
        assert dtype == torch.bfloat16
        torch.testing.assert_close(loss, ref_steps[0][0], rtol=1e-2, atol=1e-2)
    bad = _mismatches(results[0][2], ref_steps[0][2])
    assert not bad, f"gradients off one process under autocast: {bad}"
