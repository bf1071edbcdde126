"""The README's launch path: torchrun (env:// rendezvous) runs the example training script."""
import os
import re
import subprocess
import sys

from torch_localmap.launch import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_torchrun_trains_the_example_on_four_cpu_ranks():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "-m", "torch_localmap.examples.train", "--steps", "3"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=240,
                       env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    losses = [float(x) for x in re.findall(r"step \d+: loss ([0-9.]+)", r.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0], r.stdout
    # Its MLP is tiny: every parameter replicated, and rank 0 says why in one line (issue 29).
    assert len(re.findall(r"^Everything is replicated: sharding costs more communication than the compute it "
                          r"saves; the closest alternative, \S+ \(aten\.", r.stdout, re.M)) == 1, r.stdout


def test_the_script_refuses_to_run_without_torchrun():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    r = subprocess.run([sys.executable, "-m", "torch_localmap.examples.train"], capture_output=True, text=True,
                       cwd=REPO, timeout=120, env=env)
    assert r.returncode != 0 and "start this script with torchrun" in r.stderr
