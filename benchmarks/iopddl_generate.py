"""Instances in IOPDDL format with controllable structure, for tuning and evaluating the
solver on problems it has not seen (issue 17).

    PYTHONPATH=$PWD python benchmarks/iopddl_generate.py --split eval --count 6 --out /tmp/held_out \
        --topology cyclic --nodes 20000 --memory tight

Seeds are split once and for all: tuning uses seeds [0, 10000), evaluation [10000, 20000).
A tuning run never sees an evaluation instance; `--split` picks the range and `generate`
refuses a seed outside the split it is asked for.

Structure knobs, each a property real sharding graphs show in some model:
- topology: "tree" (chains and trees: the reductions fold them away), "cyclic" (every node
  joins three earlier neighbours in a local window: a core with no chain to fold), "mixed"
  (chains hung between the nodes of a cyclic core), "islands" (one edge per ten nodes, to a
  near neighbour: most nodes share no edge and are coupled only through memory);
- density: "sparse" edge matrices (zero where two strategies agree, like resharding
  costs) or "dense" (every entry random);
- memory: "none", "loose" (1.5x a random labelling's peak) or "tight" (1.05x the peak of
  the labelling that uses least memory per node) -- a feasible labelling always exists;
  "bound" (issue 33) changes the nodes too: their strategies are activation-recompute
  choices (see `_recompute_nodes`), the limit is 1.08x the least possible peak and the
  cheapest labelling needs twice the limit: a knapsack over time;
- cost scale: node and edge costs log-uniform over six decades below `cost_scale`, as in the
  contest files.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random

TUNE_SEEDS = range(0, 10_000)
EVAL_SEEDS = range(10_000, 20_000)
SPLITS = {"tune": TUNE_SEEDS, "eval": EVAL_SEEDS}


def _neighbours(rng: random.Random, n: int, topology: str, window: int = 64) -> list:
    edges = []
    if topology == "tree":
        for i in range(1, n):
            edges.append((rng.randrange(max(0, i - window), i), i))
    elif topology == "cyclic":
        for i in range(1, n):
            lo = max(0, i - window)
            for j in sorted(rng.sample(range(lo, i), min(3, i - lo))):
                edges.append((j, i))
    elif topology == "mixed":
        hubs = list(range(0, n, 8))  # a cyclic core on every 8th node, chains of 7 in between
        for k, h in enumerate(hubs[1:], 1):
            for j in sorted(rng.sample(hubs[max(0, k - window // 8):k], min(3, k))):
                edges.append((j, h))
        for h in hubs:
            prev = h
            for i in range(h + 1, min(h + 8, n)):
                edges.append((prev, i))
                prev = i
            if prev != h and prev + 1 < n:
                edges.append((prev, prev + 1) if (prev + 1) % 8 == 0 else (prev, h))
        edges = sorted(set((min(a, b), max(a, b)) for a, b in edges if a != b))
    elif topology == "islands":
        for i in sorted(rng.sample(range(n - 1), (n - 1) // 10)):
            edges.append((i, rng.randint(i + 1, min(n - 1, i + 8))))
    else:
        raise ValueError(f"topology {topology!r}: expected tree, cyclic, mixed or islands")
    return edges


def _cost(rng: random.Random, scale: float) -> int:
    return int(scale * 10 ** rng.uniform(-6, 0))


# Memory-bound instances (issue 33): what a limit over activation-recompute choices looks like.
BOUND_SLACK = 1.08    # limit / least possible peak
BOUND_OVERLOAD = 2.0  # peak of the cheapest labelling / limit
BOUND_LIFE = 200      # mean liveness: an activation lives from its forward op to its backward op


def _recompute_nodes(rng: random.Random, counts: list, cost_scale: float):
    """Costs, usages and intervals of nodes whose strategies keep or recompute activations.

    Strategy 0 keeps all of a node's activation (usage base + act, cost 0); the others
    recompute a growing fraction f of it (usage base + (1 - f) act, cost R f^gamma, the last
    one all of it). R is act times a compute intensity within one decade, as recompute costs
    are (FLOPs per byte of elementwise and matmul ops): cost per byte saved is close between
    nodes, so the choice is a real knapsack, not a few obvious picks. `act` is scaled after
    the fact so that keeping everything peaks at BOUND_OVERLOAD x BOUND_SLACK x the base peak.
    """
    n = len(counts)
    intervals = []
    for i in range(n):
        life = 1 + int(rng.expovariate(1 / BOUND_LIFE))
        intervals.append([i, min(n, i + life)])
    act = [10 ** rng.uniform(4, 7) for _ in range(n)]
    base = [int(a * 10 ** rng.uniform(-1.5, 0)) for a in act]
    intensity = [10 ** rng.uniform(-1, 0) for _ in range(n)]
    gamma = [rng.uniform(0.6, 1.6) for _ in range(n)]
    fractions = [[0.0] + sorted(rng.uniform(0.05, 0.95) for _ in range(k - 2)) + [1.0] for k in counts]

    def peak_at(scale):
        delta = [0] * (n + 1)
        for i, (a, b) in enumerate(intervals):
            delta[a] += base[i] + int(scale * act[i])
            delta[b] -= base[i] + int(scale * act[i])
        live = top = 0
        for d in delta[:-1]:
            live += d
            top = max(top, live)
        return top

    target = BOUND_OVERLOAD * BOUND_SLACK * peak_at(0.0)
    lo, hi = 0.0, 1.0
    while peak_at(hi) < target:
        hi *= 2
    for _ in range(40):  # peak_at is monotone in the scale: bisect to the target
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if peak_at(mid) < target else (lo, mid)
    act = [hi * a for a in act]
    usages = [[base[i] + int((1 - f) * act[i]) for f in fractions[i]] for i in range(n)]
    full = [cost_scale * act[i] / 1e7 * intensity[i] for i in range(n)]
    costs = [[int(full[i] * f ** gamma[i]) for f in fractions[i]] for i in range(n)]
    return costs, usages, intervals


def generate(seed: int, split: str, nodes: int = 2000, strategies=(2, 12), topology: str = "cyclic",
             density: str = "sparse", memory: str = "tight", cost_scale: float = 1e9) -> dict:
    """One instance as the IOPDDL JSON document ({"problem": ...}); deterministic in its arguments."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {sorted(SPLITS)}")
    if seed not in SPLITS[split]:
        raise ValueError(f"seed {seed} is not a {split} seed (expected {SPLITS[split].start}..{SPLITS[split].stop - 1})")
    if density not in ("sparse", "dense") or memory not in ("none", "loose", "tight", "bound"):
        raise ValueError(f"density {density!r} / memory {memory!r}: expected sparse|dense and none|loose|tight|bound")
    if nodes < 2 or strategies[0] < 1 or strategies[1] < strategies[0]:
        raise ValueError("expected nodes >= 2 and 1 <= min strategies <= max strategies")
    rng = random.Random(f"{seed}/{nodes}/{strategies}/{topology}/{density}/{memory}/{cost_scale}")
    counts = [rng.randint(*strategies) for _ in range(nodes)]
    if memory == "bound":
        counts = [max(2, k) for k in counts]  # keep and recompute at least
        costs, usages, intervals = _recompute_nodes(rng, counts, cost_scale)
    else:
        costs = [[_cost(rng, cost_scale) for _ in range(k)] for k in counts]
        # Usage: a tensor's size divided by how sharded the strategy is (1, 2, 4, ... ways).
        sizes = [int(10 ** rng.uniform(3, 7)) for _ in range(nodes)]
        usages = [[sizes[i] // (1 << rng.randrange(0, 4)) for _ in range(k)] for i, k in enumerate(counts)]
        intervals = []
        for i in range(nodes):
            life = 1 + int(rng.expovariate(1 / 20))
            intervals.append([i, min(nodes, i + life)])
    edge_nodes, edge_costs = [], []
    for u, v in _neighbours(rng, nodes, topology):
        scale = _cost(rng, cost_scale)
        mat = []
        for su in range(counts[u]):
            for sv in range(counts[v]):
                if density == "sparse":
                    mat.append(0 if su % 4 == sv % 4 else int(scale * (1 + rng.random())))
                else:
                    mat.append(_cost(rng, scale))
        edge_nodes.append([u, v])
        edge_costs.append(mat)
    problem = {"name": f"gen-{split}-{seed}-{topology}-{density}-{memory}-{nodes}",
               "nodes": {"intervals": intervals, "costs": costs, "usages": usages},
               "edges": {"nodes": edge_nodes, "costs": edge_costs}}
    if memory != "none":
        if memory in ("tight", "bound"):
            labelling = [min(range(k), key=lambda s, i=i: usages[i][s]) for i, k in enumerate(counts)]
            factor = 1.05 if memory == "tight" else BOUND_SLACK
        else:
            labelling = [rng.randrange(k) for k in counts]
            factor = 1.5
        problem["usage_limit"] = int(factor * peak_usage(problem, labelling))
    return {"problem": problem}


def peak_usage(problem: dict, labelling: list) -> int:
    """The largest summed usage over time of `labelling` (intervals are half-open)."""
    nodes = problem["nodes"]
    n = len(labelling)
    delta = [0] * (n + 1)
    for i, s in enumerate(labelling):
        a, b = nodes["intervals"][i]
        if b > a:
            delta[a] += nodes["usages"][i][s]
            delta[b] -= nodes["usages"][i][s]
    peak = live = 0
    for d in delta[:-1]:
        live += d
        peak = max(peak, live)
    return peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", required=True, choices=sorted(SPLITS))
    p.add_argument("--count", type=int, default=4)
    p.add_argument("--first-seed", type=int, default=None, help="default: the split's first seed")
    p.add_argument("--out", required=True, help="directory for the .json.gz files")
    p.add_argument("--nodes", type=int, default=2000)
    p.add_argument("--topology", default="cyclic", choices=["tree", "cyclic", "mixed", "islands"])
    p.add_argument("--density", default="sparse", choices=["sparse", "dense"])
    p.add_argument("--memory", default="tight", choices=["none", "loose", "tight", "bound"])
    p.add_argument("--cost-scale", type=float, default=1e9)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    first = SPLITS[a.split].start if a.first_seed is None else a.first_seed
    for seed in range(first, first + a.count):
        doc = generate(seed, a.split, nodes=a.nodes, topology=a.topology, density=a.density, memory=a.memory,
                       cost_scale=a.cost_scale)
        path = os.path.join(a.out, doc["problem"]["name"] + ".json.gz")
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        print(path)


if __name__ == "__main__":
    main()
