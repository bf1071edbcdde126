"""What one more sync point a step costs on these ranks: the price of an exact global loss.

Our rank programs return the single-device model's loss: the sum of the per-token losses
over the global batch divided by the global token count, so the forward ends in an
all-reduce (of the loss's sum and count). DDP and FSDP2 return each rank's own mean and
reduce nothing until backward. This benchmark isolates that difference from everything
else: every rank runs a fixed "forward" of products, optionally one collective of three
numbers, a "backward" of products and a gradient all-reduce, and the rows differ only in
the collective after forward:

    none     nothing (DDP's and FSDP2's step)
    sync     an all-reduce of 3 floats, waited at once (our step before 4d7b72d)
    early    the same, issued asynchronously and waited after the gradient's all-reduce
    count    our step on gloo meshes now: an all-reduce of 1 float (the token count) issued
             as forward starts and waited as it ends (backward's first op reads it), then
             `early`'s all-reduce of the loss's 2 floats
    barrier  a barrier instead (no data at all)

    PYTHONPATH=$PWD python benchmarks/forward_sync.py [--world 4] [--repeats 2] [--steps 50]

The `count` row is what our runtime does on gloo meshes (_runtime/deferred_loss.py): the
loss's reduction is waited for when the loss is read, and backward does not read it; the
token count backward scales by is reduced from the targets as the step starts.

It prints each row's median step per rank and, last, `verdict forward_sync <row>_vs_none <x>`
(the median over ranks and repeats). On the 2-core VM with 4 gloo ranks the sync costs what
a barrier does: on ranks that share cores the wait is for the slowest rank's compute and a
scheduler wake-up, not for the bytes (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_localmap.launch import run_distributed  # noqa: E402

ROWS = ("none", "sync", "early", "count", "barrier")
# A step's shape: ~1.5 ms of products before the loss, twice that after, an 800k-element
# gradient all-reduce (about a small model's) at the end.
_FORWARD_PRODUCTS, _BACKWARD_PRODUCTS, _GRADIENT_ELEMENTS = 12, 24, 800_000


def _rank(rank, world, row, steps, warmup):
    torch.set_num_threads(1)  # ranks share the machine's cores, as step_time's do
    a, b = torch.randn(128, 256), torch.randn(256, 256)
    grads, loss_terms, count = torch.randn(_GRADIENT_ELEMENTS), torch.zeros(3), torch.zeros(1)

    def step():
        counted = dist.all_reduce(count, async_op=True) if row == "count" else None
        for _ in range(_FORWARD_PRODUCTS):
            torch.mm(a, b)
        work = None
        if counted is not None:
            counted.wait()
            work = dist.all_reduce(loss_terms[:2], async_op=True)
        if row == "sync":
            dist.all_reduce(loss_terms)
        elif row == "early":
            work = dist.all_reduce(loss_terms, async_op=True)
        elif row == "barrier":
            dist.barrier()
        for _ in range(_BACKWARD_PRODUCTS):
            torch.mm(a, b)
        dist.all_reduce(grads)
        if work is not None:
            work.wait()

    for _ in range(warmup):
        step()
    dist.barrier()
    times = []
    for _ in range(steps):  # run free, as training does: no barrier between steps
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    dist.barrier()
    return statistics.median(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2, help="runs of each row, interleaved with the other rows")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args(argv)
    if a.world < 2 or a.repeats < 1 or a.steps < 1 or a.warmup < 0:
        raise SystemExit("--world must be at least 2, --repeats and --steps at least 1, --warmup at least 0")
    medians = {row: [] for row in ROWS}
    for rep in range(a.repeats):
        for row in ROWS:
            per_rank = run_distributed(_rank, a.world, row, a.steps, a.warmup, timeout=600, pg_timeout=120,
                                       backend="gloo")
            medians[row] += per_rank
            print(f"{row:8s} run {rep + 1}: " + " ".join(f"{s * 1e3:6.2f}" for s in per_rank) + " ms per step",
                  flush=True)
    none = statistics.median(medians["none"])
    for row in ROWS[1:]:
        print(f"verdict forward_sync {row}_vs_none {statistics.median(medians[row]) / none:.2f}")


if __name__ == "__main__":
    main()
