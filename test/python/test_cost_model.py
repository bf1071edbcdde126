"""Cost model bindings: prices match the documented formulas, profiles load, bad input raises ValueError."""
import importlib.util
import json
import math
import os
import re

import pytest

from torch_localmap import cost_model as cm

MiB = 1024 * 1024
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _calibrate_script():
    path = os.path.join(ROOT, "benchmarks", "calibrate_collectives.py")
    spec = importlib.util.spec_from_file_location("calibrate_collectives", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_device_table():
    # Every row the C++ table lists (csrc/core/device_table.cpp): a new device needs no edit here.
    names = cm.device_names()
    assert names and len({n.lower() for n in names}) == len(names)
    for name in names:
        for spelled in (name, name.lower(), name.upper()):
            profile = cm.device_profile(spelled)
            assert profile["name"] == name
            # The optimizer's extra dispatch per kernel and its own bandwidth are 0 in the table
            # (live calibration measures them).
            assert profile["optimizer_kernel_overhead_s"] == 0 and profile["optimizer_bandwidth"] == 0, profile
            shape_effects = ("matmul_half_dim", "attention_half_dim", "attention_causal_tile")
            assert all(profile[k] == 0 for k in shape_effects), profile  # no shape effect in the table
            assert all(v > 0 for k, v in profile.items()
                       if k not in ("name", "optimizer_kernel_overhead_s", "optimizer_bandwidth") + shape_effects), profile
        topology = cm.default_topology(name)
        assert topology["ranks_per_node"] >= 1 and all(v > 0 for v in topology.values()), topology
        assert cm.load_cost_model(name).device == cm.device_profile(name)
    # Spot checks of datasheet figures through the binding.
    assert cm.device_profile("h200")["memory_bandwidth"] == 4.8e12
    assert cm.default_topology("B200")["intra_bandwidth"] == 900e9


def test_allgather_64mib_over_8_h100_matches_formula():
    model = cm.load_cost_model("H100")
    got = model.collective_seconds("all_gather", [8], 0, 64 * MiB)
    assert got == pytest.approx(7 * (1.9e-6 + 8 * MiB / 450e9), rel=1e-12)


def test_redistribute_prices_and_steps():
    model = cm.load_cost_model("H100")
    t = model.redistribute_seconds([4096, 4096], "float32", [8], "S(0)", "R")
    assert t == pytest.approx(1.4378945777777778e-4, rel=1e-12)
    steps = model.redistribute_steps([4096, 4096], "float32", [8], "S(0)", "R")
    assert [s["collective"] for s in steps] == ["all_gather"]
    assert steps[0]["seconds"] == pytest.approx(t, rel=1e-12)
    # DTensor refuses Shard -> Partial: infinite price, and no plan to print.
    assert model.redistribute_seconds([8, 8], "float32", [2], "S(0)", "P(sum)") == math.inf
    with pytest.raises(ValueError):
        model.redistribute_steps([8, 8], "float32", [2], "S(0)", "P(sum)")
    assert model.local_bytes([10, 3], "float32", [4], "S(0)") == 36


def test_a_reduction_over_both_mesh_dims_is_priced_as_one_collective():
    """The runtime merges the per-dim all-reduces of P(sum)P(sum) -> RR into one over both
    dims' ranks (_runtime/fuse_reductions.py); the printed steps say so and sum to the price."""
    model = cm.load_cost_model("H100")
    total = model.redistribute_seconds([4096, 4096], "float32", [2, 4], "P(sum)P(sum)", "RR")
    steps = model.redistribute_steps([4096, 4096], "float32", [2, 4], "P(sum)P(sum)", "RR")
    assert [(s["collective"], s["merged"]) for s in steps] == [("all_reduce", False), ("all_reduce", True)]
    assert steps[1]["seconds"] == 0.0
    assert steps[0]["seconds"] == pytest.approx(total, rel=1e-12)
    assert total == pytest.approx(model.collective_seconds("all_reduce", [8], 0, 64 * MiB), rel=1e-12)


def test_compute_seconds_roofline():
    model = cm.load_cost_model("H100")
    assert model.compute_seconds(0, 0, "bfloat16") == 0.0
    assert model.compute_seconds(1e8, 8e8, "float32") == pytest.approx(8e8 / (3.35e12 * 0.8) + 4e-6, rel=1e-12)


def test_hand_written_profile_loads_from_file_dict_and_text(tmp_path):
    # all_gather on 2 ranks on the line latency 100 us, bandwidth 1 GB/s.
    prof = {
        "version": 1,
        "topology": {"ranks_per_node": 8},
        "collectives": [
            {"collective": "all_gather", "group_size": 2, "bytes": 1e6, "seconds": 6e-4},
            {"collective": "all_gather", "group_size": 2, "bytes": 4e6, "seconds": 2.1e-3},
        ],
    }
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(prof))
    for calibration in (str(path), path, prof, json.dumps(prof)):
        model = cm.load_cost_model("cpu", calibration)
        (fit,) = model.fits
        assert fit["collective"] == "all_gather" and fit["link"] == "intra"
        assert fit["latency"] == pytest.approx(1e-4, rel=1e-9)
        assert fit["bandwidth"] == pytest.approx(1e9, rel=1e-9)
        assert model.topology["ranks_per_node"] == 8
        # 8 ranks on one node now: 7 * (100 us + 8 MiB / 1 GB/s).
        assert model.collective_seconds("all_gather", [8], 0, 64 * MiB) == pytest.approx(
            7 * (1e-4 + 8 * MiB / 1e9), rel=1e-9
        )


def test_calibration_script_output_loads(tmp_path):
    """The script's writer produces a profile the binding accepts (rows made up, no measurement)."""
    script = _calibrate_script()
    rows = [
        {"collective": name, "group_size": 2, "bytes": b, "seconds": 1e-4 + b / 2 / 1e9, "link": "intra"}
        for name in script.COLLECTIVES
        for b in script.DEFAULT_SIZES
    ]
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps(script.profile(rows, world=2, reps=3)))
    model = cm.load_cost_model("cpu", str(path))
    fits = {f["collective"]: f for f in model.fits}
    assert set(fits) == set(script.COLLECTIVES)
    assert fits["all_gather"]["bandwidth"] == pytest.approx(1e9, rel=1e-6)
    assert fits["all_gather"]["latency"] == pytest.approx(1e-4, rel=1e-6)


def test_unknown_device_lists_known_ones():
    known = re.escape(", ".join(cm.device_names()))
    with pytest.raises(ValueError, match=rf"unknown device 'V100' \(expected one of: {known}\)"):
        cm.load_cost_model("V100")
    with pytest.raises(ValueError, match="unknown device"):
        cm.device_profile("tpu")


@pytest.mark.parametrize(
    "calibration, field",
    [
        ("{not json", "not valid JSON"),
        ('{"device": {"peak_flops_bf16": "fast"}}', "calibration.device.peak_flops_bf16"),
        ('{"device": {"memory_bandwidth": -1}}', "calibration.device.memory_bandwidth"),
        ('{"topology": {"ranks_per_node": 0}}', "calibration.topology.ranks_per_node"),
        ('{"colectives": []}', "unknown field 'colectives'"),
        (
            '{"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 10, "seconds": -1}]}',
            r"calibration.collectives\[0\].seconds",
        ),
        (
            '{"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 10, "seconds": 1}]}',
            "two or more distinct sizes",
        ),
    ],
)
def test_malformed_calibration_raises_value_error(calibration, field):
    with pytest.raises(ValueError, match=field):
        cm.load_cost_model("H100", calibration)


@pytest.mark.parametrize("mesh", [[0], [2, -1], []])
def test_bad_mesh_sizes(mesh):
    model = cm.load_cost_model("H100")
    with pytest.raises(ValueError, match="mesh"):
        model.collective_seconds("all_reduce", mesh, 0, 1024)
    with pytest.raises(ValueError, match="mesh"):
        model.redistribute_seconds([8], "float32", mesh, "R", "R")


def test_other_bad_input():
    model = cm.load_cost_model("H100")
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        model.collective_seconds("broadcast", [8], 0, 1024)
    with pytest.raises(ValueError, match="mesh dim 2"):
        model.collective_seconds("all_gather", [8, 8], 2, 1024)
    with pytest.raises(ValueError, match="unknown dtype"):
        model.redistribute_seconds([8], "float13", [2], "S(0)", "R")
    with pytest.raises(ValueError):
        model.redistribute_seconds([8], "float32", [2], "S(1)", "R")  # shard dim out of range
    with pytest.raises(ValueError, match="bytes"):
        model.collective_seconds("all_gather", [8], 0, -5)
