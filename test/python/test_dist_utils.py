"""The multi-rank harness itself: results come back by rank, failures and hangs are reported."""
import time

import pytest

from dist_utils import make_mesh, run_distributed


def _sum_ranks(rank, world_size, scale):
    import torch
    import torch.distributed as dist

    mesh = make_mesh((world_size,), ("dp",))
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mesh.get_group("dp"))
    return (rank, t.item() * scale, tuple(mesh.shape))


def _fail_on_rank_one(rank, world_size):
    if rank == 1:
        raise RuntimeError("deliberate failure on rank one")
    return rank


def _hang_on_rank_one(rank, world_size):
    if rank == 1:
        time.sleep(600)
    return rank


def test_results_by_rank():
    out = run_distributed(_sum_ranks, 2, 10.0)
    assert out == [(0, 10.0, (2,)), (1, 10.0, (2,))]


def test_failure_carries_rank_traceback():
    with pytest.raises(AssertionError, match=r"(?s)rank 1 of 2 failed.*deliberate failure on rank one"):
        run_distributed(_fail_on_rank_one, 2)


def test_hang_times_out():
    # The launcher's own report says it stopped at its timeout and names the rank; how long the
    # call took on the wall is left to benchmarks (a loaded machine stretches it).
    with pytest.raises(AssertionError, match=r"timed out after 20 s; ranks \[1\]"):
        run_distributed(_hang_on_rank_one, 2, timeout=20.0)


def _string_hashes(rank, world_size):
    import os

    return os.environ.get("PYTHONHASHSEED"), hash("rotary tables per attention type")


def test_ranks_share_one_hash_seed_so_they_trace_alike(monkeypatch):
    # Without a seed of the parent's, each spawned interpreter would draw its own, and a
    # forward iterating a set of strings would trace differently per rank.
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    out = run_distributed(_string_hashes, 2)
    assert out[0] == out[1] and out[0][0] == "0"
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    out = run_distributed(_string_hashes, 2)
    assert out[0] == out[1] and out[0][0] == "123"
