"""The CUDA / NCCL path on a machine with GPUs (skipped without one; `make gpu-check` runs it).

On NCCL ranks, one per visible GPU (world size 1 and, where there are several, every GPU):
- redistribute: every placement pair on a 1-D mesh, forward equal to cutting the global
  tensor and gradcheck in float64;
- a Hugging Face decoder (eager and Inductor-compiled) and a timm CNN (BatchNorm, eager)
  planned with `parallelize`, three AdamW steps: losses and final parameters equal to the model trained
  on one GPU without us;
- the compile backend: loss and every gradient equal to the model's.
TF32 is off in every process: the comparisons are float32 against float32.
"""
from __future__ import annotations

import itertools

import pytest
import torch

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import _full, _train  # the zoo test's training loop: 3 AdamW steps

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible")

TOL = dict(rtol=1e-3, atol=1e-5)


def _world_sizes():
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return sorted({1, n}) if n else [1]


def _exact_float32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _to_cuda(case, device):
    move = lambda x: x.to(device) if isinstance(x, torch.Tensor) else x  # noqa: E731
    return case._replace(model=case.model.to(device).train(), args=tuple(move(a) for a in case.args),
                         kwargs={k: move(v) for k, v in case.kwargs.items()}, target=move(case.target))


def _reference(name):
    _exact_float32()
    case = _to_cuda(zoo.MODELS[name](seed=0), "cuda")
    return _train(case.model, case, case.target)


def _rank_train(rank, world_size, name, compile):
    import torch_localmap
    from torch.distributed.tensor import DTensor, Replicate

    _exact_float32()
    mesh = make_mesh((world_size,))
    case = _to_cuda(zoo.MODELS[name](seed=0), torch.device("cuda", torch.cuda.current_device()))
    pm = torch_localmap.parallelize(case.model, mesh, case.args, case.kwargs, time_limit=5, compile=compile)
    target = case.target
    if target is not None:
        target = DTensor.from_local(target, mesh, [Replicate()], run_check=False)
    return _train(pm, case, target) + (list(pm.plan.summary.fallback_ops),)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name,compile", [("hf_llama", False), ("hf_llama", True), ("resnet", False)],
                         ids=["hf_llama-eager", "hf_llama-compiled", "resnet-eager"])
@pytest.mark.parametrize("world", _world_sizes())
def test_planned_training_on_nccl_ranks_equals_one_gpu(world, name, compile):
    ref_losses, ref_state = _reference(name)
    results = run_distributed(_rank_train, world, name, compile, backend="nccl", timeout=800)
    for rank, (losses, state, fallbacks) in enumerate(results):
        assert fallbacks == []
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), **TOL,
                                   msg=lambda m: f"{name} rank {rank} losses: {m}")
    for k, v in ref_state.items():
        torch.testing.assert_close(results[0][1][k], v, **TOL, msg=lambda m: f"{name} {k}: {m}")


def _rank_backend(rank, world_size, name):
    _exact_float32()
    mesh = make_mesh((world_size,))
    case = _to_cuda(zoo.MODELS[name](seed=0), torch.device("cuda", torch.cuda.current_device()))
    plans = []
    compiled = torch.compile(case.model, backend="localmap", options={"mesh": mesh, "on_plan": plans.append})
    loss = case.loss(compiled(*case.args, **case.kwargs), case.target)
    loss.backward()
    return float(_full(loss)), {k: _full(p.grad) for k, p in case.model.named_parameters() if p.grad is not None}, \
        len(plans)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("world", _world_sizes())
def test_backend_on_nccl_ranks_equals_the_model(world):
    _exact_float32()
    case = _to_cuda(zoo.MODELS["hf_llama"](seed=0), "cuda")
    loss = case.loss(case.model(*case.args, **case.kwargs), case.target)
    loss.backward()
    ref = {k: p.grad.cpu() for k, p in case.model.named_parameters()}
    results = run_distributed(_rank_backend, world, "hf_llama", backend="nccl", timeout=800)
    for got_loss, grads, n_plans in results:
        assert n_plans >= 1
        assert abs(got_loss - float(loss)) <= 1e-4 * max(1.0, abs(float(loss)))
        assert grads.keys() == ref.keys()
        for k, g in ref.items():
            torch.testing.assert_close(grads[k], g, **TOL, msg=lambda m: f"grad {k}: {m}")


def _rank_redistribute(rank, world_size):
    from torch_localmap import _C
    from torch_localmap._runtime.redistribute import group_names, shard_local
    from test_localmap_ops import _loss as global_inner_product

    rd = torch.ops.localmap.redistribute
    mesh = make_mesh((world_size,))
    shape, coord, groups = [5, 6], list(mesh.get_coordinate()), group_names(mesh)
    checked = 0
    for src, dst in itertools.product(("S(0)", "S(1)", "R", "P(sum)"), repeat=2):
        if not _C.can_redistribute(src, dst, [world_size]):
            continue
        torch.manual_seed(7)  # every rank draws the same global tensor
        x = torch.randn(shape, dtype=torch.float64, device="cuda")
        xs = shard_local(x, (world_size,), src, coord)
        out = rd(xs, shape, src, dst, [world_size], coord, groups)
        torch.testing.assert_close(out, shard_local(x, (world_size,), dst, coord), msg=f"{src} -> {dst}")
        w = torch.randn(shape, dtype=torch.float64, device="cuda")
        assert torch.autograd.gradcheck(  # the global <redistribute(x), w> on every rank, as test_localmap_ops
            lambda t: global_inner_product(t, [world_size], coord, groups, src, dst, w),
            (x.clone().requires_grad_(),), fast_mode=True), (src, dst)
        checked += 1
    return checked


@pytest.mark.timeout(600)
@pytest.mark.parametrize("world", _world_sizes())
def test_redistribute_on_nccl_ranks(world):
    results = run_distributed(_rank_redistribute, world, backend="nccl", timeout=500)
    assert all(n == results[0] and n >= 9 for n in results), results
