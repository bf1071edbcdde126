"""The training loop users write around a parallel module (issue 14): torch.optim SGD with
momentum and an LR scheduler, clip_grad_norm_ over the DTensor gradients, state_dict() with
the model's own FQNs, and torch.distributed.checkpoint save / load -- loading onto a
different mesh shape included -- and load_state_dict of a full plain state dict. Every number is compared with the single-process model.

Parameters are forced onto sharded placements (test_zoo.FORCE_SHARDING) so the loop really
runs over Shard and Partial DTensors, not only replicated ones.
"""
import pytest
import torch

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

STEPS = 3
TOL = dict(rtol=2e-4, atol=2e-5)
MAX_NORM = 0.05  # small enough that clipping scales every step


def _loop(model, case, target):
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = case.loss(model(*case.args, **case.kwargs), target)
        loss.backward()
        norms.append(float(_full(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM))))
        opt.step()
        sched.step()
        losses.append(float(_full(loss.detach())))
    return losses, norms, opt


def _reference():
    case = zoo.MODELS["hf_llama"](seed=0)
    keys = list(case.model.state_dict())
    losses, norms, _ = _loop(case.model, case, case.target)
    return losses, norms, keys, {k: v.clone() for k, v in case.model.state_dict().items()}


def _rank_loop(rank, world_size, ckpt_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import DTensor, Replicate

    import torch_localmap

    mesh = make_mesh((2, 2))
    case = zoo.MODELS["hf_llama"](seed=0)
    pmodel = torch_localmap.parallelize(case.model, mesh, case.args, case.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING)
    losses, norms, opt = _loop(pmodel, case, case.target)
    state = pmodel.state_dict()
    sharded = sum(isinstance(v, DTensor) and any(not isinstance(p, Replicate) for p in v.placements)
                  for v in state.values())
    dcp.save({"model": state, "optim": opt.state_dict()}, checkpoint_id=ckpt_dir)
    full = {k: _full(v) for k, v in state.items()}

    # A fresh model (other weights) on a different mesh shape, loaded from the checkpoint.
    mesh4 = make_mesh((4,))
    other = zoo.MODELS["hf_llama"](seed=1)
    pother = torch_localmap.parallelize(other.model, mesh4, other.args, other.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING)
    target = pother.state_dict()
    before = max(float((_full(target[k]) - full[k]).abs().max()) for k in full)
    dcp.load({"model": target}, checkpoint_id=ckpt_dir)
    pother.load_state_dict(target)
    loaded = {k: _full(v) for k, v in pother.state_dict().items()}
    # ... and it trains on from there: the next loss equals the saved model's next loss.
    next_loss = float(_full(case.loss(pother(*case.args, **case.kwargs), None).detach()))

    # A full state dict of plain tensors (torch.load'ed, a pretrained model's), the same on
    # every rank, loaded into the sharded module with plain load_state_dict.
    plain = zoo.MODELS["hf_llama"](seed=3).model.state_dict()
    pother.load_state_dict(plain)
    plain_loaded = max(float((_full(v) - plain[k]).abs().max()) for k, v in pother.state_dict().items())
    return {"losses": losses, "norms": norms, "keys": list(state), "sharded": sharded,
            "full": full if rank == 0 else None, "loaded": loaded if rank == 0 else None,
            "before": before, "next_loss": next_loss, "plain_loaded": plain_loaded,
            "plain_sharded": sum(isinstance(v, DTensor) and any(not isinstance(p, Replicate) for p in v.placements)
                                 for v in pother.state_dict().values())}


def test_sgd_momentum_scheduler_clipping_state_dict_and_checkpoint_across_meshes(tmp_path):
    ref_losses, ref_norms, ref_keys, ref_state = _reference()
    results = run_distributed(_rank_loop, 4, str(tmp_path / "ckpt"), timeout=600)
    for r in results:
        torch.testing.assert_close(torch.tensor(r["losses"]), torch.tensor(ref_losses), **TOL)
        torch.testing.assert_close(torch.tensor(r["norms"]), torch.tensor(ref_norms), **TOL)
        assert r["keys"] == ref_keys  # the model's own FQNs, in its order
        assert r["sharded"] >= len(ref_keys) // 2
    assert all(n > MAX_NORM for n in ref_norms), "clipping never scaled a step; the test would not see it"
    full = results[0]["full"]
    for k, v in ref_state.items():
        torch.testing.assert_close(full[k], v, **TOL, msg=lambda m: f"{k}: {m}")
    # The checkpoint, loaded onto a (4,) mesh into a model with other weights, is the saved state.
    assert results[0]["before"] > 1e-3
    for k, v in full.items():
        torch.testing.assert_close(results[0]["loaded"][k], v, rtol=0, atol=0, msg=lambda m: f"loaded {k}: {m}")
    ref_case = zoo.MODELS["hf_llama"](seed=0)
    ref_case.model.load_state_dict(ref_state)
    with torch.no_grad():
        ref_next = float(ref_case.loss(ref_case.model(*ref_case.args, **ref_case.kwargs), None))
    for r in results:
        assert abs(r["next_loss"] - ref_next) <= 1e-4 * max(1.0, abs(ref_next))
        assert r["plain_loaded"] == 0.0 and r["plain_sharded"] > 0, (r["plain_loaded"], r["plain_sharded"])
