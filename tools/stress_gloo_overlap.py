"""Reproduces (or rules out) the gloo rank abort: one zoo model on a (2, 2) mesh of 4 gloo
ranks, planned once per spawn, then many training steps.

    python tools/stress_gloo_overlap.py --model bert --steps 300 --rounds 3 --overlap on

Prints one line per round (ok / FAIL with the failing rank's report) and the count of
failed rounds. docs/benchmarks_log.md, "The rank abort on gloo ranks", has the results.
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


def _gloo_threads(threads):
    """Process groups created from here on run `threads` worker threads (gloo's default: 2).
    The world group already exists; the mesh's groups are made after this."""
    import torch.distributed.distributed_c10d as c10d

    base = c10d.ProcessGroupGloo

    class GlooWithThreads(base):
        def __init__(self, store, rank, size, timeout=None):
            opts = base._Options()
            if timeout is not None:
                opts._timeout = timeout
            opts._threads = threads
            opts._devices = [base.create_default_device()]
            super().__init__(store, rank, size, opts)

    c10d.ProcessGroupGloo = GlooWithThreads


def _rank(rank, world, name, steps, overlap, threads):
    import torch_localmap

    if threads:
        _gloo_threads(threads)

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
    ap.add_argument("--gloo-threads", type=int, default=0,
                    help="worker threads of the mesh's gloo groups (0: gloo's default, 2)")
    a = ap.parse_args()
    overlap = {"on": True, "off": False, "default": None}[a.overlap]
    failed = 0
    for r in range(a.rounds):
        start = time.time()
        try:
            run_distributed(_rank, 4, a.model, a.steps, overlap, a.gloo_threads, timeout=1800)
            print(f"round {r}: ok, {a.steps} steps in {time.time() - start:.0f} s", flush=True)
        except AssertionError as e:
            failed += 1
            print(f"round {r}: FAIL after {time.time() - start:.0f} s\n{str(e)[:800]}", flush=True)
    print(f"{failed} of {a.rounds} rounds failed ({a.model}, overlap={a.overlap}, gloo threads={a.gloo_threads or 'default'})")


if __name__ == "__main__":
    main()
