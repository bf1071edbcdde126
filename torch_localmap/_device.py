"""Which device a rank computes on for a mesh, and the checks that go with it.

A DeviceMesh names a device type ("cpu" or "cuda"); on a CUDA mesh each rank uses the GPU
of its LOCAL_RANK (what torchrun sets), as FSDP2 and torchtitan do. Collectives run on
the mesh's process groups: gloo for CPU meshes, NCCL for CUDA meshes (gloo also moves CUDA
tensors, slowly; NCCL cannot move CPU tensors, so NCCL on a CPU mesh is refused here
rather than failing inside a collective).
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

__all__ = ["mesh_device", "check_mesh_backend", "check_tensor_device"]


def mesh_device(mesh) -> torch.device:
    """This rank's device on `mesh` (CUDA: LOCAL_RANK's GPU, made the current device)."""
    kind = mesh.device_type
    if kind == "cpu":
        return torch.device("cpu")
    if kind != "cuda":
        raise ValueError(f"mesh: device type {kind!r} is not supported (expected 'cpu' or 'cuda')")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ValueError("mesh: a 'cuda' device mesh but torch.cuda.is_available() is False on this rank; "
                         "build the mesh with init_device_mesh('cpu', ...) or run where GPUs are visible")
    local = os.environ.get("LOCAL_RANK")
    index = int(local) if local is not None else torch.cuda.current_device()
    if index >= count:
        raise ValueError(f"mesh: this rank's LOCAL_RANK is {index} but only {count} GPU(s) are visible "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); a CUDA "
                         f"mesh needs one GPU per local rank: run at most {count} ranks per node "
                         f"(torchrun --nproc-per-node {count})")
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def check_mesh_backend(mesh) -> None:
    """Refuses process groups that cannot move the mesh's tensors (NCCL on a CPU mesh)."""
    if not dist.is_initialized():
        return
    for d in range(mesh.ndim):
        backend = str(dist.get_backend(mesh.get_group(d))).lower()
        if mesh.device_type == "cpu" and "nccl" in backend and "gloo" not in backend:
            raise ValueError(f"mesh: dim {d} runs on an NCCL process group but the mesh is a 'cpu' mesh; NCCL "
                             f"moves CUDA tensors only. Use init_process_group('gloo') for CPU meshes, or "
                             f"init_device_mesh('cuda', ...) with NCCL")


def check_tensor_device(t: torch.Tensor, device: torch.device, what: str) -> None:
    """A tensor on another device than this rank's mesh device cannot take part in its program."""
    if t.device.type == "meta":
        return
    if t.device.type != device.type or (device.index is not None and t.device.index not in (None, device.index)):
        raise ValueError(f"{what} is on {t.device} but the device mesh computes on {device}; move it there "
                         f"first (x.to({str(device)!r}))")
