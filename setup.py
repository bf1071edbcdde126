"""Builds torch_localmap and its two C++ extensions.

- torch_localmap._C compiles the torch-free core (csrc/core), the libtorch layer
  (csrc/torch: the torch.ops.localmap ops and their per-dispatch-key kernels) and
  the pybind11 bindings (csrc/python/*.cpp).
- torch_localmap._solver compiles the solver alone (csrc/core/solver, csrc/core/json,
  csrc/python/solver) and links no libtorch, so `solve` starts without loading torch.

Both build with ninja. Build with `pip install --no-build-isolation -e .` so the
installed torch is used (its headers also provide pybind11).
"""
import glob
import os

from setuptools import find_packages, setup
from setuptools import Extension
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources():
    found = glob.glob("csrc/core/**/*.cpp", recursive=True) + glob.glob("csrc/torch/**/*.cpp", recursive=True) + \
        glob.glob("csrc/python/*.cpp")
    return sorted(found)  # deterministic order, deterministic build


def solver_sources():
    found = glob.glob("csrc/core/solver/*.cpp") + ["csrc/core/json.cpp"] + glob.glob("csrc/python/solver/*.cpp")
    return sorted(found)


def torch_cxx_standard() -> str:
    """The C++ standard the installed torch's headers require: ATen.h refuses to compile below
    it (`#error C++20 or later ...` from torch 2.15 on, C++17 before). A feature check, not a
    version table: whatever release is installed says what it needs."""
    import re

    with open(os.path.join(include_paths()[0], "ATen", "ATen.h")) as f:
        found = re.search(r"#error C\+\+(\d+) or later", f.read())
    return f"-std=c++{found.group(1) if found else 17}"


# -g0 overrides the -g of Python's own CFLAGS: debug info for code that includes torch's headers doubles
# each file's compile time (64 -> 32 s for csrc/torch/ops/autograd/redistribute_kernel.cpp) and a
# release build never reads it. TLM_DEBUG_INFO=1 keeps it, for a build to debug.
COMPILE_ARGS = ["-O3", "-DNDEBUG", "-std=c++17", "-fvisibility=hidden"]  # csrc/core is C++17
if os.environ.get("TLM_DEBUG_INFO") != "1":
    COMPILE_ARGS.append("-g0")
# The extension that includes torch's headers is compiled in the standard they require.
TORCH_COMPILE_ARGS = [torch_cxx_standard() if a == "-std=c++17" else a for a in COMPILE_ARGS]


ext = CppExtension(
    name="torch_localmap._C",
    sources=sources(),
    include_dirs=[os.path.join(ROOT, "csrc")],
    extra_compile_args=TORCH_COMPILE_ARGS,
    libraries=["dl"],
)

# A plain Extension: no libtorch libraries. torch's include directory is used for its
# pybind11 headers only (nothing under csrc/core/solver or csrc/python/solver includes torch).
solver_ext = Extension(
    name="torch_localmap._solver",
    sources=solver_sources(),
    include_dirs=[os.path.join(ROOT, "csrc")] + include_paths()[:1],
    extra_compile_args=COMPILE_ARGS,
    libraries=["dl"],
    language="c++",
)

setup(
    packages=find_packages(include=["torch_localmap", "torch_localmap.*"]),
    ext_modules=[ext, solver_ext],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
