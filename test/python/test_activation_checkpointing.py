"""A model whose user turned on activation checkpointing, the way Hugging Face users do.

`model.gradient_checkpointing_enable()` wraps each decoder layer in a non-reentrant
torch.utils.checkpoint and registers a forward hook on the input embeddings that flags their
output as requiring grad (for frozen embeddings, as in adapter fine-tuning). The planned
program needs no step of that hook, and the checkpoints trace; a reentrant checkpoint does
not (its Function differentiates inside its own backward) and is refused by name, never
traced into a program whose layers get no gradient.
"""
import pytest
import torch

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, TOL, _train


def _checkpointed_llama(reentrant=False):
    case = zoo.hf_llama(seed=0)
    case.model.train()
    case.model.model.embed_tokens.weight.requires_grad_(False)  # frozen, as under an adapter
    case.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    return case


def _rank(rank, world_size):
    import torch_localmap

    case = _checkpointed_llama()
    model = torch_localmap.parallelize(case.model, make_mesh((2,)), case.args, case.kwargs,
                                       calibration=FORCE_SHARDING, time_limit=5)
    return _train(model, case, case.target)


def test_hugging_face_gradient_checkpointing_with_frozen_embeddings_trains_like_one_process():
    case = _checkpointed_llama()
    assert case.model.model.embed_tokens._forward_hooks, "transformers no longer registers its input hook"
    ref_losses, ref_state = _train(case.model, case, case.target)
    results = run_distributed(_rank, 2, timeout=300)
    for rank, (losses, state) in enumerate(results):
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), **TOL)
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, **TOL, msg=lambda m: f"rank {rank} {k}: {m}")
    # the layers trained: a program without gradients there would leave them at their start
    start = _checkpointed_llama().model.state_dict()
    assert not torch.equal(ref_state["model.layers.0.mlp.up_proj.weight"], start["model.layers.0.mlp.up_proj.weight"])


def test_a_reentrant_checkpoint_is_refused_by_name():
    from torch_localmap._trace import UnsupportedModelError
    from torch_localmap.plan import plan_module

    case = _checkpointed_llama(reentrant=True)
    with pytest.raises(UnsupportedModelError, match="use_reentrant=True.*\n.*use_reentrant': False"):
        plan_module(case.model, (2,), case.args, case.kwargs, time_limit=2)
