"""Builds torch_localmap and its C++ extension torch_localmap._C.

The extension compiles the torch-free core (csrc/core), the libtorch layer
(csrc/torch: the torch.ops.localmap ops and their per-dispatch-key kernels) and
the pybind11 bindings (csrc/python) with ninja. Build with
`pip install --no-build-isolation -e .` so the installed torch is used.
"""
import glob
import os

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


def sources():
    found = glob.glob("csrc/core/**/*.cpp", recursive=True) + glob.glob("csrc/torch/**/*.cpp", recursive=True) + \
        glob.glob("csrc/python/*.cpp")
    return sorted(found)  # deterministic order, deterministic build


ext = CppExtension(
    name="torch_localmap._C",
    sources=sources(),
    include_dirs=[os.path.join(ROOT, "csrc")],
    extra_compile_args=["-O3", "-DNDEBUG", "-std=c++17", "-fvisibility=hidden"],
    libraries=["dl"],
)

setup(
    packages=find_packages(include=["torch_localmap", "torch_localmap.*"]),
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
