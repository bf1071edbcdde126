"""parallelize(model, mesh, example_inputs): plan, shard parameters, run SPMD."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.tensor import DTensor, distribute_tensor

from . import _torch_private
from .placements import spec_to_placements
from .plan import Plan, plan_module
from ._runtime.failures import failure_scope
from ._runtime.groups import DEFAULT_TIMEOUT, as_timeout, runtime_mesh
from ._spmd import RankProgram, local_example_inputs, trace_rank_program


def _check_mesh(mesh):
    from torch.distributed.device_mesh import DeviceMesh

    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"mesh must be a torch.distributed.device_mesh.DeviceMesh, got {type(mesh).__name__}")
    if dist.is_initialized() and mesh.size() != dist.get_world_size():
        raise ValueError(f"mesh has {mesh.size()} devices (shape {tuple(mesh.shape)}) but the world size is "
                         f"{dist.get_world_size()}; expected a mesh covering every rank")


class ParallelModule(nn.Module):
    """The module with DTensor parameters in the planned placements, running the plan.

    forward(*inputs) takes the same (global) inputs as the original module and returns its
    (global) outputs; backward leaves gradients on the DTensor parameters in their placements.
    """

    def __init__(self, module: nn.Module, mesh, plan: Plan, program: RankProgram, input_metas):
        super().__init__()
        # Adopt the module's children, parameters and buffers so names (and state_dict keys)
        # stay exactly those of the original module.
        for name, child in module.named_children():
            self.add_module(name, child)
        for name, p in module.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in module.named_buffers(recurse=False):
            self.register_buffer(name, b)
        self.mesh = mesh
        self.plan = plan
        self._program = program
        self._input_metas = input_metas
        self._roles = [(n.role, n.target) for _, n in plan.graph.placeholders()]

    def forward(self, *inputs):
        # Failures here (bad inputs included) are recorded for the other ranks, which are
        # about to wait for this one in a collective (runtime/failures.py).
        with failure_scope():
            return self._forward(*inputs)

    def _forward(self, *inputs):
        if len(inputs) != len(self._input_metas):
            raise ValueError(f"expected {len(self._input_metas)} inputs (as in example_inputs), got {len(inputs)}")
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self._input_metas)):
            if not isinstance(x, torch.Tensor) or tuple(x.shape) != shape or x.dtype != dtype:
                got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(f"input {i}: expected a tensor of shape {shape} and dtype {dtype} (the plan is "
                                 f"specialized to example_inputs), got {got}")
        args = []
        for role, target in self._roles:
            if role == "param":
                args.append(self.get_parameter(target).to_local())
            elif role == "buffer":
                b = self.get_buffer(target)
                args.append(b.to_local() if isinstance(b, DTensor) else b)
            elif role == "input":
                args.append(inputs[int(target)])
            # tangents are supplied by autograd in backward
        outs = self._program(*args)
        return outs[0] if len(outs) == 1 else outs


def parallelize(model: nn.Module, mesh, example_inputs, *, device="H100", time_limit=10.0, memory_limit=None,
                fixed_params=None, calibration=None, fallback_replicate=True,
                timeout=DEFAULT_TIMEOUT) -> ParallelModule:
    """Plans `model(*example_inputs)` (returning a scalar loss) on `mesh` and returns the
    parallel module. Parameters become DTensors in the planned placements; every rank must
    call this with the same model state and example inputs.

    `timeout` (seconds or a timedelta): how long a rank waits in one of the runtime's
    collectives before it gives up; when another rank failed inside the planned program,
    the error then names that rank (runtime/failures.py)."""
    _check_mesh(mesh)
    timeout = as_timeout(timeout)
    mesh = runtime_mesh(mesh, timeout)
    plan = plan_module(model, mesh, example_inputs, device=device, time_limit=time_limit,
                       memory_limit=memory_limit, fixed_params=fixed_params, calibration=calibration,
                       fallback_replicate=fallback_replicate, timeout=timeout)
    if plan.joint.buffer_names:
        raise NotImplementedError(f"modules with buffers ({plan.joint.buffer_names[:3]}) are not supported by "
                                  "parallelize yet")
    for name, spec in plan.param_placements().items():
        p = model.get_parameter(name)
        owner, _, leaf = name.rpartition(".")
        dt = distribute_tensor(p.detach(), mesh, spec_to_placements(spec, mesh_ndim=mesh.ndim))
        setattr(model.get_submodule(owner) if owner else model, leaf, nn.Parameter(dt, requires_grad=p.requires_grad))
    coord = mesh.get_coordinate()
    fake_mode = _torch_private.FakeTensorMode()
    fake_inputs = local_example_inputs(plan, fake_mode, coord)
    joint_spmd = trace_rank_program(plan, mesh, coord, fake_inputs)
    program = RankProgram(joint_spmd, plan.joint.num_fwd_outputs)
    metas = [(tuple(x.shape), x.dtype) for x in example_inputs]
    return ParallelModule(model, mesh, plan, program, metas)
