"""Run a function on N gloo CPU ranks (one process each) and collect the results.

    results = run_distributed(fn, world_size, *args, timeout=120.0)

`fn` must be a picklable top-level function `fn(rank, world_size, *args)`; it runs after
`init_process_group("gloo")` on 127.0.0.1 and its return values come back as a list indexed
by rank. Any rank raising makes the call fail with an AssertionError carrying that rank's
traceback; a hang makes it fail after `timeout` seconds. Stragglers are killed either way.

Inside `fn`, `make_mesh(shape, names)` builds a CPU DeviceMesh over all ranks.

Why processes and not threads: gloo process groups are per process, and the spawn context keeps
children clean of the parent's state (pytest, already-initialized groups). Why results are
pickled in the child: torch's multiprocessing queue would share tensor storage through file
descriptors that die with the child process.
"""
from __future__ import annotations

import datetime
import os
import pickle
import queue as queue_mod
import socket
import time
import traceback

__all__ = ["run_distributed", "make_mesh", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_mesh(shape, mesh_dim_names=None):
    """A CPU DeviceMesh over all ranks of the current (gloo) process group."""
    from torch.distributed.device_mesh import init_device_mesh

    shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
    return init_device_mesh("cpu", shape, mesh_dim_names=names)


def _worker(fn, rank, world_size, port, pg_timeout, args, result_queue):
    import torch.distributed as dist

    # Loopback only: gloo would otherwise resolve the hostname to a public interface.
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["LOCAL_RANK"] = str(rank)
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=pg_timeout),
        )
        out = fn(rank, world_size, *args)
        result_queue.put((rank, True, pickle.dumps(out)))
    except BaseException:  # report everything, including assertion failures and SystemExit
        result_queue.put((rank, False, traceback.format_exc()))
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


def _stop(procs, grace: float = 2.0) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(1.0)


def run_distributed(fn, world_size: int, *args, timeout: float = 120.0, pg_timeout: float = 60.0) -> list:
    """Runs fn(rank, world_size, *args) on `world_size` gloo ranks; returns results by rank."""
    import torch.multiprocessing as mp

    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    result_queue = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_worker,
            args=(fn, rank, world_size, port, min(pg_timeout, timeout), args, result_queue),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    for p in procs:
        p.start()

    results: dict[int, object] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(range(world_size)) - set(results))
                raise AssertionError(
                    f"run_distributed({getattr(fn, '__name__', fn)}): timed out after {timeout:.0f} s; "
                    f"ranks {missing} did not finish"
                )
            try:
                rank, ok, payload = result_queue.get(timeout=min(remaining, 0.5))
            except queue_mod.Empty:
                dead = [r for r, p in enumerate(procs) if r not in results and not p.is_alive()]
                if dead:
                    # Give a late queue flush a moment before declaring the rank lost.
                    try:
                        rank, ok, payload = result_queue.get(timeout=1.0)
                    except queue_mod.Empty:
                        codes = {r: procs[r].exitcode for r in dead}
                        raise AssertionError(
                            f"run_distributed({getattr(fn, '__name__', fn)}): ranks exited without a "
                            f"result (exit codes {codes})"
                        ) from None
                else:
                    continue
            if not ok:
                raise AssertionError(f"rank {rank} of {world_size} failed:\n{payload}")
            results[rank] = pickle.loads(payload)
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
    finally:
        _stop(procs)
        result_queue.close()
    return [results[r] for r in range(world_size)]
