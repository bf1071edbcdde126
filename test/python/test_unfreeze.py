"""Staged fine-tuning: the module planned with part of the model frozen, then unfrozen.

A traced program makes gradients for the parameters that required grad when it was traced.
Before which parameters require grad was part of a call's signature, unfreezing a layer
after planning reused the program that makes no gradient for it: the layer's `.grad` stayed
None and it never trained, silently. Now the first call after the change plans anew (the
state stays where it is), and training matches one process step for step.
"""
import pytest
import torch

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import ADAM_EPS, FORCE_SHARDING, LR, TOL, _full


def _staged(model, case, frozen):
    """One step with the `frozen` parameters frozen, then two with everything trainable."""
    for name in frozen:
        model.get_parameter(name).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, eps=ADAM_EPS)
    losses, grads_after_unfreeze = [], None
    for step in range(3):
        if step == 1:
            for name in frozen:
                model.get_parameter(name).requires_grad_(True)
        opt.zero_grad()
        loss = case.loss(model(*case.args, **case.kwargs), case.target)
        loss.backward()
        if step == 1:
            grads_after_unfreeze = {n: None if model.get_parameter(n).grad is None else _full(model.get_parameter(n).grad)
                                    for n in frozen}
        opt.step()
        losses.append(float(_full(loss.detach())))
    return losses, grads_after_unfreeze, {k: _full(v) for k, v in model.state_dict().items()}


def _frozen(model) -> list:
    """The embeddings and the first decoder layer: a backbone's first blocks, as fine-tuning freezes them."""
    return [n for n, _ in model.named_parameters() if n.startswith(("model.embed_tokens.", "model.layers.0."))]


def _rank(rank, world_size):
    import torch_localmap

    case = zoo.MODELS["hf_llama"](seed=0)
    frozen = _frozen(case.model)
    for name in frozen:  # planned while frozen
        case.model.get_parameter(name).requires_grad_(False)
    pmodel = torch_localmap.parallelize(case.model, make_mesh((2,)), case.args, case.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING)
    out = _staged(pmodel, case, frozen)
    return out, pmodel.plan_cache_stats["misses"]


@pytest.mark.timeout(900)
def test_parameters_unfrozen_after_planning_get_gradients_and_train_like_one_process():
    case = zoo.MODELS["hf_llama"](seed=0)
    frozen = _frozen(case.model)
    assert frozen
    ref_losses, ref_grads, ref_state = _staged(case.model, case, frozen)
    assert all(g is not None and g.abs().sum() > 0 for g in ref_grads.values())
    for (losses, grads, state), misses in run_distributed(_rank, 2, timeout=600):
        assert misses == 2  # planned frozen, planned again unfrozen
        missing = [n for n, g in grads.items() if g is None]
        assert not missing, f"unfrozen parameters got no gradient: {missing}"
        for n, g in grads.items():
            torch.testing.assert_close(g, ref_grads[n], **TOL, msg=n)
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), **TOL)
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, **TOL, msg=k)
