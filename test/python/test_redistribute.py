"""redistribute_local on gloo ranks equals DTensor's own redistribute, case by case.

One process spawn per world size (spawning costs seconds); inside it, every rank runs the same
seeded list of random (shape, src spec, dst spec) cases on a few meshes. Partial sources are
random splits of the value (sum/avg splits, max/min held exactly by one rank of the group).
Refused transitions must be refused by both.
"""
import random
import zlib

import pytest

from dist_utils import make_mesh, run_distributed

REDUCE_OPS = ("sum", "avg", "max", "min")


def _random_spec(rng, ndim, mesh_ndim, partial_op):
    out = []
    for _ in range(mesh_ndim):
        r = rng.random()
        if r < 0.5:
            out.append(f"S({rng.randrange(ndim)})")
        elif r < 0.75:
            out.append("R")
        else:
            # Mostly one Partial kind per spec (DTensor refuses most mixes), sometimes another.
            out.append(f"P({partial_op if rng.random() < 0.85 else rng.choice(REDUCE_OPS)})")
    return "".join(out)


def _partial_split(torch, value, op, k, n, seed):
    """Rank k's (of n) partial value of `value` for reduce op `op`; same seed on the whole group."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn((n, *value.shape), generator=g, dtype=value.dtype)
    if op == "sum":
        return value / n + noise[k] - noise.mean(0)
    if op == "avg":
        return value + noise[k] - noise.mean(0)
    holder = int(torch.randint(n, (1,), generator=g))  # the rank that holds the exact value
    if k == holder:
        return value.clone()
    return value - noise[k].abs() if op == "max" else value + noise[k].abs()


def _source_local(torch, full, mesh_shape, coord, src, case_seed):
    """This rank's local tensor of `full` under `src`, Partial dims as random splits."""
    from torch_localmap.placements import spec_to_placements
    from torch_localmap._runtime.redistribute import shard_local

    placements = spec_to_placements(src)
    no_partial = "".join("R" if p.is_partial() else f"S({p.dim})" if p.is_shard() else "R" for p in placements)
    local = shard_local(full, mesh_shape, no_partial, coord=coord)
    for md, p in enumerate(placements):
        if p.is_partial():
            group_key = tuple(c for i, c in enumerate(coord) if i != md)
            seed = zlib.crc32(repr((case_seed, md, group_key)).encode())  # same in every process
            local = _partial_split(torch, local, p.reduce_op, coord[md], mesh_shape[md], seed)
    return local


def _dtensor_redistribute(torch, local, shape, mesh, src_pl, dst_pl):
    """DTensor's answer: the public redistribute where it allows the target, else the internal one."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta  # private, torch 2.13
    from torch.distributed.tensor._redistribute import redistribute_local_tensor  # private, torch 2.13

    stride = torch.empty(shape).stride()
    if all(not d.is_partial() or d == s for s, d in zip(src_pl, dst_pl)):
        dt = DTensor.from_local(local, mesh, src_pl, run_check=False, shape=torch.Size(shape), stride=stride)
        return dt.redistribute(mesh, dst_pl)._local_tensor
    meta = TensorMeta(torch.Size(shape), stride, local.dtype)
    return redistribute_local_tensor(local, DTensorSpec(mesh, tuple(src_pl), tensor_meta=meta),
                                     DTensorSpec(mesh, tuple(dst_pl), tensor_meta=meta))


def _check_cases(rank, world_size, mesh_shapes, n_cases, seed):
    import torch

    from torch_localmap import _C
    from torch_localmap.placements import spec_to_placements
    from torch_localmap._runtime.redistribute import redistribute_local, shard_local

    stats = {"cases": 0, "refused": 0, "uneven": 0, "kinds": set(), "traced": 0}
    for mesh_shape in mesh_shapes:
        mesh = make_mesh(mesh_shape)
        coord = tuple(mesh.get_coordinate())
        rng = random.Random(seed + 1000 * len(mesh_shape) + sum(mesh_shape))  # same on every rank
        for case in range(n_cases):
            ndim = rng.randint(1, 3)
            shape = tuple(rng.choice([1, 2, 3, 4, 5, 6, 7, 9]) for _ in range(ndim))
            op = rng.choice(REDUCE_OPS)
            src = _random_spec(rng, ndim, len(mesh_shape), op)
            dst = _random_spec(rng, ndim, len(mesh_shape), op)
            where = f"mesh {mesh_shape} case {case}: {shape} {src} -> {dst}"
            full = torch.randn(shape, generator=torch.Generator().manual_seed(case), dtype=torch.float64)
            local = _source_local(torch, full, mesh_shape, coord, src, (seed, case))
            src_pl, dst_pl = spec_to_placements(src), spec_to_placements(dst)

            try:
                ours = redistribute_local(local, shape, mesh, src, dst)
            except ValueError as e:
                ours_error = str(e)
            else:
                ours_error = None
            try:
                theirs = _dtensor_redistribute(torch, local, shape, mesh, src_pl, dst_pl)
            except (ValueError, RuntimeError, AssertionError) as e:
                theirs_error = f"{type(e).__name__}: {e}"
            else:
                theirs_error = None

            if ours_error is not None or theirs_error is not None:
                assert ours_error is not None and theirs_error is not None, (
                    f"{where}: ours error={ours_error!r}, DTensor error={theirs_error!r}")
                assert src in ours_error and dst in ours_error, (where, ours_error)
                stats["refused"] += 1
                continue
            assert ours.shape == theirs.shape, f"{where}: {tuple(ours.shape)} != {tuple(theirs.shape)}"
            torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12, msg=lambda m: f"{where}: {m}")
            if "P" not in dst:
                # And both hold this rank's piece of the true value.
                torch.testing.assert_close(ours, shard_local(full, mesh, dst), rtol=1e-9, atol=1e-9,
                                           msg=lambda m: f"{where} vs full: {m}")
            steps = _C.plan_redistribute(list(shape), list(mesh_shape), src, dst)
            stats["kinds"].update(s["kind"] for s in steps)
            layouts = _C.local_layouts(list(shape), list(mesh_shape), src)
            stats["uneven"] += len({s for s, _ in layouts}) > 1
            stats["cases"] += 1

        # A couple of plans traced with make_fx: one localmap.redistribute node in the graph
        # and the traced program computes the same local tensor.
        from torch.fx.experimental.proxy_tensor import make_fx

        traced_pairs = [("S(0)" * len(mesh_shape), "R" * len(mesh_shape)),
                        ("P(sum)" + "S(1)" * (len(mesh_shape) - 1), "S(1)" + "S(0)" * (len(mesh_shape) - 1))]
        for src, dst in traced_pairs:
            shape = (5, 7)
            full = torch.randn(shape, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
            local = _source_local(torch, full, mesh_shape, coord, src, (seed, "traced"))
            gm = make_fx(lambda x: redistribute_local(x, shape, mesh, src, dst))(local)
            # one C++ op node; its kernel runs the functional collectives through the dispatcher
            targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
            assert targets == ["localmap.redistribute.default"], targets
            torch.testing.assert_close(gm(local), redistribute_local(local, shape, mesh, src, dst), rtol=0, atol=0)
            torch.testing.assert_close(gm(local), _dtensor_redistribute(
                torch, local, shape, mesh, spec_to_placements(src), spec_to_placements(dst)), rtol=1e-12, atol=1e-12)
            stats["traced"] += 1
    return stats


def _assert_coverage(stats, min_cases):
    s = stats[0]
    assert all(r == s for r in stats), "ranks disagree on what they ran"
    assert s["cases"] >= min_cases and s["refused"] >= 5 and s["uneven"] >= min_cases // 4, s
    assert s["kinds"] == {"all_gather", "reduce_scatter", "all_reduce", "all_to_all", "local_chunk",
                          "local_partition"}, s
    assert s["traced"] > 0


def test_two_ranks_match_dtensor():
    stats = run_distributed(_check_cases, 2, [(2,), (1, 2)], 120, 11, timeout=240.0)
    _assert_coverage(stats, 150)


def test_four_ranks_match_dtensor():
    stats = run_distributed(_check_cases, 4, [(2, 2), (4,)], 150, 23, timeout=300.0)
    _assert_coverage(stats, 180)


def test_refused_transitions_raise_value_error():
    from torch_localmap import _C

    with pytest.raises(ValueError, match=r"cannot redistribute S\(0\)R -> P\(sum\)R on mesh 2x2.*Shard -> Partial"):
        _C.plan_redistribute([4, 4], [2, 2], "S(0)R", "P(sum)R")
    with pytest.raises(ValueError, match=r"P\(max\) -> P\(min\).*between Partial kinds"):
        _C.plan_redistribute([4], [2], "P(max)", "P(min)")
    with pytest.raises(ValueError, match="target placements"):
        _C.plan_redistribute([4], [2], "R", "S(1)")
    assert not _C.can_redistribute("S(0)R", "P(sum)R")
    assert _C.can_redistribute("S(0)R", "P(sum)R", mesh_shape=[1, 2])
    assert _C.can_redistribute("P(sum)S(0)", "S(0)S(0)")
