"""Device handling without a GPU: the CUDA branches run with torch.cuda's answers patched,
so every CUDA-specific check is exercised on CPU (the device is a parameter); real CUDA
runs skip cleanly when no GPU is visible."""
from __future__ import annotations

import types

import pytest
import torch

from torch_localmap import _device
from torch_localmap._calibrate import device_profile
from torch_localmap.cost_model import load_cost_model
from torch_localmap.launch import check_backend


def _mesh(device_type):
    return types.SimpleNamespace(device_type=device_type, ndim=1)


@pytest.fixture
def gpus(monkeypatch):
    """gpus(n, local_rank): pretend n GPUs are visible and this is local rank `local_rank`."""
    def set_(n, local_rank):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "set_device", lambda i: None)
        monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    return set_


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_mesh_device_is_the_local_ranks_device(device_type, gpus):
    gpus(4, 2)
    want = torch.device("cpu") if device_type == "cpu" else torch.device("cuda", 2)
    assert _device.mesh_device(_mesh(device_type)) == want


def test_cuda_mesh_without_enough_gpus_names_the_count(gpus):
    gpus(2, 3)
    with pytest.raises(ValueError, match=r"LOCAL_RANK is 3 but only 2 GPU.*--nproc-per-node 2"):
        _device.mesh_device(_mesh("cuda"))
    gpus(0, 0)
    with pytest.raises(ValueError, match="is_available"):
        _device.mesh_device(_mesh("cuda"))
    with pytest.raises(ValueError, match="'xpu' is not supported"):
        _device.mesh_device(_mesh("xpu"))


@pytest.mark.parametrize("tensor_device,mesh_device,ok", [
    ("cpu", torch.device("cpu"), True),
    ("cpu", torch.device("cuda", 0), False),
    ("meta", torch.device("cuda", 0), True),
])
def test_tensor_on_another_device_than_the_mesh(tensor_device, mesh_device, ok):
    t = torch.empty(2, device=tensor_device)
    if ok:
        _device.check_tensor_device(t, mesh_device, "input 0")
    else:
        with pytest.raises(ValueError, match=r"input 0 is on cpu but the device mesh computes on cuda:0"):
            _device.check_tensor_device(t, mesh_device, "input 0")


def test_nccl_on_a_cpu_mesh_is_refused(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
    mesh = types.SimpleNamespace(device_type="cpu", ndim=2, get_group=lambda d: object())
    with pytest.raises(ValueError, match="dim 0 runs on an NCCL process group but the mesh is a 'cpu' mesh"):
        _device.check_mesh_backend(mesh)
    mesh.device_type = "cuda"
    _device.check_mesh_backend(mesh)  # NCCL on a CUDA mesh is the normal case


@pytest.mark.parametrize("backend,gpus_visible,ok", [("gloo", 0, True), ("nccl", 4, True), ("nccl", 2, False),
                                                     ("mpi", 8, False)])
def test_launcher_backend_checks(backend, gpus_visible, ok):
    if ok:
        check_backend(backend, 4, cuda_devices=gpus_visible)
    else:
        with pytest.raises(ValueError, match="backend"):
            check_backend(backend, 4, cuda_devices=gpus_visible)


def test_redistribute_refuses_a_tensor_on_another_device_type():
    from torch_localmap._runtime.redistribute import redistribute_local

    mesh = types.SimpleNamespace(shape=(1,), device_type="cuda", get_coordinate=lambda: [0], ndim=1)
    with pytest.raises(ValueError, match="redistribute_local: the local tensor is on cpu"):
        redistribute_local(torch.zeros(2), (2,), mesh, "R", "R")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU visible"))])
def test_device_calibration_profile_loads_into_the_cost_model(device):
    table = "H100" if device == "cuda" else "cpu"
    profile = device_profile(torch.device(device), table, matmul_n=128, attn_shape=(1, 2, 64, 16),
                             copy_bytes=1 << 20, reps=2)
    dev = profile["device"]
    assert dev["peak_flops_fp32"] > 0 and dev["memory_bandwidth"] > 0 and dev["kernel_overhead_s"] > 0
    assert profile["meta"]["table"]["name"] == table
    model = load_cost_model(table, profile)
    default = load_cost_model(table)
    # the measured rate replaces the table's: a big fp32 matmul is priced from it
    flops = 2 * 4096 ** 3
    assert model.compute_seconds(flops, 0.0, "float32") == pytest.approx(
        max(flops / dev["peak_flops_fp32"], 0.0) + dev["kernel_overhead_s"], rel=1e-6)
    assert model.compute_seconds(flops, 0.0, "float32") != default.compute_seconds(flops, 0.0, "float32")
