"""Mixed precision as FSDP2 users set it (issue 14): parameters and AdamW state in fp32,
compute in bf16, parameter gradients reduced in fp32. Compared with the same policy in one
process (the model run with its parameters cast to bf16), within bf16 tolerance."""
import re

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

POLICY = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
STEPS = 2


def _train(model, case):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = case.loss(model(*case.args, **case.kwargs), case.target)
        loss.backward()
        opt.step()
        losses.append(float(_full(loss.detach())))
    return losses, opt


def _reference():
    from torch_localmap._mixed_precision import CastParameters

    case = zoo.MODELS["hf_llama"](seed=0)
    losses, _ = _train(CastParameters(case.model, POLICY), case)
    return losses, {k: v.clone() for k, v in case.model.state_dict().items()}


def _placements(spec: str) -> list:
    return re.findall(r"P\([a-z]+\)|S\(\d+\)|R", spec)


def _rank_mp(rank, world_size):
    import torch_localmap

    case = zoo.MODELS["hf_llama"](seed=0)
    pmodel = torch_localmap.parallelize(case.model, make_mesh((2, 2)), case.args, case.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING, mp_policy=POLICY)
    losses, opt = _train(pmodel, case)
    plan = pmodel.plan
    # Every gradient upcast takes its producer's pending sums as they are: reduced after it, in fp32.
    kept, upcasts = True, 0
    for i, node in enumerate(plan.graph.nodes):
        if not node.extra.get("keep_partial_inputs"):
            continue
        upcasts += 1
        src = plan.graph.index_of[plan.graph.fx_nodes[i].args[0]]
        produced, taken = _placements(plan.nodes[src].outputs[0]), _placements(plan.nodes[i].inputs[0])
        kept &= all(t == p for p, t in zip(produced, taken) if p.startswith("P"))
    dtypes = {(p.dtype, p.grad.dtype) for p in pmodel.parameters()}
    exp_avg = {s["exp_avg"].dtype for s in opt.state.values()}
    state = {k: _full(v) for k, v in pmodel.state_dict().items()}
    return losses, state if rank == 0 else None, kept, upcasts, dtypes, exp_avg


def test_bf16_compute_fp32_parameters_and_gradient_reduction():
    ref_losses, ref_state = _reference()
    results = run_distributed(_rank_mp, 4, timeout=600)
    n_params = len(list(zoo.MODELS["hf_llama"](seed=0).model.parameters()))
    for losses, _, kept, upcasts, dtypes, exp_avg in results:
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-2, atol=1e-2)
        assert upcasts >= n_params and kept, (upcasts, kept)  # the casts and the transposes before them
        assert dtypes == {(torch.float32, torch.float32)} and exp_avg == {torch.float32}
    state = results[0][1]
    for k, v in ref_state.items():
        assert state[k].dtype == v.dtype == torch.float32
        torch.testing.assert_close(state[k], v, rtol=0, atol=3e-3, msg=lambda m: f"{k}: {m}")


def _weight_grad_chain(plan):
    """(spec the gradient's producer makes, spec its fp32 upcast takes) for a bias-free Linear."""
    g = plan.graph
    for i, fx in enumerate(g.fx_nodes):
        if fx.op == "call_function" and any(u.op == "output" for u in fx.users) \
                and fx.meta["val"].dtype == torch.float32 and fx.args[0].meta["val"].dtype == torch.bfloat16:
            chain = [fx]
            while str(chain[-1].args[0].target).split(".")[1] in ("t", "_to_copy"):
                chain.append(chain[-1].args[0])
            producer = chain[-1].args[0]
            return plan.nodes[g.index_of[producer]].outputs[0], plan.nodes[i].inputs[0]
    raise AssertionError("no fp32 gradient upcast in the plan")


def test_reduce_dtype_moves_the_gradient_reduction_after_the_upcast():
    # Batch-sharded input, replicated weight: the weight's gradient is a pending sum (P) made
    # in bf16. Reducing it in bf16 is cheaper, so without reduce_dtype the planner does; with
    # reduce_dtype=float32 the sum must travel through the upcast and be reduced in fp32.
    from torch_localmap.plan import plan_module

    model = torch.nn.Linear(1024, 1024, bias=False)
    x = torch.randn(16384, 1024)
    common = dict(time_limit=5, input_specs={"0": "S(0)"}, fixed_params={"weight": "R"})
    narrow = plan_module(model, (4,), (x,), mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16), **common)
    wide = plan_module(model, (4,), (x,), mp_policy=POLICY, **common)
    assert _weight_grad_chain(narrow)[1] == "R"  # reduced before the upcast, in bf16
    assert _weight_grad_chain(wide) == ("P(sum)", "P(sum)")  # reduced after it, in fp32
    assert wide.summary.comm_s > narrow.summary.comm_s  # fp32 moves twice the bytes


def test_own_llama_preset_plans_under_a_bf16_policy():
    # Its rotary tables are float32 buffers (a policy casts parameters only): q and k must
    # come back in the compute dtype, or SDPA refuses float32 q/k with a bf16 v.
    import dataclasses

    from torch_localmap import _torch_private, models
    from torch_localmap.plan import plan_module

    cfg = dataclasses.replace(models.llama.LlamaConfig.tiny(), n_layers=2)
    model, inputs = models.build("llama", config=cfg, batch=2)
    plan = plan_module(model, (2, 2), inputs, mp_policy=POLICY, time_limit=3)
    sdpa = [n for n in plan.joint.gm.graph.nodes if "scaled_dot_product" in str(n.target)
            and not _torch_private.is_backward_node(n)]
    assert sdpa and all(a.meta["val"].dtype == torch.bfloat16 for n in sdpa for a in n.args[:3])
    # The cast wrapper calls the model functionally; nodes still carry the model's module calls.
    assert {"layers.0.attention", "layers.1.feed_forward"} <= {c["name"] for c in plan.module_calls}
    assert {n.module for n in plan.nodes if n.phase == "backward"} >= {"layers.1.attention.wq", "output"}
