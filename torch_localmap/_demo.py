"""The demo: plan an MLP on a 2x2 mesh, compare with hand plans, train on 4 gloo ranks,
and check the losses against a single-process run."""
from __future__ import annotations

import copy
import time

import torch

from .examples.mlp import make_example
from .launch import make_mesh, run_distributed
from .plan import plan_module
from ._report import format_plan, format_comparison

MESH = (2, 2)
MESH_NAMES = ("dp", "tp")


def _train(model, x, y, steps, lr, show_progress=False):
    """SGD steps on `model(x, y)`; the same loop for the reference and every rank."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if show_progress:
            print(f"  step {step + 1}/{steps}  loss {losses[-1]:.6f}", flush=True)
    return losses


def _train_reference(steps, lr, cfg):
    model, (x, y) = make_example(**cfg)
    return _train(model, x, y, steps, lr)


def _train_rank(rank, world_size, steps, lr, cfg):
    from ._parallelize import parallelize

    mesh = make_mesh(MESH, MESH_NAMES)
    model, (x, y) = make_example(**cfg)
    pmodel = parallelize(model, mesh, (x, y), time_limit=5.0)
    return _train(pmodel, x, y, steps, lr, show_progress=rank == 0)


def run(steps=5, lr=0.05, cfg=None) -> int:
    # Big enough that the H100 cost model prefers sharding to replication (tiny layers are
    # dominated by fixed per-kernel overhead and rightly stay replicated).
    cfg = dict(batch=512, d_in=256, hidden=512, d_out=256, depth=2, dtype=torch.float64) | (cfg or {})
    model, example = make_example(**cfg)
    print(f"== Planning a {cfg['depth'] + 1}-layer MLP (batch {cfg['batch']}, hidden {cfg['hidden']}) "
          f"on a {MESH[0]}x{MESH[1]} mesh {MESH_NAMES}, cost model: H100")
    t0 = time.perf_counter()
    plan = plan_module(copy.deepcopy(model), MESH, example, time_limit=5.0)
    print(f"   planned in {time.perf_counter() - t0:.2f} s")
    print(format_plan(plan))
    names = list(plan.param_placements())
    hand = {
        "DDP (params replicated, batch sharded)": {n: "RR" for n in names},
        "FSDP (params sharded on dim 0 over the whole mesh)": {n: "S(0)S(0)" for n in names},
    }
    others = {label: plan_module(copy.deepcopy(model), MESH, example, time_limit=5.0, fixed_params=fixed)
              for label, fixed in hand.items()}
    print(format_comparison(plan, others))

    print(f"\n== Training {steps} SGD steps on {MESH[0] * MESH[1]} gloo CPU ranks (127.0.0.1)")
    dist_losses = run_distributed(_train_rank, MESH[0] * MESH[1], steps, lr, cfg, timeout=300.0)
    print("== Single-process reference run")
    ref = _train_reference(steps, lr, cfg)
    worst = max(abs(a - b) for rank_losses in dist_losses for a, b in zip(rank_losses, ref))
    ok = worst <= 1e-9 * max(1.0, max(abs(v) for v in ref))
    print(f"   reference losses: {', '.join(f'{v:.6f}' for v in ref)}")
    verdict = "MATCH" if ok else "MISMATCH"
    print(f"== {verdict}: every rank's loss equals the single-process loss (max |diff| = {worst:.2e}, float64)")
    return 0 if ok else 1
