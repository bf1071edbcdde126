"""Training over a stream of batches whose sequence length changes every step (issue 31),
against a stream of the same tokens at one fixed length, on 4 gloo ranks (mesh 2x2).

    PYTHONPATH=$PWD python benchmarks/varlen.py [--steps 300] [--lengths 64:192:8] [--cache 16]
        [--calls-per-length-check 0]

Both streams train the same model (AdamW) through one `parallelize` module each; the
variable stream draws each step's length from --lengths (start:stop:step, as a data loader
that pads to multiples of 8 would), the fixed stream uses the mean length, so both see about
as many tokens. Printed per stream: the median and mean step (the mean includes every
plan and trace made in the loop), the plans solved and carried to new sizes, cache hits,
misses and evictions, and rank 0's resident memory after warm-up and at each quarter of the
run (flat means no growth with the number of distinct sizes seen). With --cache below the
number of lengths, programs are evicted and traced again all run long.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torch_localmap.launch import make_mesh, run_distributed  # noqa: E402

D, HIDDEN, BATCH = 64, 256, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.up = nn.Linear(D, HIDDEN)
        self.down = nn.Linear(HIDDEN, D)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
        self.head = nn.Linear(D, 1)

    def forward(self, x, y):
        return torch.nn.functional.mse_loss(self.head(self.blocks(x)).squeeze(-1), y)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _batch(step, length):
    g = torch.Generator().manual_seed(step)
    return torch.randn(BATCH, length, D, generator=g), torch.randn(BATCH, length, generator=g)


def _stream(rank, world, lengths, cache):
    import torch_localmap

    torch.manual_seed(0)
    torch.set_num_threads(1)
    mesh = make_mesh((2, 2))
    pm = torch_localmap.parallelize(Model(), mesh, _batch(0, lengths[0]), device="cpu", time_limit=2.0,
                                    plan_cache_size=cache)
    opt = torch.optim.AdamW(pm.parameters(), lr=1e-3)
    times, rss = [], []
    for step, length in enumerate(lengths):
        t0 = time.perf_counter()
        opt.zero_grad()
        pm(*_batch(step, length)).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        rss.append(_rss_mib())
    return times, rss, dict(pm.plan_cache_stats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lengths", default="64:192:8", help="start:stop:step of the variable stream's lengths")
    ap.add_argument("--cache", type=int, default=16, help="parallelize(plan_cache_size=)")
    args = ap.parse_args()
    start, stop, every = map(int, args.lengths.split(":"))
    choices = list(range(start, stop, every))
    rng = random.Random(0)
    variable = [rng.choice(choices) for _ in range(args.steps)]
    fixed = [round(sum(variable) / len(variable))] * args.steps
    print(f"{args.steps} steps, {len(set(variable))} distinct lengths in {args.lengths}, fixed length {fixed[0]}, "
          f"plan_cache_size {args.cache}; 4 gloo ranks, mesh 2x2")
    print("| stream | tokens | median step | mean step (incl. planning) | solved | carried | hits | misses | "
          "evictions | RSS rank 0 after 10 steps, then at 25/50/75/100% |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, lengths in (("variable", variable), ("fixed", fixed)):
        times, rss, stats = run_distributed(_stream, 4, lengths, args.cache, timeout=3600)[0]
        warm = min(10, len(rss) - 1)
        print(f"| {name} | {BATCH * sum(lengths)} | {1e3 * statistics.median(times):.1f} ms | "
              f"{1e3 * statistics.mean(times):.1f} ms | {stats['solved']} | {stats['carried']} | {stats['hits']} | "
              f"{stats['misses']} | {stats['evictions']} | "
              f"{' / '.join(f'{rss[i]:.0f}' for i in (warm, *(len(rss) * q // 4 - 1 for q in (1, 2, 3, 4))))} MiB |",
              flush=True)


if __name__ == "__main__":
    main()
