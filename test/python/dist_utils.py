"""Tests use the package's own gloo launcher (torch_localmap/launch.py)."""
from torch_localmap.launch import free_port, make_mesh, run_distributed  # noqa: F401


def full_value(t):
    """A parameter, gradient or output whole: a planned module's state is DTensors, or plain
    tensors where its plan replicates all of it (parallelize's replicated_state)."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def local_value(t):
    """This rank's piece of a DTensor, or the plain tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t
