"""Training step time and peak memory of our planned programs against what a user would
otherwise run: one process, DDP, FSDP2 (fully_shard), a hand TP(+FSDP2) DTensor plan; and
our runtime on each of torch's own plans (parallelize(like="ddp"|"fsdp2"), the hand TP
placements as fixed_params, with like="tp" on a 1-D mesh), which separates the runtime's
speed from the planner's choice; `ours_measured` keeps the fastest measured of the planner's,
DDP's and FSDP2's plans and, on a 1-D mesh, the planner's on each 2-D layout of the same ranks
(parallelize(measure_candidates=4)); `ours_compiled` does the same with every candidate
compiled by Inductor (parallelize(compile=True, measure_candidates=4)): what a user who
compiles runs. The torch rows run eagerly, as DDP and FSDP2 users mostly do.

    PYTHONPATH=$PWD python benchmarks/step_time.py [--device cpu|cuda] [--models mlp,mlp_padded,mlp_wide,llama,moe] [--meshes 4,2x2]
        [--rows ...] [--steps 20] [--warmup 3] [--repeats 3] [--calibration profile.json]
        [--optimizer fused|foreach|for-loop] [--json results.json]

Every row trains the same model (same seed, same batch every step, AdamW: by default its
fused implementation, the fastest torch has on CPU and CUDA, --optimizer) for the same
number of steps on 4 gloo ranks (the single-process row: one process, the whole batch);
the data-parallel rows, ours on torch's data-parallel plans included, give each rank its
local batch as a data loader would. Each row runs --repeats times, interleaved with the
other rows of every mesh (one run of DDP varies by 10% between identical runs, and the
host's speed drifts over a run); a row's step is the
median over its runs of the median step over --steps steps after warm-up. Reported: the
step, tokens/s and (on CUDA) MFU, its ratio to the best torch row (the best distributed torch configuration of the
model over every mesh benchmarked), the measured peak memory per rank (the most any rank
used; allocations since before the model was built, _runtime/memory.py; the measured rows' over
the runs that apply its kept plan, not the first, which also measured the candidates), our plan's
estimate of step and peak, the loss after the steps (every row must end at the same loss,
or the benchmark fails), the collectives one step issues (torch's rows: read by the
profiler; ours: the rank program), and where one step's time goes (profiler: compute,
collectives and their waits, copies, the rest: Python and dispatch), and on CPU the CPU a
step takes (the main thread's and the whole process's) against the least a step can take
on the host's cores (all ranks' CPU over the cores, or a main thread's if more).

The last lines are the verdicts the issue's checks read:
    verdict <model> <mesh> planned_vs_best_torch <x>
    verdict <model> <mesh> runtime_on_<ddp|fsdp2|tp_fsdp2>_plan_vs_<same> <x>
    verdict <model> <mesh> estimate_vs_measured <x>
    verdict <model> <mesh> estimate_<compute|communication>_vs_measured <x>   (the profiled step's shares)
    verdict <model> <mesh> planned_peak_vs_ddp <x>   (only where the planner's pick shards a parameter)

Plans are priced with the mesh's live calibration (parallelize(calibration="live")): the first
planned row of each mesh measures it, the rows after read the cached profile.

The MoE routes each sequence as its own group (MoEConfig.route_group_size = seq_len, GShard's
groups), so a data-parallel rank routes its own sequences as the whole batch would, and
runs with capacity_factor = n_experts / top_k (no token is dropped) and no auxiliary loss.
A torch row that fails fails the benchmark (it would otherwise drop out of the baseline).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import tempfile
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

WORLD = 4  # gloo ranks on CPU; on CUDA one NCCL rank per visible GPU (world_size())
ROWS = ["single", "ddp", "fsdp2", "tp_fsdp2", "ours", "ours_compiled", "ours_measured", "ours_on_ddp", "ours_on_fsdp2",
        "ours_on_tp_fsdp2"]
TORCH_ROWS = ("single", "ddp", "fsdp2", "tp_fsdp2")
MEASURED_ROWS = ("ours_measured", "ours_compiled")  # parallelize(measure_candidates=4), eager and compiled
PARITY_ROWS = {"ours_on_ddp": "ddp", "ours_on_fsdp2": "fsdp2", "ours_on_tp_fsdp2": "tp_fsdp2"}
LOSS_RTOL = 1e-4  # float32, 25 AdamW steps, different reduction orders


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
    if name in ("mlp", "mlp_padded"):
        # mlp_padded: a model width four ranks do not divide (510 = 4 x 128 - 2), so shards
        # of activations and of FSDP2's weights are uneven and their collectives pad. The
        # hidden width (2044) and the batch divide by 4: torch's TP styles fail on an uneven
        # hidden width over 4 ranks (2046: "Sharding propagation failed for aten.addmm"),
        # and data-parallel rows need equal local batches to see the global loss.
        dim, hidden = (512, 2048) if name == "mlp" else (510, 2044)
        torch.manual_seed(0)
        model = MLP(dim, hidden)
        g = torch.Generator().manual_seed(1)
        return model, (torch.randn(64, dim, generator=g), torch.randn(64, dim, generator=g))
    if name == "mlp_wide":
        # A model where tensor parallelism wins on this machine: wide weights and a small batch.
        # Data-parallel rows move (DDP: all-reduce; FSDP2: gather and reduce-scatter) and, for
        # DDP, step with AdamW the whole 33.6 M parameters on every rank, and every rank's
        # products read all of the weights for a few rows each; TP splits the weights and
        # moves only the 16 rows' activations.
        torch.manual_seed(0)
        model = MLP(1024, 4096)
        g = torch.Generator().manual_seed(1)
        return model, (torch.randn(16, 1024, generator=g), torch.randn(16, 1024, generator=g))
    if name == "llama":
        cfg = models.llama.LlamaConfig(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=688, vocab_size=1024,
                                       seq_len=64)
        return models.build("llama", cfg, batch=8, seed=0)
    if name == "moe":
        # Routed per sequence (GShard's groups): each sequence's tokens have their own capacity,
        # so a rank routes its own sequences, as torch's data-parallel rows do.
        cfg = replace(models.moe.MoEConfig.tiny(), dim=128, n_layers=2, n_heads=4, n_experts=4, top_k=2,
                      expert_ffn_dim=256, vocab_size=512, seq_len=32, capacity_factor=2.0, aux_loss_weight=0.0,
                      route_group_size=32)
        return models.build("moe", cfg, batch=8, seed=0)
    raise ValueError(f"unknown model {name!r}; expected mlp, mlp_padded, mlp_wide, llama or moe")


def _blocks(model):
    """The repeated blocks FSDP2 wraps one by one."""
    return list(model.blocks if hasattr(model, "blocks") else model.layers)


def _tp_plan(name: str, model, tp: int, local_heads: bool = True):
    """torch's own tensor-parallel styles for each block (Megatron-style column/row pairs),
    as torchtitan applies them: attention computes on local heads (the module reshapes with
    its own head counts, so they are divided by the TP degree when `local_heads`)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plans = []
    for blk in _blocks(model):
        if name in ("mlp", "mlp_padded", "mlp_wide"):
            plans.append((blk, {"0": ColwiseParallel(), "2": RowwiseParallel()}))
        elif name == "llama":
            if local_heads:
                blk.attention.n_heads //= tp
                blk.attention.n_kv //= tp
            plans.append((blk, {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                                "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
                                "feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),
                                "feed_forward.w2": RowwiseParallel()}))
    return plans


def _tp_fsdp2_placements(name, model, mesh_shape) -> dict:
    """The hand TP(+FSDP2) plan's parameter placements as our specs: a column-parallel
    weight and bias Shard(0), a row-parallel weight Shard(1) on the TP mesh dim; on a 2-D
    mesh FSDP2 also shards every parameter's first dim over the data-parallel dim."""
    from torch.distributed.tensor.parallel import ColwiseParallel

    fqn = {m: n for n, m in model.named_modules()}
    tp = {}
    for blk, plan in _tp_plan(name, model, mesh_shape[-1], local_heads=False):
        for sub, style in plan.items():
            mod = blk.get_submodule(sub)
            col = isinstance(style, ColwiseParallel)
            tp[fqn[mod] + ".weight"] = "S(0)" if col else "S(1)"
            if getattr(mod, "bias", None) is not None:
                tp[fqn[mod] + ".bias"] = "S(0)" if col else "R"
    return {k: ("" if len(mesh_shape) == 1 else ("S(0)" if p.dim() else "R")) + tp.get(k, "R")
            for k, p in model.named_parameters()}


HAND_TP = {"mlp", "mlp_padded", "mlp_wide", "llama"}
NO_HAND_TP = ("no torch TP style fits the MoE: ColwiseParallel on its fused qkv would split across q/k/v, "
              "and its experts are raw einsum parameters")


def world_size(device: str) -> int:
    return torch.cuda.device_count() if device == "cuda" else WORLD


def _local_batch(batch, rank, dp):
    return tuple(t.chunk(dp)[rank] for t in batch)


def _cost_table(device: str) -> str:
    """The cost model's device table the planned rows price with (and calibrate for)."""
    return "cpu" if device == "cpu" else "H100"


def _setup(row, name, model, batch, mesh_shape, calibration, plan_dir, device, optimizer):
    """(module to train, the step's (args), how to read the global loss, plan or None)."""
    if row == "single":
        return model, batch, lambda loss: loss.item(), None
    rank, world = dist.get_rank(), dist.get_world_size()
    if row == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model), _local_batch(batch, rank, world), _mean_over_ranks, None
    if row == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        mesh = make_mesh((world,))
        for blk in _blocks(model):
            fully_shard(blk, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model, _local_batch(batch, rank, world), _mean_over_ranks, None
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
        return model, _local_batch(batch, dp_rank, dp), read, None
    from torch.distributed.tensor import Replicate, Shard
    from torch_localmap import Plan, parallelize

    mesh = make_mesh(mesh_shape)
    kwargs, args = {}, batch
    if row in ("ours_on_ddp", "ours_on_fsdp2"):  # each rank its local batch, as DDP's loader gives it
        kwargs = {"like": PARITY_ROWS[row], "input_placements": {i: [Shard(0)] * len(mesh_shape)
                                                                 for i in range(len(batch))}}
        args = _local_batch(batch, rank, world)
    elif row == "ours_on_tp_fsdp2":
        kwargs = {"fixed_params": _tp_fsdp2_placements(name, model, mesh_shape)}
        if len(mesh_shape) == 1:  # TP over all ranks: each parameter read where it is kept, as torch's styles
            kwargs["like"] = "tp"
        if len(mesh_shape) == 2:  # the batch split over the data-parallel mesh dim
            kwargs["input_placements"] = {i: [Shard(0), Replicate()] for i in range(len(batch))}
            args = _local_batch(batch, dist.get_rank() // mesh_shape[1], mesh_shape[0])
    # Plan once per row, model and mesh; later repeats apply the saved plan (no solve).
    path = os.path.join(plan_dir, f"{row}-{name}-{'x'.join(map(str, mesh_shape))}.json")
    saved = Plan.load(path) if os.path.exists(path) else None
    # The fastest measured of the planner's, DDP's, FSDP2's (1-D: and 2x2's) plans, eager or
    # compiled. On one rank (one GPU) nothing is sharded and the candidates differ only in how
    # parameters are held: the planner's plan, so that the GPU check's rows fit one device call.
    measured = row in MEASURED_ROWS and world > 1
    if measured:
        if saved is None:
            kwargs = {"measure_candidates": 4}
        else:  # the kept plan again: a torch-like one with its `like`; one kept on a 2-D layout of
            # the ranks applies to that layout of this mesh again (parallelize(plan=))
            with open(path + ".kept") as f:
                kwargs = {"like": json.load(f)["like"]}
    pm = parallelize(model, mesh, args, device=_cost_table(device), time_limit=5.0, calibration=calibration,
                     compile=row == "ours_compiled", plan=saved, optimizer_impl=optimizer, **kwargs)
    if saved is None and rank == 0:
        pm.plan.save(path)
        if measured:
            with open(path + ".kept", "w") as f:
                json.dump({"like": pm.plan.measurements["kept_like"]}, f)
    dist.barrier()
    return pm, args, lambda loss: loss.item(), pm.plan  # the global value, every rank alike


def _mean_over_ranks(loss) -> float:
    t = loss.detach().clone()
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def _loss_of(module, args):
    """The loss a row's training loop holds. Our programs' loss is a DTensor holding the global
    value (replicated); it is kept as is -- backward starts from it and `.item()` reads it --
    so a loss not read before backward is not waited for (_runtime/deferred_loss.py), as a
    user's loop would use it. A torch row's DTensor loss (TP) is made a plain tensor."""
    out = module(*args)
    if hasattr(module, "_program"):
        return out
    return out.full_tensor() if hasattr(out, "full_tensor") else out


_COLLECTIVE = re.compile(r"all_?reduce|all_?gather|reduce_scatter|all_?to_?all", re.I)
_COPY = {"aten::copy_", "aten::cat", "aten::clone", "aten::_to_copy", "aten::contiguous", "aten::constant_pad_nd",
         "aten::to", "aten::split_with_sizes", "aten::view_as_real"}


def _kind(name: str) -> str:
    n = name.lower().replace("_", "")
    for kind in ("allreduce", "allgather", "reducescatter", "alltoall"):
        if kind in n:
            return {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                    "alltoall": "all_to_all"}[kind]
    return name


def _numel(shapes) -> int:
    """The largest tensor among an op's recorded input shapes (nested for tensor lists)."""
    if isinstance(shapes, (list, tuple)) and shapes and all(isinstance(d, int) for d in shapes):
        return math.prod(shapes)
    return max((_numel(x) for x in shapes if isinstance(x, (list, tuple))), default=0)


def _profile_step(step):
    """One step under torch's profiler: the collectives it issued ({kind: [count, elements]},
    each counted once at its outermost op) and where its time went (seconds per category:
    compute, collectives and their waits, copies, and the rest -- Python, dispatch, waiting
    outside any op -- as the step's wall time minus the ops' own time)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        step()
        wall = time.perf_counter() - t0
    collectives, seconds = {}, {"compute": 0.0, "collectives+waits": 0.0, "copies": 0.0}
    for e in prof.events():
        if not (e.name.startswith(("aten::", "c10d::", "_c10d_functional::", "gloo:")) or _COLLECTIVE.search(e.name)):
            continue
        comm = bool(_COLLECTIVE.search(e.name)) or "wait" in e.name or "barrier" in e.name
        cat = "collectives+waits" if comm else "copies" if e.name in _COPY else "compute"
        seconds[cat] += e.self_cpu_time_total * 1e-6
        if e.name.startswith("c10d::") and _COLLECTIVE.search(e.name):  # torch's process-group calls
            parent, nested = e.cpu_parent, False
            while parent is not None and not nested:
                nested, parent = bool(_COLLECTIVE.search(parent.name)), parent.cpu_parent
            if not nested:
                c = collectives.setdefault(_kind(e.name), [0, 0])
                c[0] += 1
                c[1] += _numel(e.input_shapes)
    seconds["python+dispatch+other"] = max(wall - sum(seconds.values()), 0.0)
    return collectives, seconds


def _program_collectives(program) -> dict:
    """{kind: [count, elements]} of one step of a rank program (forward and backward graphs);
    elements: the whole buffer (an all-gather's output, a reduce-scatter's input)."""
    out = {}
    for fn in (program.fw, program.bw):
        gm = getattr(fn, "graph_module", fn)
        for n in gm.graph.nodes if gm is not None else ():
            if n.op != "call_function" or getattr(n.target, "namespace", "") != "_c10d_functional":
                continue
            if n.target._opname == "wait_tensor":
                continue
            vals = [n.meta["val"], n.args[0].meta["val"]]
            c = out.setdefault(_kind(n.target._opname), [0, 0])
            c[0] += 1
            c[1] += max(v.numel() for v in vals)
    return out


def _param_groups(module) -> list:
    """The parameters in two groups, DTensors and plain tensors: a TP-only model keeps its
    untouched parameters (norms, embeddings) plain, and the CUDA AdamW's foreach kernels
    refuse a list mixing the two within one group."""
    from torch.distributed.tensor import DTensor

    params = list(module.parameters())
    groups = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    return [{"params": g} for g in groups if g]


def _adamw(groups, impl: str):
    """torch.optim.AdamW running implementation `impl` (the same for every row)."""
    from torch_localmap._live_calibration import adamw_flags

    return torch.optim.AdamW(groups, lr=1e-3, **adamw_flags(impl))


def _rank(rank, world, row, name, mesh_shape, steps, warmup, calibration, plan_dir, device="cpu", optimizer="fused"):
    if device == "cpu":
        torch.set_num_threads(1)  # 4 ranks share the machine's cores
    else:  # float32 as on CPU: the rows' losses are compared
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if row.startswith("ours") and calibration == "live":
        # The mesh's calibration (its collectives at up to 16 MiB) runs once per machine and mesh and
        # is cached: measured here, outside the window, it is not taken for the training step's peak.
        from torch_localmap._live_calibration import live_profile

        live_profile(make_mesh(mesh_shape), _cost_table(device))
    with PeakMemory(device) as mem:
        model, batch = build(name)
        tokens = _tokens(batch)
        if device == "cuda":
            model, batch = model.cuda(), tuple(t.cuda() for t in batch)
        module, args, read, plan = _setup(row, name, model, batch, mesh_shape, calibration, plan_dir, device,
                                          optimizer)
        opt = _adamw(_param_groups(module), optimizer)

        def step():
            loss = _loss_of(module, args)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync()
            return loss

        for _ in range(2):  # first steps: compilation, optimizer state; the peak is in here
            step()
    for _ in range(warmup):
        step()
    times = []
    thread0, process0 = time.thread_time(), time.process_time()
    for _ in range(steps):
        if world > 1:
            dist.barrier()
        sync()
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    # CPU seconds a step (the barriers included, a few microseconds): the main thread's, and
    # the whole process's (the process group's threads too: gloo runs each collective there).
    cpu = {"thread_s": (time.thread_time() - thread0) / steps, "process_s": (time.process_time() - process0) / steps}
    out = {"median_s": statistics.median(times), "peak_bytes": mem.peak_bytes, "loss": read(loss), "cpu": cpu,
           "steps": 2 + warmup + steps, "n_params": sum(p.numel() for p in model.parameters()), "tokens": tokens,
           "world": world}
    if world > 1:
        dist.barrier()
    out["collectives"], out["breakdown"] = _profile_step(step)  # after the loss was read: not in it
    if plan is not None:  # ours: exactly what the rank program issues per step
        out["collectives"] = _program_collectives(module._program)
        out["estimate_s"] = plan.summary.estimated_step_s
        out["estimate_split_s"] = {"compute": plan.summary.compute_s, "communication": plan.summary.comm_s}
        out["estimate_peak_bytes"] = plan.summary.memory.peak
        out["plan"] = dict(plan.param_placements())
        m = getattr(plan, "measurements", None)
        if m:  # a measured row's first run: which candidate it kept, and each one's step
            out["measured"] = {"kept": m["kept"], "candidates": {
                c["candidate"]: c.get("measured_step_s", c.get("skipped")) for c in m["candidates"]}}
    return out


def run_row(row, name, mesh_shape, steps, warmup, calibration, plan_dir, device="cpu", optimizer="fused"):
    if row == "tp_fsdp2" and name not in HAND_TP or row == "ours_on_tp_fsdp2" and name not in HAND_TP:
        raise NotImplementedError(NO_HAND_TP)
    # Every run in fresh processes: nothing a previous row allocated is in its memory figures.
    world = 1 if row == "single" else world_size(device)
    results = run_distributed(_rank, world, row, name, mesh_shape, steps, warmup, calibration, plan_dir, device,
                              optimizer, timeout=1800, pg_timeout=600, backend="nccl" if device == "cuda" else "gloo")
    r0 = dict(results[0])
    r0["median_s"] = max(r["median_s"] for r in results)  # a step ends when the slowest rank ends
    # The ranks share this host's cores: a step takes at least all ranks' CPU over the cores,
    # and at least a main thread's CPU (its ops run one after another). On CUDA too: the host's
    # CPU a step is what a GPU step waits on when its kernels are short.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    r0["cpu"] = {"thread_s": statistics.mean(r["cpu"]["thread_s"] for r in results),
                 "process_s": statistics.mean(r["cpu"]["process_s"] for r in results),
                 "bound_s": max(sum(r["cpu"]["process_s"] for r in results) / cores,
                                max(r["cpu"]["thread_s"] for r in results)), "cores": cores}
    r0["peak_bytes"] = max(r["peak_bytes"] for r in results)
    return r0


def run_cases(name, meshes, rows, a, plan_dir) -> dict:
    """{mesh key: {row: result}}: every row on every mesh --repeats times, interleaved -- each
    round runs every mesh's rows -- so that rows compared across meshes (the best torch row
    is the best over every mesh) ran in the same stretch of the host's time; per row the
    median over runs of its median step. (Mesh after mesh, llama's (4,) rows once ran while
    this VM was a third slower than for its 2x2 rows half an hour later: DDP, the same
    program on both, read 178.2 against 113.3 ms.)"""
    shapes = {m: tuple(int(s) for s in m.split("x")) for m in meshes}
    first = meshes[0]
    runs = {m: {row: [] for row in rows} for m in meshes}
    errors = {m: {} for m in meshes}
    for rep in range(a.repeats):
        for m in meshes:
            mesh_shape = shapes[m]
            for row in rows:
                if row in errors[m]:
                    continue
                if row == "single" and m != first:
                    continue  # one process: the same on every mesh; measured with the first
                t0 = time.time()
                try:
                    runs[m][row].append(run_row(row, name, mesh_shape, a.steps, a.warmup, a.calibration, plan_dir,
                                                a.device, a.optimizer))
                except NotImplementedError as e:
                    errors[m][row] = {"error": f"n/a: {e}"}
                except Exception as e:  # ours: the row says why; torch's rows: the benchmark fails (main)
                    lines = [ln for ln in str(e).splitlines() if ln.strip()]
                    errors[m][row] = {"error": f"{type(e).__name__}: {lines[-1][:200] if lines else e}"}
                    print(str(e), file=sys.stderr)
                print(f"[{name} {m} {row} run {rep + 1}: {time.time() - t0:.0f} s]", file=sys.stderr, flush=True)
    return {m: _summarize(runs[m], errors[m]) for m in meshes}


def _summarize(runs: dict, errors: dict) -> dict:
    """{row: result} from each row's runs: the median over runs of its median step."""
    results = dict(errors)
    for row, rs in runs.items():
        if rs and row not in errors:
            r = dict(rs[0])
            r["runs_s"] = [x["median_s"] for x in rs]
            r["median_s"] = statistics.median(r["runs_s"])
            # A measured row's first run also ran every candidate (copies of the model); the
            # later runs apply the kept plan, as training after planning does.
            kept = rs[1:] if "measured" in rs[0] and len(rs) > 1 else rs
            r["peak_bytes"] = max(x["peak_bytes"] for x in kept)
            if all("bound_s" in x.get("cpu", {}) for x in rs):  # CPU rows (run_row)
                r["cpu"] = {k: statistics.median(x["cpu"][k] for x in rs) for k in rs[0]["cpu"]}
            results[row] = r
    return results


def _tokens(batch) -> int:
    """Tokens one step trains on (the whole batch, every rank together): a token-id input's
    batch x sequence, else its samples."""
    x = batch[0]
    return int(x.shape[0] * x.shape[1]) if not x.is_floating_point() and x.dim() >= 2 else int(x.shape[0])


# float32 peak of the cost model's GPU table (the benchmark runs float32, TF32 off): the MFU
# denominator on CUDA.
_GPU_PEAK_FP32 = 67e12


def _throughput(r, device) -> str:
    """tokens/s and (CUDA) MFU: 6 x parameters x tokens per step (forward + backward), over
    the step time and every rank's peak."""
    rate = r["tokens"] / r["median_s"]
    if device != "cuda":
        return f"{rate:,.0f} | -"
    mfu = 6 * r["n_params"] * r["tokens"] / (r["median_s"] * _GPU_PEAK_FP32 * r["world"])
    return f"{rate:,.0f} | {100 * mfu:.1f}%"


def _mib(b):
    return f"{b / 2**20:.1f} MiB"


def _collectives_text(c) -> str:
    return ", ".join(f"{k} {n}x {el / 1e6:.2f}M el" for k, (n, el) in sorted(c.items())) or "none"


def table(model, mesh_shape, results, best, ranks="4 gloo ranks", device="cpu") -> str:
    lines = [f"\n### {model}, mesh {'x'.join(map(str, mesh_shape))} ({ranks}; single: 1 process)", "",
             "| row | step (median of runs) | runs | vs best torch | tokens/s | MFU | peak/rank measured "
             "| peak/rank estimate | est. step | loss |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in ROWS:
        r = results.get(row)
        if r is None:
            continue
        if "error" in r:
            what = r["error"] if r["error"].startswith("n/a") else f"failed: {r['error']}"
            lines.append(f"| {row} | {what} | | | | | | | | |")
            continue
        ratio = f"{r['median_s'] / best:.2f}x" if best else "-"
        est = _mib(r["estimate_peak_bytes"]) if "estimate_peak_bytes" in r else "-"
        est_t = f"{r['estimate_s'] * 1e3:.2f} ms" if "estimate_s" in r else "-"
        if "estimate_split_s" in r:
            split = r["estimate_split_s"]
            est_t += f" ({split['compute'] * 1e3:.1f} compute + {split['communication'] * 1e3:.1f} comm.)"
        runs = " / ".join(f"{x * 1e3:.0f}" for x in r["runs_s"])
        lines.append(f"| {row} | {r['median_s'] * 1e3:.1f} ms | {runs} | {ratio} | {_throughput(r, device)} | "
                     f"{_mib(r['peak_bytes'])} | {est} "
                     f"| {est_t} | {r['loss']:.5f} |")
    for row in MEASURED_ROWS:
        m = results.get(row, {}).get("measured")
        if m:
            each = "; ".join(f"{c} {v * 1e3:.1f} ms" if isinstance(v, float) else f"{c}: {v}"
                             for c, v in m["candidates"].items())
            lines.append(f"\n{row} kept {m['kept']} (its first run's measurements, slowest rank: {each})")
    lines += ["", "One step under the profiler (rank 0): the collectives it issued (ours: the rank program's; "
              "torch's: its c10d calls, sizes where the profiler records them), and where its time went "
              "(the ops' own CPU time; the rest is Python, dispatch and waiting outside ops):", "",
              "| row | collectives | compute | collectives+waits | copies | python+dispatch+other |",
              "|---|---|---|---|---|---|"]
    for row in ROWS:
        r = results.get(row, {})
        if "breakdown" in r:
            b = r["breakdown"]
            lines.append(f"| {row} | {_collectives_text(r['collectives'])} | "
                         + " | ".join(f"{b[k] * 1e3:.1f} ms" for k in ("compute", "collectives+waits", "copies",
                                                                         "python+dispatch+other")) + " |")
    cpu_rows = [(row, results[row]) for row in ROWS if "cpu" in results.get(row, {})]
    if cpu_rows:
        cores = cpu_rows[0][1]["cpu"]["cores"]
        lines += ["", f"CPU a step (mean over ranks, median over runs): the main thread's and the whole process's "
                  f"(the process group's threads too); the least a step can take on this host's {cores} cores: all "
                  "ranks' CPU over the cores, or a main thread's CPU where that is more:", "",
                  "| row | main thread / rank | process / rank | CPU bound | bound / step |", "|---|---|---|---|---|"]
        for row, r in cpu_rows:
            c = r["cpu"]
            lines.append(f"| {row} | {c['thread_s'] * 1e3:.1f} ms | {c['process_s'] * 1e3:.1f} ms | "
                         f"{c['bound_s'] * 1e3:.1f} ms | {c['bound_s'] / r['median_s']:.2f} |")
    return "\n".join(lines)


def plan_checks(results, world: int, mesh_ndim: int = 1) -> list:
    """Ours on DDP's / FSDP2's plan must issue what those wrappers issue per step: DDP one
    all-reduce of every gradient over all ranks; FSDP2 all-gathers of the parameters and one
    reduce-scatter of every gradient (within 5%: padding); no other collective beyond the
    loss scalar's. Ours on the hand TP plan over a 1-D mesh (like="tp": no parameter moved),
    as torch's column/row-parallel styles run it: all-reduces of activations only (a
    row-parallel product's output in forward, a column-parallel product's input gradient in
    backward), or reduce-scatters each gathered again. (torch's rows' own collectives, read
    by the profiler, are shown for reference: the profiler records no sizes for some of
    them.) Returns the mismatches."""
    bad = []
    if world == 1:  # one rank reduces nothing (torch's wrappers still call their collectives)
        return bad
    tp = results.get("ours_on_tp_fsdp2", {})
    if "collectives" in tp and mesh_ndim == 1:
        c = tp["collectives"]
        scattered, gathered = c.get("reduce_scatter", [0, 0])[1], c.get("all_gather", [0, 0])[1]
        unpaired = abs(scattered - gathered) > 0.05 * max(gathered, 1)
        if set(c) - {"all_reduce", "reduce_scatter", "all_gather"} or unpaired:
            bad.append(f"ours_on_tp_fsdp2 issues {_collectives_text(c)}; torch's TP styles all-reduce activations "
                       "only (a reduce-scatter and all-gather of the same values, around a norm computed on "
                       "sequence shards, count as one)")
    for ours, allowed, reduce_kind in (("ours_on_ddp", {"all_reduce"}, "all_reduce"),
                                       ("ours_on_fsdp2", {"all_gather", "reduce_scatter", "all_reduce"},
                                        "reduce_scatter")):
        r = results.get(ours, {})
        if "collectives" not in r:
            continue
        c, n = r["collectives"], r["n_params"]
        reduced = c.get(reduce_kind, [0, 0])[1] - (c.get("all_reduce", [0, 0])[0] if reduce_kind == "all_reduce" else 0)
        # Besides the gradients only scalars (the loss and its count, one bucket of them or several)
        count, elements = c.get("all_reduce", [0, 0])
        scalars_only = reduce_kind != "all_reduce" and elements <= 8 * count
        if set(c) - allowed or abs(reduced - n) > 0.05 * n or (reduce_kind != "all_reduce" and not scalars_only):
            bad.append(f"{ours} issues {_collectives_text(c)}; torch's plan reduces {n / 1e6:.2f}M gradient "
                       f"elements once ({reduce_kind})")
    return bad


def verdicts(model, mesh_key, results, best) -> list:
    out = []
    planned = [results[r]["median_s"] for r in ("ours", "ours_compiled", "ours_measured")
               if "median_s" in results.get(r, {})]
    if planned and best:
        out.append(f"verdict {model} {mesh_key} planned_vs_best_torch {min(planned) / best:.2f}")
    for ours, theirs in PARITY_ROWS.items():
        a, b = results.get(ours, {}), results.get(theirs, {})
        if "median_s" in a and "median_s" in b:
            out.append(f"verdict {model} {mesh_key} runtime_on_{theirs}_plan_vs_{theirs} "
                       f"{a['median_s'] / b['median_s']:.2f}")
    r, ddp = results.get("ours", {}), results.get("ddp", {})
    if _shards_a_parameter(r.get("plan", {})) and "peak_bytes" in ddp:
        # The memory target: a plan that shards pays for it in communication only if
        # it also holds less than DDP, which replicates everything.
        out.append(f"verdict {model} {mesh_key} planned_peak_vs_ddp {r['peak_bytes'] / ddp['peak_bytes']:.2f}")
    if "estimate_s" in r and "median_s" in r:
        out.append(f"verdict {model} {mesh_key} estimate_vs_measured {r['estimate_s'] / r['median_s']:.2f}")
        for cat, (est, measured) in measured_split(r).items():
            out.append(f"verdict {model} {mesh_key} estimate_{cat}_vs_measured {est / max(measured, 1e-12):.2f}")
    return out


def _shards_a_parameter(placements: dict) -> bool:
    """Whether a plan's {parameter: spec string} shards any parameter over any mesh dim."""
    return any("S(" in spec for spec in placements.values())


def measured_split(r) -> dict:
    """{category: (estimated s, measured s)} of our row: the plan's compute (ops, their
    dispatch, the optimizer) and communication against the profiled step's shares (compute,
    copies and dispatch; collectives and their waits), scaled to the row's median step."""
    b, est = r.get("breakdown"), r.get("estimate_split_s")
    if not b or not est:
        return {}
    total = sum(b.values()) or 1.0
    comm = b["collectives+waits"] / total * r["median_s"]
    return {"compute": (est["compute"], r["median_s"] - comm), "communication": (est["communication"], comm)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="mlp,mlp_padded,mlp_wide,llama,moe")
    p.add_argument("--meshes", default=None, help="default 4,2x2 on CPU; on CUDA the GPU count (and 2xN/2)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cpu: 4 gloo ranks; cuda: one NCCL rank per visible GPU, planned with the H100 table")
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="runs of each row, interleaved with the other rows")
    p.add_argument("--calibration", default="live",
                   help="a cost-model profile to plan with (default 'live': measured on each mesh by the first "
                        "planned row, cached for the others in a fresh directory; 'none': the table)")
    p.add_argument("--optimizer", default="fused", choices=("for-loop", "foreach", "fused"),
                   help="the AdamW implementation every row runs (foreach=False / foreach=True / fused=True; "
                        "default fused: the fastest torch has on CPU and CUDA); the planned rows price it")
    p.add_argument("--json", default=None, help="write all results here")
    p.add_argument("--keep-plans", default=None, metavar="DIR",
                   help="save the plans of the planned rows here (Plan.load reads them back) instead of a temp dir")
    a = p.parse_args(argv)
    if a.steps < 20 or a.repeats < 3:
        print("note: fewer than 20 timed steps or 3 runs per row", file=sys.stderr)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA GPU is visible")
        n = torch.cuda.device_count()
        a.meshes = a.meshes or (f"{n},2x{n // 2}" if n >= 4 and n % 2 == 0 else f"{n}")
    a.meshes = a.meshes or "4,2x2"
    if a.calibration == "live":  # this run measures its meshes afresh: a cache of an earlier run may be stale
        os.environ["TLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="tlm_step_time_calibration_")
    elif a.calibration == "none":
        a.calibration = None
    rows = [r for r in a.rows.split(",") if r]
    unknown = set(rows) - set(ROWS)
    if unknown:
        raise SystemExit(f"unknown rows {sorted(unknown)}; expected some of {ROWS}")
    everything, failures, lines = {}, [], []
    with tempfile.TemporaryDirectory(prefix="tlm_step_time_plans_") as tmp_dir:
        plan_dir = a.keep_plans or tmp_dir
        os.makedirs(plan_dir, exist_ok=True)
        for name in a.models.split(","):
            per_mesh = run_cases(name, a.meshes.split(","), rows, a, plan_dir)
            for m, results in per_mesh.items():
                everything[f"{name}/{m}"] = results
                for row in TORCH_ROWS:
                    err = results.get(row, {}).get("error", "")
                    if err and not err.startswith("n/a"):
                        failures.append(f"{name} {m} {row}: {err}")
            if "single" in rows:  # measured once per model (first mesh); the reference of every mesh
                first = per_mesh[a.meshes.split(",")[0]].get("single")
                for results in per_mesh.values():
                    if first is not None:
                        results.setdefault("single", first)
            # The best torch row: the best distributed torch configuration over every mesh.
            best = min((r[row]["median_s"] for r in per_mesh.values() for row in TORCH_ROWS[1:]
                        if "median_s" in r.get(row, {})), default=None)
            for m, results in per_mesh.items():
                mesh_shape = tuple(int(s) for s in m.split("x"))
                ranks = f"{world_size(a.device)} {'NCCL' if a.device == 'cuda' else 'gloo'} ranks"
                print(table(name, mesh_shape, results, best, ranks, a.device), flush=True)
                losses = {row: r["loss"] for row, r in results.items() if "loss" in r}
                if losses:
                    lo, hi = min(losses.values()), max(losses.values())
                    spread = (hi - lo) / max(abs(lo), 1e-12)
                    print(f"\nlosses agree to {spread:.1e} (relative; bound {LOSS_RTOL:g})")
                    if spread > LOSS_RTOL:
                        failures.append(f"{name} {m}: the rows end at different losses {losses}")
                bads = plan_checks(results, world_size(a.device), len(mesh_shape))
                failures += [f"{name} {m}: not torch's plan: {bad}" for bad in bads]
                print("plan check (ours on DDP's, FSDP2's and, on a 1-D mesh, TP's plans issue their collectives): "
                      + ("ok" if not bads else "MISMATCH: " + "; ".join(bads)))
                lines += verdicts(name, m, results, best)
    print("\n" + "\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(everything, f, indent=1, default=str)
    if failures:
        print("\nFAILED:\n" + "\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
