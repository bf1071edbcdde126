"""calibration="live": every rank measures the mesh together, rank 0 caches the profile in a
file, later plans reuse it (no measuring), all ranks plan with the same profile."""
import json
import os
import random

import pytest
import torch
import torch.nn as nn

from dist_utils import make_mesh, run_distributed


def _rank_live(rank, world, cache):
    os.environ["TLM_CACHE_DIR"] = cache
    torch.set_num_threads(1)
    from torch.distributed.tensor import Replicate

    from torch_localmap import _live_calibration as live
    from torch_localmap import parallelize
    from torch_localmap.cost_model import load_cost_model

    mesh = make_mesh((world,))
    first = live.live_profile(mesh, "cpu")
    path = live.cache_path(mesh, "cpu")
    exists = os.path.exists(path)

    measured = []
    real = live.measure_mesh
    live.measure_mesh = lambda *a: measured.append(1) or real(*a)
    again = live.live_profile(mesh, "cpu")  # from the file: nothing measured
    fresh = live.live_profile(mesh, "cpu", refresh=True)  # measured anew (and rewritten)
    live.measure_mesh = real

    model_fields = load_cost_model("cpu", path).device
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    pm = parallelize(model, mesh, (torch.randn(16, 64),), device="cpu", calibration="live", time_limit=2.0)
    from_file = parallelize(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)), mesh,
                            (torch.randn(16, 64),), device="cpu", calibration=path, time_limit=2.0)
    est = [pm.plan.summary.estimated_step_s, from_file.plan.summary.estimated_step_s]
    chosen = [[(n.inputs, n.outputs) for n in p.plan.nodes] for p in (pm, from_file)]
    solves = [(p.plan.summary.solver.cost, p.plan.summary.solver.bound) for p in (pm, from_file)]
    # The same profile, but its "fused" figures an optimizer step 100x cheaper than the loop's:
    # optimizer_impl="fused" must price the step with them, the default with the loop's.
    with open(path) as f:
        cheap = json.load(f)
    loop = cheap["meta"]["optimizer_impls"]["for-loop"]
    cheap["meta"]["optimizer_impls"]["fused"] = {"optimizer_kernel_overhead_s": 0.0,
                                                 "optimizer_bandwidth": 100 * loop["optimizer_bandwidth"]}
    priced = {}
    for impl in (None, "fused"):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
        pm_impl = parallelize(m, mesh, (torch.randn(16, 64),), device="cpu", calibration=cheap, time_limit=2.0,
                              fixed_params={n: [Replicate()] for n, _ in m.named_parameters()}, optimizer_impl=impl)
        priced[str(impl)] = pm_impl.plan.summary.estimated_step_s
    return {"first": first, "again": again, "exists": exists, "measured_again": len(measured), "fresh": fresh,
            "rate": model_fields["peak_flops_fp32"], "estimates": est, "same_plan": chosen[0] == chosen[1],
            "solves": solves, "priced": priced}


def test_live_calibration_round_trips_through_its_file(tmp_path):
    results = run_distributed(_rank_live, 2, str(tmp_path), timeout=600)
    r0 = results[0]
    assert r0["exists"]
    assert r0["again"] == r0["first"]  # read back from the file, unchanged
    assert r0["measured_again"] == 1  # only the refresh measured
    assert r0["fresh"]["meta"]["measured_at"] and r0["fresh"]["collectives"]
    for r in results[1:]:  # every rank got rank 0's profile
        assert r["first"] == r0["first"] and r["fresh"] == r0["fresh"]
    p = r0["first"]
    assert p["device"]["peak_flops_fp32"] > 0 and p["device"]["kernel_overhead_s"] > 0
    # Measured figures are only checked for sign here: how two timings compare depends on the
    # machine's load (a CI run beside another once measured the copy at 10 GB/s and AdamW at 28).
    assert p["device"]["optimizer_kernel_overhead_s"] >= 0 and p["device"]["optimizer_bandwidth"] > 0
    # Every AdamW implementation measured; the device fields hold torch's CPU default, the loop.
    impls = p["meta"]["optimizer_impls"]
    assert set(impls) == {"for-loop", "foreach", "fused"}
    assert all(f["optimizer_bandwidth"] > 0 and f["optimizer_kernel_overhead_s"] >= 0 for f in impls.values())
    assert p["meta"]["optimizer_impl"] == "for-loop"
    # Large products and skinny ones in the three of a linear layer, rate and n-half fitted together.
    fit = p["meta"]["matmul_fits"]["peak_flops_fp32"]
    assert fit["columns"] == ["flops", "smallest_dim", "seconds"] and len(fit["samples"]) == 10
    assert all(f > 0 and d > 0 and t > 0 for f, d, t in fit["samples"])
    assert 0 <= p["device"]["matmul_half_dim"] < 1e4 and fit["overhead_s"] >= 0
    # Flash attention on CPU: its head-width penalty and the causal kernel's diagonal key tile.
    assert 0 <= p["device"]["attention_half_dim"] < 1e4
    assert 0 <= p["device"]["attention_causal_tile"] <= 1024
    assert {k: p["device"][k] for k in impls["for-loop"]} == impls["for-loop"]
    # The parameters replicated: every rank steps the whole of them; the fused figures price it less.
    assert r0["priced"]["fused"] < r0["priced"]["None"], r0["priced"]
    # One host holds every rank: all of them are one node's (the "cpu" table's own figure would not do
    # for a larger world: it would price half of a group's hops on an inter-node link never measured).
    assert p["topology"] == {"ranks_per_node": len(results)}
    kinds = {(c["collective"], c["group_size"]) for c in p["collectives"]}
    assert kinds == {(k, 2) for k in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")}
    # The file is an ordinary profile: loaded by path it prices as the cached one does (the
    # refresh rewrote it, so its rate is the fresh measurement's).
    assert r0["rate"] == pytest.approx(r0["fresh"]["device"]["peak_flops_fp32"])
    # The solver stops at its gap tolerance (0.1%) and a time-limited search may stop at another of
    # the near-optimal plans: the same plan must price the same; either way both solves solved one
    # problem, so each plan's cost lies above the other solve's proven bound.
    if r0["same_plan"]:
        assert r0["estimates"][0] == pytest.approx(r0["estimates"][1])
    (cost0, bound0), (cost1, bound1) = r0["solves"]
    assert cost0 >= bound1 * (1 - 1e-9) and cost1 >= bound0 * (1 - 1e-9), r0["solves"]
    files = [f for f in os.listdir(tmp_path) if f.endswith(".json")]
    assert len(files) == 1, files
    with open(os.path.join(tmp_path, files[0])) as f:
        assert json.load(f) == r0["fresh"]


def test_live_calibration_needs_an_initialized_process_group(monkeypatch):
    import torch.distributed as dist

    from torch_localmap._live_calibration import live_profile

    # as in a process without a group, whatever an earlier test on this pytest worker left
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    with pytest.raises(ValueError, match="process group is initialized"):
        live_profile(object(), "cpu")



def test_optimizer_impl_picks_the_profile_figures_measured_for_it():
    from torch_localmap._live_calibration import with_optimizer_impl

    figures = {"for-loop": {"optimizer_kernel_overhead_s": 2e-5, "optimizer_bandwidth": 1e10},
               "fused": {"optimizer_kernel_overhead_s": 0.0, "optimizer_bandwidth": 7e10}}
    profile = {"version": 1, "device": {"optimizer_bandwidth": 1e10, "optimizer_kernel_overhead_s": 2e-5,
                                        "memory_bandwidth": 2e10},
               "meta": {"optimizer_impls": figures, "optimizer_impl": "for-loop"}}
    fused = with_optimizer_impl(profile, "fused")
    assert fused["device"] == {"optimizer_bandwidth": 7e10, "optimizer_kernel_overhead_s": 0.0, "memory_bandwidth": 2e10}
    assert fused["meta"]["optimizer_impl"] == "fused"
    assert profile["device"]["optimizer_bandwidth"] == 1e10  # the caller's profile is left as it was
    with pytest.raises(ValueError, match="optimizer_impl must be one of for-loop, foreach, fused"):
        with_optimizer_impl(profile, "adam")
    with pytest.raises(ValueError, match="no optimizer figures measured for it"):
        with_optimizer_impl(profile, "foreach")
    with pytest.raises(ValueError, match="no optimizer figures measured for it"):
        with_optimizer_impl({"version": 1, "device": {}}, "fused")


def test_optimizer_bandwidth_counts_the_loops_streams_over_state_larger_than_the_caches(monkeypatch):
    """optimizer_bandwidth is 19 parameter-sized streams per step over the seconds of one step
    (cost_model.h: optimizer_bandwidth) of an AdamW whose state does not fit a CPU's caches."""
    from torch_localmap import _live_calibration as live

    timed = []

    def one_step(fn, device, group=None):
        opt = fn.__self__  # the bound AdamW.step timed
        timed.append(sum(p.numel() * p.element_size() for g in opt.param_groups for p in g["params"]))
        fn()
        return 0.25

    monkeypatch.setattr(live, "_per_call_seconds", one_step)
    for impl in live.OPTIMIZER_IMPLS:
        bandwidth = live._optimizer_bandwidth(torch.device("cpu"), impl)
        assert bandwidth == pytest.approx(19 * timed[-1] / 0.25)
        # parameters, gradients and both moments: 4x the parameters' bytes, past a 2-8 MiB L2
        assert 4 * timed[-1] >= 64 << 20


def test_matmul_fit_recovers_rate_overhead_and_n_half():
    from torch_localmap._live_calibration import _fit_matmul

    shapes = [(3.4e7, 64), (5.4e8, 256), (1.1e9, 512), (4.3e9, 1024), (1.7e7, 8), (6.7e7, 32), (1.7e7, 8)]
    for overhead, rate, n_half in ((2e-6, 1e11, 0.0), (0.0, 8e10, 3.0), (5e-5, 1.5e11, 11.0), (1e-5, 7e10, 40.0)):
        fit = _fit_matmul([(f, d, overhead + f / rate * (1 + n_half / d)) for f, d in shapes])
        assert fit["rate"] == pytest.approx(rate, rel=1e-6)
        assert fit["half_dim"] == pytest.approx(n_half, abs=1e-6)
        assert fit["overhead_s"] == pytest.approx(overhead, abs=1e-9)
    # Skinny products no slower than large ones: no shape effect, never a negative figure; likewise
    # a negative intercept is dropped and the rate refitted through the origin.
    fit = _fit_matmul([(f, d, 0.9 * f / 1e11 if d < 64 else f / 1e11) for f, d in shapes])
    assert fit["half_dim"] == 0.0 and fit["overhead_s"] >= 0 and fit["rate"] > 0
    fit = _fit_matmul([(f, d, f / 1e11 - 1e-6) for f, d in shapes if d >= 64])
    assert fit["overhead_s"] == 0.0 and fit["half_dim"] >= 0 and fit["rate"] == pytest.approx(1e11, rel=0.05)
    with pytest.raises(RuntimeError, match="no positive rate"):
        _fit_matmul([(1e9, 1024, 1e-3), (1e9, 1024, 1e-3), (1e6, 1024, 1.0)])
    # Launch-bound products (every time the same) show no rate whatever shapes they have: least
    # squares leaves the flop term at rounding noise, of either sign depending on LAPACK.
    rng = random.Random(0)
    for _ in range(200):
        shapes = [(10 ** rng.uniform(6, 11), rng.choice((8, 32, 64, 256, 1024))) for _ in range(rng.randint(3, 10))]
        with pytest.raises(RuntimeError, match="no positive rate"):
            _fit_matmul([(f, d, 1.7e-5) for f, d in shapes])


def test_attention_fit_recovers_the_half_dim_and_the_causal_tile():
    from torch_localmap._live_calibration import ATTENTION_SHAPES, _attention_flops, _causal_tile, _fit_attention

    for rate, half in ((1e11, 0.0), (8e10, 20.0), (1.5e11, 64.0)):
        samples = [(_attention_flops(k, e), e, _attention_flops(k, e) / rate * (1 + half / e)) for k, e in ATTENTION_SHAPES]
        assert _fit_attention(samples, rate) == pytest.approx(half, abs=1e-9)
    # Faster than the matmul rate: no penalty, never a negative figure.
    fast = [(_attention_flops(k, e), e, 0.8 * _attention_flops(k, e) / 1e11) for k, e in ATTENTION_SHAPES]
    assert _fit_attention(fast, 1e11) == 0.0
    # causal / full = (1 + tile / keys) / 2: 0.74 of full at 1024 keys is a 492-key tile; half
    # exactly, no tile; as long as full (or longer, timing noise), a tile of all the keys.
    assert _causal_tile(0.74, 1.0, 1024) == pytest.approx(491.52)
    assert _causal_tile(0.5, 1.0, 1024) == 0.0 and _causal_tile(0.45, 1.0, 1024) == 0.0
    assert _causal_tile(1.0, 1.0, 1024) == 1024 and _causal_tile(1.2, 1.0, 1024) == 1024


def test_launch_bound_products_are_grown_until_their_flops_show(monkeypatch):
    """A device fast enough that every default product costs its launch alone (an H200 in
    bfloat16: 16-18 us each) has its shapes grown until the rate shows, and the fit finds it."""
    from torch_localmap import _live_calibration as live

    launch, rate = 1.7e-5, 7e14
    scales = []

    def samples(device, dtype, scale=1):
        scales.append(scale)
        cases = [(2.0 * m * k * n * scale ** 3, min(m, k, n) * scale) for m, k, n in live.MATMUL_SHAPES]
        cases += [(2.0 * rows * live.SKINNY_MATMUL_KN ** 2, rows) for rows in live.SKINNY_MATMUL_ROWS]
        return [(f, d, max(launch, f / rate)) for f, d in cases]  # the launch hides the product

    monkeypatch.setattr(live, "_matmul_samples", samples)
    monkeypatch.setattr(live, "_max_over_ranks", lambda values, device: list(values))
    grown = live._flop_bound_matmul_samples(torch.device("cpu"), torch.bfloat16)
    assert scales == [1, 2, 4]  # 4: the largest product (2.7e11 flops) takes 390 us, 23x the smallest
    assert live._fit_matmul(grown)["rate"] == pytest.approx(rate, rel=0.35)
    with pytest.raises(RuntimeError, match="no positive rate"):
        live._fit_matmul(samples(None, None))  # unscaled, the samples show no rate at all
