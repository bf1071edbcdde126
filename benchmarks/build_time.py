"""Build time of the extension: clean build and no-op rebuild, in a temporary copy.

    python benchmarks/build_time.py

Targets (issue 2): clean build <= 4 min on 2 cores, no-op rebuild <= 15 s.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(src: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"], cwd=src, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, MAX_JOBS="2"))
    return time.perf_counter() - t0


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("build", ".git", "*.so", "__pycache__", ".venv*"))
        clean = build(src)
        noop = build(src)
    print(f"{'build':<22} {'seconds':>9} {'target':>8} {'ratio':>7}")
    print(f"{'clean (2 jobs)':<22} {clean:9.1f} {240:8d} {clean / 240:7.2f}")
    print(f"{'no-op rebuild':<22} {noop:9.1f} {15:8d} {noop / 15:7.2f}")
    return 0 if clean <= 240 and noop <= 15 else 1


if __name__ == "__main__":
    sys.exit(main())
