"""Makes PyPI's torchvision importable next to the CPU build of torch (test environment).

PyPI's torchvision wheels are CUDA builds. With the CPU torch their C++ ops cannot load,
and `import torchvision` still registers fake kernels for two of them (torchvision::nms,
torchvision::qnms), so the import fails -- and with it `import timm`, and `import
transformers` whenever torchvision is installed. The test environment needs both
libraries for the model zoo, not torchvision's ops.

`make install` copies this module into the virtual environment with a .pth line that
imports it at start-up. It only adds an import hook: right before torchvision is first
imported, and only when torch is a CPU build, it declares those two operator schemas
(without kernels). torchvision then imports; calling either op still fails, loudly.
"""
import importlib.abc
import sys


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            _declare_ops()
        return None  # the normal finders import it


def _declare_ops():
    import torch

    if torch.version.cuda is not None:  # a CUDA torch loads torchvision's own ops
        return
    for op in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # already defined
            pass


sys.meta_path.insert(0, _BeforeTorchvision())
