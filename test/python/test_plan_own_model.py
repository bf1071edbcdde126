"""Planning a user's own model on a simulated mesh (issue 18): a factory built on the meta
device, from Python and from `python -m torch_localmap plan --model pkg.module:factory`;
the progress bar on long solves; the library's logger."""
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_localmap
from torch_localmap import _progress
from torch_localmap._factory import build_from_factory, parse_input_spec
from torch_localmap.plan import Plan

USER_MODULE = textwrap.dedent('''
    import torch, torch.nn as nn

    class Net(nn.Module):
        def __init__(self, dim, layers):
            super().__init__()
            self.emb = nn.Embedding(1000, dim)
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
                                        for _ in range(layers))
            self.head = nn.Linear(dim, 1000, bias=False)

        def forward(self, ids):
            x = self.emb(ids)
            for block in self.blocks:
                x = x + block(x)
            return nn.functional.cross_entropy(self.head(x).flatten(0, 1), ids.flatten())

    def build(dim=64, layers=2):
        return Net(dim, layers)

    def build_with_inputs(dim=64, layers=2):
        return Net(dim, layers), (torch.zeros(8, 16, dtype=torch.long),)
''')


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    (tmp_path / "user_models_issue18.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_factory_is_built_on_the_meta_device_and_planned(user_dir):
    # 4 layers of 8192 x 32768 weights: 8.6 GB in float32, nothing allocated on meta.
    module, args, kwargs = build_from_factory("user_models_issue18:build", ["8x16:int64"], dim=8192, layers=4)
    assert all(p.is_meta for p in module.parameters()) and args[0].is_meta and kwargs == {}
    assert sum(p.numel() for p in module.parameters()) * 4 > 8e9
    plan = torch_localmap.plan_factory("user_models_issue18:build_with_inputs", (2, 2), time_limit=3,
                                       factory_kwargs={"layers": 3})
    assert set(plan.param_placements()) == {n for n, _ in build_from_factory(
        "user_models_issue18:build_with_inputs", layers=3)[0].named_parameters()}
    assert [c["name"] for c in plan.module_calls if c["depth"] == 1] == ["emb", "blocks.0", "blocks.1", "blocks.2",
                                                                          "head"]


@pytest.mark.parametrize("spec, expected", [("16x8192:int64", ((16, 8192), torch.int64)),
                                            ("4x8", ((4, 8), torch.float32)),
                                            ("scalar:bfloat16", ((), torch.bfloat16))])
def test_input_specs(spec, expected):
    t = parse_input_spec(spec)
    assert (tuple(t.shape), t.dtype) == expected and t.is_meta


@pytest.mark.parametrize("factory, inputs, match", [
    ("no_colon", None, "expected 'package.module:function'"),
    ("no_such_module_xyz:build", None, "cannot import 'no_such_module_xyz'"),
    ("user_models_issue18:missing", None, "has no attribute 'missing'"),
    ("user_models_issue18:nn", None, "is a module, expected a callable"),
    ("user_models_issue18:build", None, "without example inputs"),
    ("user_models_issue18:build", ["16xx"], "expected sizes joined by 'x'"),
    ("user_models_issue18:build", ["16:float99"], "'float99' is not a torch dtype"),
])
def test_bad_factories_and_inputs_are_clear_errors(user_dir, factory, inputs, match):
    with pytest.raises(ValueError, match=match):
        build_from_factory(factory, inputs)


def test_cli_plans_a_factory_and_writes_plan_html_and_report(user_dir):
    out, html, rep = user_dir / "plan.json", user_dir / "plan.html", user_dir / "report.json"
    r = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--model", "user_models_issue18:build",
                        "--inputs", "8x16:int64", "--arg", "layers=3", "--arg", "dim=32", "--mesh", "2x2",
                        "--mesh-dim-names", "dp,tp", "--time-limit", "3", "--graph", "1000",
                        "--explain", "blocks.1.0.weight", "--out", str(out), "--html", str(html),
                        "--report-json", str(rep)],
                       capture_output=True, text=True, cwd=user_dir, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(user_dir)] + sys.path)})
    assert r.returncode == 0, r.stderr
    for name in ("blocks.0 (Sequential)", "blocks.2 (Sequential)", "head (Linear)", "backward compute",
                 "differentiates", "blocks.1.0.weight: node", "chosen"):
        assert name in r.stdout, name
    plan = Plan.load(out)
    assert plan.mesh_shape == (2, 2) and plan.mesh_dim_names == ("dp", "tp")
    assert any(c["name"] == "blocks.2" for c in plan.module_calls)
    doc = json.loads(rep.read_text())
    assert [m["name"] for m in doc["modules"]][:3] == ["", "emb", "blocks.0"]  # a ModuleList is never called
    assert "<svg" in html.read_text() and r.stderr == ""  # no progress bar when stderr is not a terminal


def test_cli_writes_plan_json_and_html_by_default_for_a_factory(user_dir):
    r = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--model", "user_models_issue18:build_with_inputs",
                        "--mesh", "4", "--time-limit", "2", "--depth", "0"],
                       capture_output=True, text=True, cwd=user_dir, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(user_dir)] + sys.path)})
    assert r.returncode == 0, r.stderr
    assert Plan.load(user_dir / "plan.json").mesh_shape == (4,)
    assert (user_dir / "plan.html").read_text().startswith("<!DOCTYPE html>")
    assert "plan written to plan.json" in r.stdout and "HTML report written to plan.html" in r.stdout


def test_cli_factory_errors_are_one_line(user_dir):
    r = subprocess.run([sys.executable, "-m", "torch_localmap", "plan", "--model", "user_models_issue18:build",
                        "--mesh", "2x2"], capture_output=True, text=True, cwd=user_dir, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(user_dir)] + sys.path)})
    assert r.returncode == 2 and r.stderr.startswith("error: model factory returned a module without example inputs")


# ---- progress ----------------------------------------------------------------------------

def test_progress_bar_shows_cost_bound_and_gap_after_the_delay(monkeypatch):
    import time

    monkeypatch.setattr(_progress, "DELAY", 0.2)
    out = io.StringIO()
    with _progress.SolveProgress(2.0, enabled=True, file=out) as bar:
        bar.update(0.1, 4.0e-3, 3.0e-3)
        time.sleep(0.7)
    text = out.getvalue()
    assert "cost 4 ms, bound 3 ms, gap 25.00%" in text and "/2.0 s" in text
    last = text.strip().split("\r")[-1]  # the solve ended at 0.7 s of its 2 s: drawn full, over 0.7 s
    assert "100%|" in last and "/2.0 s" not in last, last


def test_short_solves_and_non_terminals_get_no_bar(monkeypatch):
    out = io.StringIO()
    with _progress.SolveProgress(10.0, enabled=True, file=out) as bar:  # ends before DELAY (2 s)
        bar.update(0.1, 1.0, 0.5)
    assert out.getvalue() == ""
    assert _progress.SolveProgress(10.0, file=io.StringIO()).enabled is False  # auto: not a terminal
    with pytest.raises(ValueError, match="expected True, False or None"):
        _progress.SolveProgress(1.0, enabled="yes")


def test_plan_module_drives_the_bar_from_the_solver(monkeypatch, capfd):
    from torch_localmap import models
    from torch_localmap.plan import plan_module

    monkeypatch.setattr(_progress, "DELAY", 0.0)
    model, example = models.build("llama", batch=2)
    plan = plan_module(model, (2, 2), example, time_limit=2, progress=True)
    err = capfd.readouterr().err
    assert "torch_localmap plan" in err and "gap" in err
    assert plan.summary.solver_progress  # the same points the bar showed


def _run_on_a_terminal(cmd, timeout=120) -> str:
    """Runs `cmd` with stderr on a pseudo-terminal of 140 columns; returns what it drew there."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    p.kill()
    p.wait()
    os.close(master)
    return out.decode(errors="replace")


def test_solve_command_draws_the_bar_on_a_terminal():
    from torch_localmap.solver import iopddl_suite_dir

    path = os.path.join(iopddl_suite_dir(), "asplos-2025-iopddl-K.json.gz")
    if not os.path.isfile(path):
        pytest.skip("IOPDDL suite not found (set TLM_SHARED_DIR)")
    drawn = _run_on_a_terminal([sys.executable, "-m", "torch_localmap", "solve", path, "--time-limit", "4"])
    assert "asplos-2025-iopddl-K: 100%|" in drawn and ", gap " in drawn and "bound " in drawn, drawn[-500:]


def test_a_process_forked_right_after_a_plan_plans_again_and_exits():
    # The plan call frees its tables on a background thread (csrc/core/background_release.h).
    # A child forked while that may run (a data loader's worker) must neither wait for its
    # parent's thread when it plans nor at its own normal exit.
    code = textwrap.dedent("""
        import os, sys, torch
        from torch_localmap.plan import plan_module
        args = ((2,), (torch.randn(4, 8),))
        plan_module(torch.nn.Linear(8, 8), *args, time_limit=1)
        pid = os.fork()
        if pid == 0:
            plan_module(torch.nn.Linear(8, 8), *args, time_limit=1)
            sys.exit(7)  # a normal exit: static destructors run in the child
        _, status = os.waitpid(pid, 0)
        plan_module(torch.nn.Linear(8, 8), *args, time_limit=1)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "child 7" in done.stdout, done.stderr[-2000:]


# ---- logging -----------------------------------------------------------------------------

def _plan_in_subprocess(env):
    code = ("import torch_localmap, torch\n"
            "from torch_localmap.plan import plan_module\n"
            "plan_module(torch.nn.Linear(8, 8), (2,), (torch.randn(4, 8),), time_limit=1)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != "TORCH_LOCALMAP_LOG"}, **env})


def test_logging_is_silent_by_default_and_on_with_the_env_var():
    quiet = _plan_in_subprocess({})
    assert quiet.returncode == 0 and "torch_localmap" not in quiet.stderr, quiet.stderr
    loud = _plan_in_subprocess({"TORCH_LOCALMAP_LOG": "info"})
    assert loud.returncode == 0, loud.stderr
    assert "[torch_localmap._trace INFO" in loud.stderr and "[torch_localmap.plan INFO" in loud.stderr
    assert "planned 7 nodes on mesh 2" in loud.stderr or "planned" in loud.stderr
    bad = _plan_in_subprocess({"TORCH_LOCALMAP_LOG": "chatty"})
    assert bad.returncode != 0 and "TORCH_LOCALMAP_LOG='chatty': expected one of debug, info" in bad.stderr
