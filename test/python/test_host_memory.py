"""CPU rank programs keep freed host memory between steps (_runtime/host_memory.py): a step
that allocates and frees the same buffers as the one before touches no fresh page. Each
case runs in its own interpreter: the setting is process-wide."""
import subprocess
import sys

import pytest

# Each step allocates two 24 MiB buffers, writes them and frees them. With glibc's defaults,
# depending on the process's history, the top of the heap (48 MiB) is trimmed after every
# step and faulted back in by the next.
_STEPS = """
import resource, sys, torch
from torch_localmap._runtime.host_memory import keep_freed_host_memory
kept = keep_freed_host_memory()
def step():
    a = torch.empty(6 << 20); a.fill_(1.0)
    b = torch.empty(6 << 20); b.fill_(2.0)
    del a, b
for _ in range(6):  # the heap settles in the first few steps
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(env_value=None):
    import os

    env = dict(os.environ)
    env.pop("TLM_KEEP_HOST_MEMORY", None)
    if env_value is not None:
        env["TLM_KEEP_HOST_MEMORY"] = env_value
    out = subprocess.run([sys.executable, "-c", _STEPS], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    kept, faults = out.stdout.split()
    return kept == "True", int(faults)


def _glibc() -> bool:
    import ctypes

    return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "gnu_get_libc_version")


@pytest.mark.skipif(not _glibc(), reason="the setting is glibc's")
def test_steps_after_the_first_touch_no_fresh_page():
    kept, faults = _run()
    assert kept
    pages = 10 * 2 * (24 << 20) // 4096  # what trimming after every step would fault back in
    assert faults < pages // 100, f"{faults} minor faults over 10 steps ({pages} pages written)"


@pytest.mark.skipif(not _glibc(), reason="the setting is glibc's")
def test_the_environment_variable_leaves_malloc_alone():
    kept, _ = _run("0")
    assert not kept  # (glibc's own thresholds fault the pages back in on some runs, not on others)


def test_cpu_meshes_keep_host_memory_and_cuda_meshes_do_not():
    from torch_localmap._parallelize import _execution_options

    class Mesh:
        def __init__(self, device_type):
            self.device_type = device_type

    assert _execution_options(Mesh("cpu"), None, None, None, None, 25).keep_host_memory
    assert not _execution_options(Mesh("cuda"), None, None, None, None, 25).keep_host_memory
