"""`python -m torch_localmap versions`: what this installation actually uses."""
COMMAND = "versions"
HELP = "print the versions of Python, torch (its CUDA and NCCL), highspy and the HiGHS library the solver loaded"


def add_arguments(parser):
    pass


def _nccl_version(torch) -> str:
    if not torch.distributed.is_nccl_available():
        return "not built into this torch"
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:  # noqa: BLE001 -- a CUDA build on a machine without the driver
        return f"built in, version unreadable here ({type(e).__name__})"


def run(args) -> int:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch

    from .. import __version__
    from .._ops_on_import import SUPPORTED_TORCH
    from ..solver import HIGHS_UNAVAILABLE, highs_status

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    print(f"torch_localmap {__version__}")
    print(f"python {platform.python_version()} ({platform.machine()})")
    print(f"torch {torch.__version__} (supported: {SUPPORTED_TORCH})")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print(f"CUDA {torch.version.cuda or 'none (CPU build)'}; {gpus} GPU(s) visible"
          + (f" ({torch.cuda.get_device_name(0)})" if gpus else ""))
    print(f"NCCL {_nccl_version(torch)}")
    print(f"numpy {installed('numpy')}")
    st = highs_status()
    print(f"highspy {st['highspy'] or 'not installed'}")
    if st["loaded"]:
        print(f"HiGHS library {st['version']} loaded from {st['path']}")
    else:
        print(f"HiGHS library: {HIGHS_UNAVAILABLE} ({st['why']})")
    return 0
