"""Mixed precision as FSDP2 users set it (issue 14): parameters and optimizer state in fp32,
compute in bf16, parameter gradients reduced in fp32.

The parity reference is independent of the package: the model in one process, called with
torch.func.functional_call on its parameters cast to bf16 by hand (buffers stay fp32, as a
policy leaves them), so autograd upcasts each gradient to its fp32 parameter. Gradients are
compared directly, step by step, and the optimizer is SGD, so parameters move in proportion
to their gradients: a gradient off by a constant factor (a reduction that sums where it
should average, a missing scale) fails the comparison, and the test shows that it does."""
import re

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

import zoo
from dist_utils import make_mesh, run_distributed
from test_zoo import FORCE_SHARDING, _full

POLICY = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
STEPS = 2
LR = 0.5  # large enough that two steps move every parameter by much more than bf16 noise
# Relative error of a gradient (norm of the difference over the reference's norm). bf16 keeps
# 8 bits of mantissa and the sharded program sums in another order: correct gradients were off
# by at most 0.9% at step 1 and 1.8% at step 2 (2x2 mesh, this model); one scaled by 1.25 is
# off by 25%, by 4 by 300%.
GRAD_RTOL = 0.05


def _sgd(params):
    return torch.optim.SGD(params, lr=LR, momentum=0.9)


def _relative_errors(got: dict, ref: dict) -> dict:
    return {k: float((got[k].float() - r.float()).norm() / r.float().norm().clamp_min(1e-30)) for k, r in ref.items()}


def _mismatches(got: dict, ref: dict, rtol: float = GRAD_RTOL) -> dict:
    """Tensors of `got` whose relative error against `ref` is above `rtol` (name -> error)."""
    assert got.keys() == ref.keys(), (sorted(got), sorted(ref))
    return {k: e for k, e in _relative_errors(got, ref).items() if not e <= rtol}


def _reference():
    """Losses, per-step gradients and final parameters of the hand-cast single-process model."""
    case = zoo.MODELS["hf_llama"](seed=0)
    model = case.model
    opt = _sgd(model.parameters())
    losses, grads = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        cast = {n: p.to(torch.bfloat16) for n, p in model.named_parameters()}
        loss = case.loss(torch.func.functional_call(model, cast, case.args, case.kwargs), case.target)
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
        losses.append(float(loss.detach()))
    return losses, grads, {n: p.detach().clone() for n, p in model.named_parameters()}


def _placements(spec: str) -> list:
    return re.findall(r"P\([a-z]+\)|S\(\d+\)|R", spec)


def _rank_mp(rank, world_size):
    import torch_localmap

    case = zoo.MODELS["hf_llama"](seed=0)
    pmodel = torch_localmap.parallelize(case.model, make_mesh((2, 2)), case.args, case.kwargs, time_limit=5,
                                        calibration=FORCE_SHARDING, mp_policy=POLICY)
    opt = _sgd(pmodel.parameters())
    losses, grads = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = case.loss(pmodel(*case.args, **case.kwargs), case.target)
        loss.backward()
        grads.append({n: _full(p.grad) for n, p in pmodel.named_parameters()})  # collective: every rank
        opt.step()
        losses.append(float(_full(loss.detach())))
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
    from torch.distributed.tensor import Replicate

    sharded = sum(any(not isinstance(q, Replicate) for q in p.placements)
                  for p in pmodel.parameters())
    dtypes = {(p.dtype, p.grad.dtype) for p in pmodel.parameters()}
    momentum = {s["momentum_buffer"].dtype for s in opt.state.values()}
    params = {n: _full(p.detach()) for n, p in pmodel.named_parameters()}
    return losses, (grads, params) if rank == 0 else None, kept, upcasts, sharded, dtypes, momentum


def test_bf16_compute_fp32_parameters_and_gradient_reduction():
    ref_losses, ref_grads, ref_params = _reference()
    results = run_distributed(_rank_mp, 4, timeout=600)
    n_params = len(ref_params)
    for losses, _, kept, upcasts, sharded, dtypes, momentum in results:
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-2, atol=1e-2)
        assert upcasts >= n_params and kept, (upcasts, kept)  # the casts and the transposes before them
        assert sharded > 0  # the parity below is that of a sharded program, not a replicated one
        assert dtypes == {(torch.float32, torch.float32)} and momentum == {torch.float32}
    grads, params = results[0][1]
    for step in range(STEPS):
        assert all(g.dtype == torch.float32 for g in grads[step].values())
        bad = _mismatches(grads[step], ref_grads[step])
        assert not bad, f"step {step}: gradients off the hand-cast reference: {bad}"
        # The comparison sees a wrong gradient: scaled by 4 (a sum where a mean belongs) or by 1.25.
        for scale in (4.0, 1.25):
            scaled = {k: scale * g for k, g in grads[step].items()}
            assert _mismatches(scaled, ref_grads[step]).keys() == ref_grads[step].keys(), scale
    # SGD moves each parameter by lr x (momentum-summed) gradients: the states agree as the gradients do.
    start = zoo.MODELS["hf_llama"](seed=0).model.state_dict()
    moved = {k: params[k] - start[k] for k in ref_params}
    assert not _mismatches(moved, {k: ref_params[k] - start[k] for k in ref_params})


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

    from torch_localmap import models
    from torch_localmap._torch_private import node_meta
    from torch_localmap.plan import plan_module

    cfg = dataclasses.replace(models.llama.LlamaConfig.tiny(), n_layers=2)
    model, inputs = models.build("llama", config=cfg, batch=2)
    plan = plan_module(model, (2, 2), inputs, mp_policy=POLICY, time_limit=3)
    sdpa = [n for n in plan.joint.gm.graph.nodes if "scaled_dot_product" in str(n.target)
            and not node_meta.is_backward_node(n)]
    assert sdpa and all(a.meta["val"].dtype == torch.bfloat16 for n in sdpa for a in n.args[:3])
    # The cast wrapper calls the model functionally; nodes still carry the model's module calls.
    assert {"layers.0.attention", "layers.1.feed_forward"} <= {c["name"] for c in plan.module_calls}
    assert {n.module for n in plan.nodes if n.phase == "backward"} >= {"layers.1.attention.wq", "output"}


def test_layer_stack_casts_inside_its_layers_with_the_same_values():
    """CastParameters casts a stack of alike layers' parameters as each layer starts (so a
    traced stack stamps); loss and fp32 gradients equal those of every parameter cast at the
    root, exactly (the same casts and the same ops)."""
    import dataclasses

    from torch_localmap import _mixed_precision as mp
    from torch_localmap import models

    torch.manual_seed(0)
    cfg = dataclasses.replace(models.llama.LlamaConfig.tiny(), n_layers=6)
    model, inputs = models.build("llama", config=cfg, batch=2)
    wrapped = mp.CastParameters(model, POLICY)
    assert len(wrapped._cast_layers) == 6 and all(not n.startswith("layers.") for n in wrapped._cast_at_root)
    seen = []
    for layer in wrapped._cast_layers:  # what the layers compute with: bf16 parameters
        layer.register_forward_hook(lambda m, _a, _o: seen.append({p.dtype for p in m.parameters()}))

    def loss_and_grads(call):
        model.zero_grad()
        out = call()
        loss = out.float().pow(2).mean()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    got = loss_and_grads(lambda: wrapped(*inputs))
    cast = {n: p.to(torch.bfloat16) for n, p in model.named_parameters()}
    ref = loss_and_grads(lambda: torch.func.functional_call(model, cast, inputs))
    assert seen[:6] == [{torch.bfloat16}] * 6
    torch.testing.assert_close(got[0], ref[0], rtol=0, atol=0)
    assert got[1].keys() == ref[1].keys()
    for n in ref[1]:
        assert got[1][n].dtype == torch.float32
        torch.testing.assert_close(got[1][n], ref[1][n], rtol=0, atol=0)
