"""Training step time and peak memory of our planned programs against what a user would
otherwise run: one process, DDP, FSDP2 (fully_shard), a hand TP(+FSDP2) DTensor plan.

    PYTHONPATH=$PWD python benchmarks/step_time.py [--models mlp,llama,moe] [--meshes 4,2x2]
        [--steps 20] [--warmup 3] [--calibration profile.json] [--json results.json]

Every row trains the same model (same seed, same batch every step, AdamW) for the same
number of steps on 4 gloo ranks (the single-process row: one process, the whole batch)
and reports: the median step time over --steps steps after warm-up, its ratio to the best
torch row, the measured peak memory per rank (the most any rank used; allocations since
before the model was built, _runtime/memory.py), our plan's estimate of step time and
peak, and the loss after the steps (all rows must agree: the data-parallel rows average
per-shard losses, which equals the whole batch's mean loss).

The MoE runs with capacity_factor = n_experts / top_k (no token is dropped) and no
auxiliary loss, so a data-parallel shard routes its tokens as the whole batch would.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torch_localmap import models  # noqa: E402
from torch_localmap.launch import make_mesh, run_distributed  # noqa: E402
from torch_localmap._runtime.memory import PeakMemory  # noqa: E402

WORLD = 4
ROWS = ["single", "ddp", "fsdp2", "tp_fsdp2", "ours_eager", "ours_compiled", "ours_dp_compiled"]
TORCH_ROWS = ("single", "ddp", "fsdp2", "tp_fsdp2")


class MLP(nn.Module):
    """Residual MLP blocks and a regression loss."""

    def __init__(self, dim=512, hidden=2048, layers=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
                                    for _ in range(layers))
        self.head = nn.Linear(dim, dim)

    def forward(self, x, y):
        for blk in self.blocks:
            x = x + blk(x)
        return F.mse_loss(self.head(x), y)


def build(name: str):
    """(model, (inputs, targets)), the same on every rank."""
    if name == "mlp":
        torch.manual_seed(0)
        model = MLP()
        g = torch.Generator().manual_seed(1)
        return model, (torch.randn(64, 512, generator=g), torch.randn(64, 512, generator=g))
    if name == "llama":
        cfg = models.llama.LlamaConfig(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=688, vocab_size=1024,
                                       seq_len=64)
        return models.build("llama", cfg, batch=8, seed=0)
    if name == "moe":
        cfg = replace(models.moe.MoEConfig.tiny(), dim=128, n_layers=2, n_heads=4, n_experts=4, top_k=2,
                      expert_ffn_dim=256, vocab_size=512, seq_len=32, capacity_factor=2.0, aux_loss_weight=0.0)
        return models.build("moe", cfg, batch=8, seed=0)
    raise ValueError(f"unknown model {name!r}; expected mlp, llama or moe")


def _blocks(model):
    """The repeated blocks FSDP2 wraps one by one."""
    return list(model.blocks if hasattr(model, "blocks") else model.layers)


def _tp_plan(name: str, model, tp: int):
    """torch's own tensor-parallel styles for each block (Megatron-style column/row pairs),
    as torchtitan applies them: attention computes on local heads."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plans = []
    for blk in _blocks(model):
        if name == "mlp":
            plans.append((blk, {"0": ColwiseParallel(), "2": RowwiseParallel()}))
        elif name == "llama":
            blk.attention.n_heads //= tp  # the module reshapes with its own head counts
            blk.attention.n_kv //= tp
            plans.append((blk, {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                                "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
                                "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
                                "feed_forward.w2": RowwiseParallel()}))
    return plans


HAND_TP = {"mlp", "llama"}
NO_HAND_TP = ("no torch TP style fits the MoE: ColwiseParallel on its fused qkv would split across q/k/v, "
              "and its experts are raw einsum parameters")


def _setup(row, name, model, batch, mesh_shape, calibration):
    """(module to train, the step's (args), how to read the global loss, plan or None)."""
    x, y = batch
    if row == "single":
        return model, (x, y), lambda loss: loss.item(), None
    rank = dist.get_rank()
    if row == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model), (x.chunk(WORLD)[rank], y.chunk(WORLD)[rank]), _mean_over_ranks, None
    if row == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        mesh = make_mesh((WORLD,))
        for blk in _blocks(model):
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model, (x.chunk(WORLD)[rank], y.chunk(WORLD)[rank]), _mean_over_ranks, None
    if row == "tp_fsdp2":
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor.parallel import parallelize_module

        if len(mesh_shape) == 1:  # TP over all ranks, every rank the whole batch
            tp_mesh, dp_mesh, dp_rank, dp = make_mesh(mesh_shape), None, 0, 1
        else:
            mesh = make_mesh(mesh_shape, mesh_dim_names=("dp", "tp"))
            tp_mesh, dp_mesh = mesh["tp"], mesh["dp"]
            dp_rank, dp = dp_mesh.get_local_rank(), dp_mesh.size()
        for blk, plan in _tp_plan(name, model, tp_mesh.size()):
            parallelize_module(blk, tp_mesh, plan)
        if dp_mesh is not None:
            for blk in _blocks(model):
                fully_shard(blk, mesh=dp_mesh)
            fully_shard(model, mesh=dp_mesh)
        read = _mean_over_ranks if dp > 1 else (lambda loss: loss.item())
        return model, (x.chunk(dp)[dp_rank], y.chunk(dp)[dp_rank]), read, None
    from torch_localmap import parallelize

    # ours_dp_compiled: our runtime on DDP's plan (every parameter replicated, the batch
    # split by the planner) -- separates the runtime's speed from the planner's choice.
    fixed = {k: "R" * len(mesh_shape) for k, _ in model.named_parameters()} if row == "ours_dp_compiled" else None
    pm = parallelize(model, make_mesh(mesh_shape), (x, y), device="cpu", time_limit=5.0, calibration=calibration,
                     compile=row != "ours_eager", fixed_params=fixed)
    return pm, (x, y), lambda loss: loss.item(), pm.plan  # step() made it the global value


def _mean_over_ranks(loss) -> float:
    t = loss.detach().clone()
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def _loss_of(module, args):
    out = module(*args)
    return out.full_tensor() if hasattr(out, "full_tensor") else out


def _rank(rank, world, row, name, mesh_shape, steps, warmup, calibration):
    torch.set_num_threads(1)  # 4 ranks share the machine's cores
    with PeakMemory("cpu") as mem:
        model, batch = build(name)
        module, args, read, plan = _setup(row, name, model, batch, mesh_shape, calibration)
        opt = torch.optim.AdamW(module.parameters(), lr=1e-3)

        def step():
            loss = _loss_of(module, args)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        for _ in range(2):  # first steps: compilation, optimizer state; the peak is in here
            step()
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    out = {"median_s": statistics.median(times), "peak_bytes": mem.peak_bytes, "loss": read(loss),
           "steps": 2 + warmup + steps}
    if plan is not None:
        out["estimate_s"] = plan.summary.estimated_step_s
        out["estimate_peak_bytes"] = plan.summary.memory.peak
        out["plan"] = dict(plan.param_placements())
        if row == "ours_eager" and calibration:  # where the estimate is off, by op family and collective kind
            from torch_localmap._runtime.profile import compare_with_plan
            from torch_localmap.cost_model import load_cost_model

            compiled, leaves = module._compiled_for(args, {})
            inputs = [x.detach() for x in module._program_inputs(compiled, leaves)]
            out["breakdown"] = compare_with_plan(compiled.program, plan, inputs, load_cost_model("cpu", calibration))
    return out


def _device_rates(rank, world):
    from torch_localmap._calibrate import device_profile

    torch.set_num_threads(1)  # as the rows run: 4 single-threaded ranks sharing the cores
    return device_profile("cpu", "cpu", matmul_n=512, attn_shape=(2, 4, 128, 32), copy_bytes=1 << 24)


def calibrate(path: str) -> str:
    """A calibration profile of this machine as the rows use it: compute rates measured by
    4 concurrent single-threaded ranks, gloo collectives among 4 ranks."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import calibrate_collectives

    doc = run_distributed(_device_rates, WORLD, timeout=600)[0]
    doc["collectives"] = calibrate_collectives.measure(WORLD)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def run_row(row, name, mesh_shape, steps, warmup, calibration):
    if row == "tp_fsdp2" and name not in HAND_TP:
        raise NotImplementedError(NO_HAND_TP)
    # Every row in fresh processes: nothing a previous row allocated is in its memory figures.
    world = 1 if row == "single" else WORLD
    results = run_distributed(_rank, world, row, name, mesh_shape, steps, warmup, calibration, timeout=1800,
                              pg_timeout=600)
    r0 = dict(results[0])
    r0["median_s"] = max(r["median_s"] for r in results)  # a step ends when the slowest rank ends
    r0["peak_bytes"] = max(r["peak_bytes"] for r in results)
    return r0


def table(model, mesh_shape, results) -> str:
    # The best distributed torch row: what a user would otherwise run on the same 4 ranks.
    best = min((results[r]["median_s"] for r in TORCH_ROWS[1:] if "median_s" in results.get(r, {})), default=None)
    lines = [f"\n### {model}, mesh {'x'.join(map(str, mesh_shape))} (4 gloo ranks; single: 1 process)",
             "", "| row | step (median) | vs best torch | peak/rank measured | peak/rank estimate | est. step | loss |",
             "|---|---|---|---|---|---|---|"]
    for row in ROWS:
        r = results.get(row)
        if r is None:
            continue
        if "error" in r:
            what = r["error"] if r["error"].startswith("n/a") else f"failed: {r['error']}"
            lines.append(f"| {row} | {what} | | | | | |")
            continue
        ratio = f"{r['median_s'] / best:.2f}x" if best else "-"
        est = f"{r['estimate_peak_bytes'] / 2**20:.1f} MiB" if "estimate_peak_bytes" in r else "-"
        est_t = f"{r['estimate_s'] * 1e3:.2f} ms" if "estimate_s" in r else "-"
        lines.append(f"| {row} | {r['median_s'] * 1e3:.1f} ms | {ratio} | {r['peak_bytes'] / 2**20:.1f} MiB | {est} "
                     f"| {est_t} | {r['loss']:.5f} |")
    losses = [r["loss"] for r in results.values() if "loss" in r]
    spread = (max(losses) - min(losses)) / max(abs(min(losses)), 1e-12) if losses else 0.0
    lines.append(f"\nlosses agree to {spread:.1e} (relative); steps per row: "
                 f"{next(iter(r['steps'] for r in results.values() if 'steps' in r), '-')}")
    bd = results.get("ours_eager", {}).get("breakdown")
    if bd:
        lines += ["", "ours_eager, one step node by node on rank 0 (collectives waited at once), against the "
                  "calibrated cost model:", "", "| category | estimated | measured | measured/estimated |",
                  "|---|---|---|---|"]
        for key, e, m, r in bd[:12]:
            lines.append(f"| {key} | {e * 1e3:.2f} ms | {m * 1e3:.2f} ms | {r:.2f} |")
    ours = results.get("ours_compiled", {})
    if best and "median_s" in ours:
        ok = ours["median_s"] <= 1.1 * best
        lines.append(f"target compiled <= 1.1x best torch row: {'met' if ok else 'MISSED'} "
                     f"({ours['median_s'] / best:.2f}x)")
    ddp = results.get("ddp", {})
    for row in ("ours_eager", "ours_compiled"):
        r = results.get(row, {})
        sharded = any("S" in s for s in r.get("plan", {}).values())
        if "peak_bytes" in r and "peak_bytes" in ddp and sharded:
            ok = r["peak_bytes"] < ddp["peak_bytes"]
            lines.append(f"target {row} peak < DDP's (plan shards parameters): {'met' if ok else 'MISSED'} "
                         f"({r['peak_bytes'] / ddp['peak_bytes']:.2f}x)")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,llama,moe")
    p.add_argument("--meshes", default="4,2x2")
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--calibration", default=None,
                   help="a cost-model profile to plan with (default: measure this machine first; 'none': the table)")
    p.add_argument("--json", default=None, help="write all results here")
    a = p.parse_args(argv)
    if a.steps < 20:
        print("note: fewer than 20 timed steps", file=sys.stderr)
    everything = {}
    if a.calibration is None:
        a.calibration = calibrate(os.path.join(os.environ.get("TMPDIR", "/tmp"), "tlm_step_time_profile.json"))
        print(f"calibrated: {a.calibration}", file=sys.stderr)
    elif a.calibration == "none":
        a.calibration = None
    for name in a.models.split(","):
        for m in a.meshes.split(","):
            mesh_shape = tuple(int(s) for s in m.split("x"))
            results = {}
            for row in a.rows.split(","):
                t0 = time.time()
                try:
                    results[row] = run_row(row, name, mesh_shape, a.steps, a.warmup, a.calibration)
                except NotImplementedError as e:
                    results[row] = {"error": f"n/a: {e}"}
                except Exception as e:  # a row that cannot run says why; the others still run
                    lines = [ln for ln in str(e).splitlines() if ln.strip()]
                    results[row] = {"error": f"{type(e).__name__}: {lines[-1][:200] if lines else e}"}
                    print(str(e), file=sys.stderr)
                print(f"[{name} {m} {row}: {time.time() - t0:.0f} s]", file=sys.stderr, flush=True)
            print(table(name, mesh_shape, results), flush=True)
            everything[f"{name}/{m}"] = results
    if a.json:
        with open(a.json, "w") as f:
            json.dump(everything, f, indent=1, default=str)


if __name__ == "__main__":
    main()
