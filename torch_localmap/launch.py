"""Run a function on N local ranks (one process each) and collect the results.

    results = run_distributed(fn, world_size, *args, timeout=120.0, backend="gloo")

`fn` must be a picklable top-level function `fn(rank, world_size, *args)`; it runs after
`init_process_group(backend)` on 127.0.0.1 (gloo: CPU ranks; nccl: rank r on GPU r, which
needs `world_size` visible GPUs) and its return values come back as a list indexed
by rank. Any rank raising (or dying) makes the call fail with an AssertionError that leads
with the root cause: a rank that died, else one whose own code raised, before ranks that
only saw a collective break or were told of another rank's failure (runtime/failures.py).
A hang makes it fail after `timeout` seconds. Stragglers are killed either way. Ranks share
one PYTHONHASHSEED (the caller's, else 0), so a model traces alike on every rank.

Inside `fn`, `make_mesh(shape, names)` builds a DeviceMesh over all ranks (CPU for gloo,
CUDA for nccl). Training scripts launched by torchrun need none of this: they call
init_process_group themselves (docs/user_guide.md, "torchrun").

Why processes and not threads: gloo process groups are per process, and the spawn context keeps
children clean of the parent's state (pytest, already-initialized groups). Why results are
pickled in the child: torch's multiprocessing queue would share tensor storage through file
descriptors that die with the child process.
"""
from __future__ import annotations

import contextlib
import datetime
import faulthandler
import os
import pickle
import queue as queue_mod
import socket
import time
import traceback

__all__ = ["run_distributed", "make_mesh", "free_port", "check_backend"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_mesh(shape, mesh_dim_names=None, device_type=None):
    """A DeviceMesh over all ranks of the current process group: CUDA when the group is
    NCCL, else CPU (or `device_type` when given)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
    if device_type is None:
        device_type = "cuda" if dist.is_initialized() and "nccl" in str(dist.get_backend()).lower() else "cpu"
    return init_device_mesh(device_type, shape, mesh_dim_names=names)


BACKENDS = ("gloo", "nccl")


def check_backend(backend: str, world_size: int, cuda_devices: int | None = None) -> None:
    """Refuses a backend these local ranks cannot run (ValueError naming what is missing)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "nccl":
        import torch

        n = cuda_devices if cuda_devices is not None else (torch.cuda.device_count()
                                                           if torch.cuda.is_available() else 0)
        if n < world_size:
            raise ValueError(f"backend 'nccl' runs one rank per GPU: {world_size} ranks need {world_size} GPUs but "
                             f"{n} are visible; use backend='gloo' for CPU ranks")


def _failure_kind(exc: BaseException) -> str:
    """"peer:<rank>": that rank's failure reached this one; "collective": a collective
    broke without a recorded cause; "own": this rank's own error (a root cause)."""
    from ._runtime.failures import PeerFailureError
    from ._runtime.groups import is_collective_failure

    if isinstance(exc, PeerFailureError):
        return f"peer:{exc.failed_ranks[0]}"
    return "collective" if is_collective_failure(exc) else "own"


def _worker(fn, rank, world_size, port, pg_timeout, args, result_queue, backend="gloo"):
    import torch
    import torch.distributed as dist

    # A rank killed by a signal (a native crash) reports nothing through the queue; its
    # Python stack on stderr says where it was.
    faulthandler.enable(all_threads=True)

    # Loopback only: gloo would otherwise resolve the hostname to a public interface.
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["LOCAL_RANK"] = str(rank)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        try:
            dist.init_process_group(
                backend,
                init_method=f"tcp://127.0.0.1:{port}",
                rank=rank,
                world_size=world_size,
                timeout=datetime.timedelta(seconds=pg_timeout),
            )
            # Every rank is connected before any runs fn: a rank that returns at once
            # and tears its group down would otherwise close pairs a slower rank is
            # still connecting ("Connection closed by peer" in its init).
            dist.barrier()
        except Exception:  # the rendezvous itself: fn never ran (run_distributed may retry)
            result_queue.put((rank, False, traceback.format_exc(), "init"))
            return
        out = fn(rank, world_size, *args)
        result_queue.put((rank, True, pickle.dumps(out), ""))
    except BaseException as e:  # report everything, including assertion failures and SystemExit
        result_queue.put((rank, False, traceback.format_exc(), _failure_kind(e)))
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


# After the first failure, how long the launcher waits for the other ranks' reports, so it
# can name the rank that failed first rather than the first report that arrived.
_SETTLE_S = 3.0

# Root causes first: a rank that died, then one whose own code raised, then ranks told of
# another rank's failure (they name it), then ranks that only saw a collective break.
_KIND_ORDER = {"died": 0, "own": 1, "init": 1, "peer": 2, "collective": 3}


def _failure_report(name, world_size, errors, procs, results) -> str:
    def order(r):
        return (_KIND_ORDER.get(errors[r][1].split(":")[0], 4), r)

    ordered = sorted(errors, key=order)
    root = ordered[0]
    kind = errors[root][1]
    if kind.startswith("peer:"):  # only peers reported: the failed rank caught its error and lived on
        failed = int(kind.split(":")[1])
        head = (f"run_distributed({name}): rank {failed} of {world_size} failed inside the planned program "
                f"(reported by rank {root}; rank {failed} did not exit):")
    else:
        head = f"run_distributed({name}): rank {root} of {world_size} failed:"
    lines = [head, errors[root][0].rstrip()]
    for r in ordered[1:]:
        last = errors[r][0].strip().splitlines()[-1] if errors[r][0].strip() else ""
        lines.append(f"rank {r} also failed ({errors[r][1]}): {last}")
    silent = [r for r in range(world_size) if r not in errors and r not in results and procs[r].is_alive()]
    if silent:
        lines.append(f"ranks {silent} were still running and were stopped")
    return "\n".join(lines)


# A rendezvous that fails before any rank ran its function (another process took the port
# between free_port() and the bind, or a peer's connection was refused under load) is tried
# again on a new port this many times.
_RENDEZVOUS_RETRIES = 2


class _RendezvousFailed(Exception):
    pass


def run_distributed(fn, world_size: int, *args, timeout: float = 120.0, pg_timeout: float = 60.0,
                    backend: str = "gloo") -> list:
    """Runs fn(rank, world_size, *args) on `world_size` local ranks; returns results by rank."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    check_backend(backend, world_size)
    for attempt in range(_RENDEZVOUS_RETRIES + 1):
        try:
            return _run_once(fn, world_size, args, timeout, pg_timeout, backend,
                             last_attempt=attempt == _RENDEZVOUS_RETRIES)
        except _RendezvousFailed:
            continue
    raise AssertionError("unreachable")  # the last attempt raises its own report


@contextlib.contextmanager
def _one_hash_seed():
    """Ranks started inside share one PYTHONHASHSEED: the parent's when it has one, else 0.
    Every rank traces the model, and a forward that iterates a set of strings (transformers'
    Dory builds its rotary tables so) follows the process's hash seed; with a seed each,
    ranks trace their graphs in different orders (the planner then refuses, naming the rank)."""
    before = os.environ.get("PYTHONHASHSEED")
    if before is None:
        os.environ["PYTHONHASHSEED"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONHASHSEED", None)


def _run_once(fn, world_size, args, timeout, pg_timeout, backend, last_attempt) -> list:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    result_queue = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_worker,
            args=(fn, rank, world_size, port, min(pg_timeout, timeout), args, result_queue, backend),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    with _one_hash_seed():
        for p in procs:
            p.start()

    results: dict[int, object] = {}
    errors: dict[int, tuple[str, str]] = {}  # rank -> (traceback, kind)
    name = getattr(fn, "__name__", fn)
    deadline = time.monotonic() + timeout
    settle_until = None  # after the first failure: a short wait for the other ranks' reports
    try:
        while len(results) + len(errors) < world_size:
            now = time.monotonic()
            if settle_until is not None and now >= settle_until:
                break
            if now >= deadline:
                if errors:
                    break
                missing = sorted(set(range(world_size)) - set(results))
                raise AssertionError(f"run_distributed({name}): timed out after {timeout:.0f} s; ranks {missing} did "
                                     f"not finish")
            try:
                rank, ok, payload, kind = result_queue.get(timeout=min(deadline - now, 0.5))
            except queue_mod.Empty:
                dead = [r for r, p in enumerate(procs) if r not in results and r not in errors and not p.is_alive()]
                if dead:
                    # Give a late queue flush a moment before declaring the rank lost.
                    try:
                        rank, ok, payload, kind = result_queue.get(timeout=1.0)
                    except queue_mod.Empty:
                        for r in dead:
                            errors[r] = (f"rank {r} died without reporting a result (exit code {procs[r].exitcode})",
                                         "died")
                        settle_until = settle_until or time.monotonic() + _SETTLE_S
                        continue
                else:
                    continue
            if ok:
                results[rank] = pickle.loads(payload)
            else:
                errors[rank] = (payload, kind)
                settle_until = settle_until or time.monotonic() + _SETTLE_S
        if errors:
            if not last_attempt and not results and all(kind == "init" for _, kind in errors.values()):
                raise _RendezvousFailed()
            raise AssertionError(_failure_report(name, world_size, errors, procs, results))
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
    finally:
        _stop(procs)
        result_queue.close()
    return [results[r] for r in range(world_size)]
