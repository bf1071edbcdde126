"""Day-one rough edges (issue 29, part 6): what a new user meets first. Reference models at
a real size, one line saying why a plan replicates everything, the page's layer grid on the
model's stack of blocks, one-line errors for mistakes a user can fix, and a memory verdict
with one peak in one unit and an exit status."""
import dataclasses
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from torch_localmap import models
from torch_localmap import report as R
from torch_localmap._report import format_plan, memory_breakdown, memory_verdict
from torch_localmap.examples.mlp import make_example
from torch_localmap.plan import plan_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, env=None, module="torch_localmap", timeout=300):
    env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=timeout)


def _one_line_error(r, *needles):
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---- reference models at a real size ---------------------------------------------------------

def test_sizes_are_the_real_presets_and_an_unknown_size_names_the_known_ones():
    c8, c70 = models.sized_config("llama", "8b"), models.sized_config("llama", "70b")
    assert (c8.dim, c8.n_layers, c8.ffn_dim) == (4096, 32, 14336)
    assert (c70.dim, c70.n_layers, c70.n_heads, c70.ffn_dim) == (8192, 80, 64, 28672)
    assert models.sized_config("llama_tied", "8b").tie_embeddings
    assert models.sized_config("llama", "tiny") == models.tiny_config("llama")
    with torch.device("meta"):
        model, _ = models.build("llama", models.sized_config("llama", "8b"), batch=1)
    assert 8.0e9 < sum(p.numel() for p in model.parameters()) < 8.1e9  # Llama-3-8B: 8.03 B
    c405 = models.sized_config("llama", "405b")
    with torch.device("meta"):
        m70, _ = models.build("llama", c70, batch=1)
        m405, _ = models.build("llama", c405, batch=1)
    assert 70.4e9 < sum(p.numel() for p in m70.parameters()) < 70.7e9  # Llama-3-70B: 70.6 B
    assert 405.5e9 < sum(p.numel() for p in m405.parameters()) < 406.5e9  # Llama-3.1-405B: 405.9 B
    with pytest.raises(ValueError, match=r"no size '13b'; expected one of \['tiny', '8b', '70b', '405b'\]"):
        models.sized_config("llama", "13b")


def test_plan_command_refuses_an_unknown_size_in_one_line():
    r = cli("plan", "--model", "llama", "--size", "13b", "--mesh", "2x2")
    assert r.returncode == 2
    _one_line_error(r, "no size '13b'", "'8b'")


# ---- a plan that replicates everything says why ----------------------------------------------

def test_the_torchrun_examples_replicated_plan_says_why_from_the_cost_model():
    model, (x, y) = make_example(batch=64, d_in=64, hidden=128, d_out=32)  # examples/train.py's model
    plan = plan_module(model, (2, 2), (x, y), time_limit=2)
    assert set(plan.param_placements().values()) == {"RR"}
    why = R.replication_reason(plan)
    assert why is not None and "\n" not in why
    assert why.startswith("Everything is replicated: sharding costs more communication than the compute it saves")
    # The alternative it names is one explain() prices the same way, with the rest of the plan kept.
    name = why.split("the closest alternative, ", 1)[1].split(" ", 1)[0]
    ex = R.explain(plan, name)
    closest = min((a for a in ex["alternatives"] if a["possible"] and not a["chosen"]),
                  key=lambda a: a["delta"]["comm_s"] + a["delta"]["compute_s"])
    assert closest["delta"]["comm_s"] > -closest["delta"]["compute_s"]  # costs more than it saves
    assert why in format_plan(plan)


def test_a_plan_that_shards_gives_no_replication_reason():
    model, (x, y) = make_example(batch=4096, d_in=1024, hidden=4096, d_out=1024)
    plan = plan_module(model, (4,), (x, y), time_limit=3)
    assert set(plan.param_placements().values()) != {"R"}
    assert R.replication_reason(plan) is None
    assert "Everything is replicated" not in format_plan(plan)


# ---- the page's layer grid is the model's stack of blocks ------------------------------------

class _Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        # Four numbered siblings inside each block: more than the two blocks, but holding less.
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d), nn.Dropout(0.0))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class _TwoBlocks(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.blocks = nn.ModuleList([_Block(d), _Block(d)])
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x).sum()


def test_layer_grid_rows_are_the_blocks_not_a_blocks_inner_sequential():
    torch.manual_seed(0)
    plan = plan_module(_TwoBlocks(), (2,), (torch.randn(8, 16),), time_limit=2)
    grid = R.build_report(plan)["layers"]
    assert grid["rows"] == ["blocks.0", "blocks.1"]
    assert grid["columns"] == ["norm.weight", "norm.bias", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"]
    assert all(all(c is not None for c in row) for row in grid["cells"])


# ---- one line for a mistake a user can fix ---------------------------------------------------

FACTORY = """
import torch


def build(n_layers=2, dim=8):
    return torch.nn.Sequential(*[torch.nn.Linear(dim, dim) for _ in range(n_layers)]), (torch.randn(4, dim),)
"""


def test_a_typo_in_a_factory_argument_is_one_line_naming_the_arguments(tmp_path):
    (tmp_path / "day_one_factory.py").write_text(FACTORY)
    r = cli("plan", "--model", "day_one_factory:build", "--arg", "n_layer=2", "--mesh", "2x2",
            "--out", str(tmp_path / "p.json"), "--html", str(tmp_path / "p.html"), env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 2, r.stdout + r.stderr
    _one_line_error(r, "n_layer", "expected keyword arguments among ['n_layers', 'dim']")
    assert not (tmp_path / "p.json").exists()


def _train(*args, world_size="4"):
    env = {"RANK": "0", "WORLD_SIZE": world_size, "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1"}  # nothing may listen or connect: every check runs before the process group
    return cli(*args, module="torch_localmap.examples.train", env=env, timeout=120)


def test_train_example_names_a_mesh_that_does_not_match_the_world_size():
    r = _train("--mesh", "2x2", world_size="2")
    assert r.returncode == 1
    _one_line_error(r, "--mesh 2x2 has 4 ranks but torchrun started 2", "--mesh 2")
    _one_line_error(_train("--mesh", "2xtwo"), "--mesh: expected sizes joined by 'x'")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is right here")
def test_train_example_on_cuda_without_a_gpu_is_one_line():
    r = _train("--device", "cuda", "--mesh", "4")
    assert r.returncode == 1
    _one_line_error(r, "--device cuda: no CUDA GPU is visible", "expected --device cpu")


# ---- memory: one peak, one unit, a verdict and an exit status --------------------------------

def test_memory_lines_show_one_peak_in_one_unit_and_a_verdict():
    model, example = make_example(batch=8)
    plan = plan_module(model, (2,), example, time_limit=2)
    s = plan.summary
    fits, line = memory_verdict(s)
    assert fits and line.startswith("Memory: fits: estimated peak ") and "% of the limit of 67.06 GiB/rank" in line
    text = format_plan(plan)
    assert text.count("peak") == 2 and line in text and memory_breakdown(s) in text  # one peak figure, twice
    assert "estimated peak 128.75 KiB = parameters" in memory_breakdown(s)  # the peak's unit for every part
    # A peak above its limit (the estimate counts redistribution buffers the solve does not): peak,
    # excess and limit in the peak's unit, never a 0.00 that hides the figures.
    over = dataclasses.replace(s, memory_limit=s.memory.peak - 1000)
    fits, line = memory_verdict(over)
    assert not fits
    assert line.startswith("Memory: DOES NOT FIT: estimated peak 128.75 KiB/rank is 0.98 KiB over the limit of "
                           "127.78 KiB/rank"), line


def test_plan_command_exits_non_zero_with_one_line_when_memory_does_not_fit():
    r = cli("plan", "--model", "llama", "--mesh", "2", "--memory-limit-gib", "0.0001", "--no-progress",
            "--time-limit", "3")
    assert r.returncode == 2, r.stdout + r.stderr
    _one_line_error(r, "no plan fits the per-rank memory limit of 107374 bytes")
    ok = cli("plan", "--model", "llama", "--mesh", "2", "--no-progress", "--time-limit", "3")
    assert ok.returncode == 0, ok.stderr
    assert "Memory: fits: estimated peak" in ok.stdout and ok.stdout.count("peak") == 2
