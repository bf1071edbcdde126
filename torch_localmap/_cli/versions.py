"""`python -m torch_localmap versions`: what this installation actually uses."""
COMMAND = "versions"
HELP = "print the versions of Python, torch, highspy and the HiGHS library the solver loaded"


def add_arguments(parser):
    pass


def run(args) -> int:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch

    from .. import __version__
    from ..solver import HIGHS_UNAVAILABLE, highs_status

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    print(f"torch_localmap {__version__}")
    print(f"python {platform.python_version()} ({platform.machine()})")
    print(f"torch {torch.__version__} (CUDA {'available' if torch.cuda.is_available() else 'unavailable'})")
    print(f"numpy {installed('numpy')}")
    st = highs_status()
    print(f"highspy {st['highspy'] or 'not installed'}")
    if st["loaded"]:
        print(f"HiGHS library {st['version']} loaded from {st['path']}")
    else:
        print(f"HiGHS library: {HIGHS_UNAVAILABLE} ({st['why']})")
    return 0
