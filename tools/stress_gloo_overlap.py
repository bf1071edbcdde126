"""Reproduces (or rules out) the gloo rank abort: one zoo model on a (2, 2) mesh of 4 gloo
ranks, planned once per spawn, then many training steps.

    python tools/stress_gloo_overlap.py --model bert --steps 300 --rounds 3 --overlap on

Prints one line per round (ok / FAIL with the failing rank's report) and the count of
failed rounds. docs/benchmarks.md, "The rank abort on gloo ranks", has the results.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "python"))

import torch  # noqa: E402

import zoo  # noqa: E402
from dist_utils import make_mesh, run_distributed  # noqa: E402
from test_zoo import FORCE_SHARDING, _replicated  # noqa: E402


def _rank(rank, world, name, steps, overlap):
    import torch_localmap

    mesh = make_mesh((2, 2))
    case = zoo.MODELS[name](seed=0)
    case.model.train()
    model = torch_localmap.parallelize(case.model, mesh, case.args, case.kwargs, time_limit=5,
                                       calibration=FORCE_SHARDING, overlap=overlap)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    target = _replicated(case.target, mesh)
    for _ in range(steps):
        opt.zero_grad()
        case.loss(model(*case.args, **case.kwargs), target).backward()
        opt.step()
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert", choices=sorted(zoo.MODELS))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--overlap", choices=("on", "off", "default"), default="default")
    a = ap.parse_args()
    overlap = {"on": True, "off": False, "default": None}[a.overlap]
    failed = 0
    for r in range(a.rounds):
        start = time.time()
        try:
            run_distributed(_rank, 4, a.model, a.steps, overlap, timeout=1800)
            print(f"round {r}: ok, {a.steps} steps in {time.time() - start:.0f} s", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"round {r}: FAIL after {time.time() - start:.0f} s\n{str(e)[:800]}", flush=True)
    print(f"{failed} of {a.rounds} rounds failed ({a.model}, overlap={a.overlap})")


if __name__ == "__main__":
    main()
