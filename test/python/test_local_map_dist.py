"""local_map on DTensors, side by side with torch's own local_map, on 4 gloo ranks ((2, 2)
mesh). All cases run in one spawn to keep the suite fast; each case returns what the
parent asserts on."""
import pytest
import torch

from dist_utils import make_mesh, run_distributed


def _body(x, w, alpha):
    return torch.relu(x @ w) * alpha


def _cases(rank, world_size):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.experimental import local_map as torch_local_map

    import torch_localmap as tlm

    mesh = make_mesh((2, 2), ("dp", "tp"))
    torch.manual_seed(0)
    X, W = torch.randn(8, 4), torch.randn(4, 6)
    S0R, RR = [Shard(0), Replicate()], [Replicate(), Replicate()]
    out = {}

    def both(case, kw, x_placements, torch_kw=None):
        res = {}
        for who, lm in (("ours", tlm.local_map), ("torch", torch_local_map)):
            fn = lm(_body, **(torch_kw if who == "torch" and torch_kw else kw))
            x = distribute_tensor(X, mesh, x_placements).requires_grad_()
            w = distribute_tensor(W, mesh, RR).requires_grad_()
            y = fn(x, w, 2.0)
            (y.full_tensor() * torch.arange(48.0).view(8, 6)).sum().backward()
            res[who] = {"y": (tuple(y.placements), y.to_local().clone(), y.full_tensor()),
                        "gx": (tuple(x.grad.placements), x.grad.full_tensor()),
                        "gw": (tuple(w.grad.placements), w.grad.full_tensor())}
        out[case] = res

    base = dict(out_placements=S0R, in_placements=(S0R, RR, None), device_mesh=mesh)
    both("plain", base, S0R)
    both("partial_grad", {**base, "in_grad_placements": (S0R, [Partial(), Replicate()], None)}, S0R)
    both("redistribute", {**base, "redistribute_inputs": True, "in_grad_placements": (S0R, [Partial(), Replicate()], None)}, RR)
    # spec strings work like placement objects
    both("strings", dict(out_placements="S(0)R", in_placements=("S(0)R", "RR", None),
                         in_grad_placements=("S(0)R", "P(sum)R", None)), S0R,
         torch_kw={**base, "in_grad_placements": (S0R, [Partial(), Replicate()], None)})

    # unsharded reference for the Partial-gradient case
    xr, wr = X.clone().requires_grad_(), W.clone().requires_grad_()
    (_body(xr, wr, 2.0) * torch.arange(48.0).view(8, 6)).sum().backward()
    out["reference"] = (_body(X, W, 2.0), xr.grad, wr.grad)

    errors = {}

    def err(name, fn):
        try:
            fn()
            errors[name] = None
        except Exception as e:  # noqa: BLE001 - the parent asserts on type and message
            errors[name] = (type(e).__name__, str(e))

    x = distribute_tensor(X, mesh, S0R)
    w = distribute_tensor(W, mesh, RR)
    err("mismatch", lambda: tlm.local_map(_body, out_placements=S0R, in_placements=(S0R, S0R, None))(x, w, 2.0))
    other = mesh["dp"]
    x1 = distribute_tensor(X, other, [Shard(0)])
    err("other_mesh", lambda: tlm.local_map(_body, out_placements=S0R, in_placements=(S0R, RR, None),
                                            device_mesh=mesh)(x1, w, 2.0))
    err("count", lambda: tlm.local_map(_body, out_placements=S0R, in_placements=(S0R, RR))(x, w, 2.0))
    err("non_tensor", lambda: tlm.local_map(_body, out_placements=S0R, in_placements=(S0R, RR, RR))(x, w, 2.0))
    err("shard_rank", lambda: tlm.local_map(_body, out_placements=S0R,
                                            in_placements=([Shard(2), Replicate()], RR, None))(x, w, 2.0))
    err("out_count", lambda: tlm.local_map(_body, out_placements=(S0R, RR), in_placements=(S0R, RR, None))(x, w, 2.0))

    def mutate(a, b, alpha):
        a.add_(1.0)
        return a @ b

    err("mutation", lambda: tlm.local_map(mutate, out_placements=S0R, in_placements=(S0R, RR, None))(
        distribute_tensor(X, mesh, S0R), w, 2.0))
    out["errors"] = errors

    # make_fx over DTensor code traces through the region (to_local / from_local inlined)
    from torch.fx.experimental.proxy_tensor import make_fx

    fn = tlm.local_map(_body, **base)
    gm = make_fx(lambda a, b: fn(a, b, 2.0).to_local())(x, w)
    out["make_fx_dtensor"] = torch.equal(gm(x, w), fn(x, w, 2.0).to_local())
    assert isinstance(fn(x, w, 2.0), DTensor)
    return out


@pytest.fixture(scope="module")
def results():
    return run_distributed(_cases, 4, timeout=240.0)


@pytest.mark.parametrize("case", ["plain", "partial_grad", "redistribute", "strings"])
def test_matches_torch_local_map(results, case):
    for rank_out in results:
        ours, theirs = rank_out[case]["ours"], rank_out[case]["torch"]
        for key in ("y", "gx", "gw"):
            assert ours[key][0] == theirs[key][0], (case, key)
            for a, b in zip(ours[key][1:], theirs[key][1:]):
                torch.testing.assert_close(a, b)


def test_partial_input_gradient_is_partial_and_reduces_to_the_true_gradient(results):
    from torch.distributed.tensor import Partial, Replicate

    y_ref, gx_ref, gw_ref = results[0]["reference"]
    for case in ("partial_grad", "redistribute", "strings"):
        ours = results[0][case]["ours"]
        assert ours["gw"][0] == (Partial(), Replicate())
        torch.testing.assert_close(ours["gw"][1], gw_ref)
        torch.testing.assert_close(ours["gx"][1], gx_ref)
        torch.testing.assert_close(ours["y"][2], y_ref)
    # without the hint, the gradient of w only holds one dp rank's share (as with torch's)
    assert not torch.allclose(results[0]["plain"]["ours"]["gw"][1], gw_ref)


def test_bad_dtensor_inputs(results):
    e = results[0]["errors"]
    assert e["mismatch"][0] == "ValueError"
    assert "argument 1 has placements RR but" in e["mismatch"][1] and "expects S(0)R" in e["mismatch"][1]
    assert "redistribute_inputs=True" in e["mismatch"][1]
    assert e["other_mesh"][0] == "ValueError" and "argument 0 is a DTensor on mesh" in e["other_mesh"][1]
    assert e["count"][0] == "ValueError" and "in_placements has 2 entries but the call has 3" in e["count"][1]
    assert e["non_tensor"][0] == "ValueError" and "argument 2 is not a tensor (float)" in e["non_tensor"][1]
    assert e["shard_rank"][0] == "ValueError" and "Shard(2) is out of range" in e["shard_rank"][1]
    assert e["out_count"][0] == "ValueError" and "out_placements has 2 entries" in e["out_count"][1]
    assert e["mutation"][0] == "RegionMutationError"


def test_make_fx_through_dtensor_region(results):
    assert all(r["make_fx_dtensor"] for r in results)
