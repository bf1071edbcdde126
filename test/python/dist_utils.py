"""Tests use the package's own gloo launcher (torch_localmap/launch.py)."""
from torch_localmap.launch import free_port, make_mesh, run_distributed  # noqa: F401
