"""torch.compile(model, backend="localmap", options={"mesh": mesh}).

Registered through the `torch_dynamo_backends` entry point (pyproject.toml), so it
works right after `pip install`. The backend plans the joint graph that aot_autograd
traces ("compile" mode: every graph input arrives replicated and every output leaves
replicated, so the compiled module computes exactly what the eager module computes),
rewrites it into this rank's SPMD program with collectives, and hands that to
aot_autograd's partitioner.
"""
from __future__ import annotations

import torch


def _nop_compiler(gm, _example_inputs):
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def localmap_backend(gm: torch.fx.GraphModule, example_inputs, options=None, **kwargs):

    from .plan import plan_joint
    from ._spmd import trace_rank_program
    from ._trace import JointGraph
    from . import _torch_private

    options = dict(options or {})
    mesh = options.pop("mesh", None)
    on_plan = options.pop("on_plan", None)  # callback(Plan), e.g. to print or test the plan
    if mesh is None:
        raise ValueError('backend "localmap" needs options={"mesh": DeviceMesh}')
    from ._runtime.groups import DEFAULT_TIMEOUT, as_timeout, runtime_mesh

    options["timeout"] = as_timeout(options.get("timeout", DEFAULT_TIMEOUT))
    mesh = runtime_mesh(mesh, options["timeout"])
    known = {"device", "time_limit", "memory_limit", "calibration", "fallback_replicate", "seed", "timeout"}
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"unknown localmap backend options {sorted(unknown)} "
                         f"(expected mesh, on_plan, {', '.join(sorted(known))})")

    def partition(joint_module, joint_inputs, *, num_fwd_outputs, **_kw):
        from ._local_map_glue import node_extra

        joint = JointGraph(gm=joint_module, num_fwd_outputs=num_fwd_outputs, param_names=[], buffer_names=[])
        plan = plan_joint(joint, mesh, node_extra=node_extra, mode="compile", **options)
        if on_plan is not None:
            on_plan(plan)
        coord = mesh.get_coordinate()
        # aot_autograd hands (primals, tangents); the joint graph takes them flat.
        flat_inputs = _torch_private.pytree.tree_leaves(joint_inputs)
        spmd = trace_rank_program(plan, mesh, coord, flat_inputs)
        return _torch_private.partition_joint(spmd, num_fwd_outputs)

    from ._local_map_glue import use_mesh

    with use_mesh(mesh):  # aot_autograd traces here; local_map regions default to this mesh
        return _torch_private.aot_autograd_backend(fw_compiler=_nop_compiler, bw_compiler=_nop_compiler, partition_fn=partition)(
            gm, example_inputs)
