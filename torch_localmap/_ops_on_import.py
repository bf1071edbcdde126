"""torch.ops.localmap exists as soon as torch and torch_localmap are both imported.

The ops are registered by the extension `_C`, which links libtorch. Importing the package
must not load torch by itself (`python -m torch_localmap solve` counts interpreter
start-up against its time limit and never needs torch), so `_C` loads:
- at package import, when torch is already imported (`import torch, torch_localmap`);
- otherwise right after torch's own import finishes, whenever that happens (a one-shot
  import hook), so `import torch_localmap; import torch; torch.ops.localmap.redistribute`
  and `torch.export.load` of a program holding our ops work in a fresh process.
Uses the standard library only.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["load_ops_with_torch", "SUPPORTED_TORCH"]

# The torch releases the package supports (pyproject.toml says the same; tools/test_compat.sh
# tests both ends).
SUPPORTED_TORCH = ">=2.11,<2.16"


def load_ops_with_torch(package: str) -> None:
    """Loads `package`._C now if torch is imported, else right after torch is."""
    torch = sys.modules.get("torch")
    if torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", False):
        _load(package)
        return
    if torch is None and not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorchImport(package))
    # torch half-imported (our package imported from inside torch's own import): _C loads
    # on first use of a name that needs it (package __getattr__).


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Finds `torch` through the other finders and loads our extension after torch's module
    has executed. Removes itself on first use."""

    def __init__(self, package: str):
        self.package = package

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module
        package = self.package

        def exec_module(module):
            execute(module)
            _load(package)

        spec.loader.exec_module = exec_module
        return spec


def torch_outside_range(version: str) -> str | None:
    """A warning's text when `version` (torch.__version__) is outside SUPPORTED_TORCH (a torch
    that slipped past pip's check, e.g. installed later with --no-deps), else None. The bounds
    are read from SUPPORTED_TORCH, the one place they are written."""
    import re

    low = tuple(map(int, re.search(r">=(\d+)\.(\d+)", SUPPORTED_TORCH).groups()))
    high = tuple(map(int, re.search(r"<(\d+)\.(\d+)", SUPPORTED_TORCH).groups()))
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None or low <= tuple(map(int, found.groups())) < high:
        return None
    return (f"torch_localmap supports torch {SUPPORTED_TORCH}, but torch {version} is imported: untested here; "
            f"expected a torch of that range (pip install 'torch{SUPPORTED_TORCH}')")


def _load(package: str) -> None:
    """Loads the extension and names its ops in torch.ops.localmap, so listing the namespace
    (`list(torch.ops.localmap)`, which shows only names looked up before) shows them all."""
    torch = sys.modules["torch"]
    outside = torch_outside_range(torch.__version__)
    if outside:
        import warnings

        warnings.warn(outside, stacklevel=2)
    try:
        ext = importlib.import_module(f"{package}._C")
    except ImportError as e:  # most often: built against another torch than the one imported
        raise ImportError(f"torch_localmap's C++ extension does not load with torch {torch.__version__} "
                          f"({e}); it must be built against the torch it runs with (supported: torch "
                          f"{SUPPORTED_TORCH}): pip install --no-build-isolation -e . (or `make install`)") from e
    ops = torch.ops.localmap
    for name in ext.op_names():
        getattr(ops, name)
