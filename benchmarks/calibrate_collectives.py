"""Measure collectives on local ranks (gloo on CPU, or NCCL on GPUs) and write a calibration profile.

    python benchmarks/calibrate_collectives.py --out /tmp/gloo_profile.json
    python benchmarks/calibrate_collectives.py --backend nccl --world 8 --device H100 --out /tmp/nccl.json

Spawns `--world` processes bound to 127.0.0.1 (bounded timeouts), times
all_gather / reduce_scatter / all_reduce / all_to_all at a few sizes, and
writes the measurements in the cost model's calibration schema
(docs/cost_model.md). The C++ side fits latency and bandwidth per collective
from them when the profile is loaded:

    torch_localmap.cost_model.load_cost_model("cpu", "/tmp/gloo_profile.json")

Sizes follow the nccl-tests convention the cost model uses: the per-rank
buffer of the whole collective (gathered output of an all-gather, unreduced
input of a reduce-scatter, all-reduce buffer, all-to-all send buffer).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import queue
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The buffers and calls are the live calibration's (the same sizes convention).
from torch_localmap._calibrate import _sync  # noqa: E402
from torch_localmap._live_calibration import collective_call  # noqa: E402

COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
DEFAULT_SIZES = (64 * 1024, 1024 * 1024, 4 * 1024 * 1024)


def _worker(rank: int, world: int, port: int, sizes, reps: int, timeout_s: float, results,
            backend: str = "gloo") -> None:
    try:
        device = torch.device("cpu")
        if backend == "nccl":  # one GPU per rank
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        rows = []
        for name in COLLECTIVES:
            for nbytes in sizes:
                call, size = collective_call(name, nbytes, world, device)
                call()  # warm-up: connections, allocations
                _sync(device)
                times = []
                for _ in range(reps):
                    dist.barrier()
                    _sync(device)
                    t0 = time.perf_counter()
                    call()
                    _sync(device)
                    times.append(time.perf_counter() - t0)
                # Best of the repetitions rejects interference from other
                # processes on a shared machine; the collective ends when its
                # slowest rank does, hence the max over ranks.
                t = torch.tensor([min(times)], dtype=torch.float64, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                rows.append(
                    {
                        "collective": name,
                        "group_size": world,
                        "bytes": int(size),
                        "seconds": float(t.item()),
                        "link": "intra",
                    }
                )
        if rank == 0:
            results.put(("ok", rows))
        dist.destroy_process_group()
    except Exception as e:  # reported to the parent, which fails loudly
        results.put(("error", f"rank {rank}: {type(e).__name__}: {e}"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(world: int = 2, sizes=DEFAULT_SIZES, reps: int = 5, timeout_s: float = 60.0,
            backend: str = "gloo") -> list[dict]:
    if backend == "nccl" and torch.cuda.device_count() < world:
        raise ValueError(f"--backend nccl runs one rank per GPU: {world} ranks need {world} GPUs, "
                         f"{torch.cuda.device_count()} visible")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_worker, args=(r, world, port, list(sizes), reps, timeout_s, results, backend)) for r in range(world)
    ]
    for p in procs:
        p.start()
    try:
        status, payload = results.get(timeout=timeout_s + 30)
    except queue.Empty:
        status, payload = "error", f"no result within {timeout_s + 30:.0f} s"
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()  # only the processes this function started
                p.join()
    if status != "ok":
        raise RuntimeError(f"{backend} calibration failed: {payload}")
    return payload


def profile(rows: list[dict], world: int, reps: int, backend: str = "gloo") -> dict:
    return {
        "version": 1,
        "meta": {
            "backend": backend,
            "host": platform.node(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "world_size": world,
            "repetitions": reps,
            "statistic": "max over ranks of the per-rank best of the repetitions",
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        },
        "collectives": rows,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the profile JSON")
    parser.add_argument("--world", type=int, default=2, help="local ranks (default 2)")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="per-rank buffer sizes in bytes"
    )
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per size (default 5)")
    parser.add_argument("--timeout", type=float, default=60.0, help="process-group timeout in seconds (default 60)")
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"],
                        help="gloo: CPU ranks; nccl: one GPU per rank (default gloo)")
    parser.add_argument("--device", default="cpu", help="device of the cost model to print fits with")
    args = parser.parse_args(argv)
    if args.world < 2:
        parser.error("--world must be >= 2")
    if len(set(args.sizes)) < 2 or min(args.sizes) <= 0:
        parser.error("--sizes needs at least two distinct positive sizes (latency and bandwidth are fitted)")

    rows = measure(args.world, args.sizes, args.reps, args.timeout, args.backend)
    doc = profile(rows, args.world, args.reps, args.backend)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {len(rows)} measurements to {args.out}")
    for r in rows:
        print(f"  {r['collective']:>15} n={r['group_size']} {r['bytes']:>10} B  {r['seconds'] * 1e6:10.1f} us")

    # Load it back through the binding: proves the profile is valid and shows the fits.
    from torch_localmap.cost_model import load_cost_model

    model = load_cost_model(args.device, args.out)
    for fit in model.fits:
        print(
            f"  fit {fit['collective']:>15} ({fit['link']}): latency {fit['latency'] * 1e6:8.1f} us, "
            f"bandwidth {fit['bandwidth'] / 1e9:6.2f} GB/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
