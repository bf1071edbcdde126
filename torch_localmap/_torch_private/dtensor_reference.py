"""DTensor's sharding propagator as a reference, for the cross-check test and the strategy
enumeration benchmark (never on the planner's path).

Private torch APIs, written against torch 2.13 and used only here:
torch.distributed.tensor._sharding_prop / _op_schema / _dtensor_spec,
torch.distributed.tensor._ops.single_dim_strategy, placement_types (_StridedShard, MaskPartial),
torch.testing._internal.distributed.fake_pg. If an upgrade breaks one, this is the file to change.
"""
from __future__ import annotations

import torch


def dtensor_fake_mesh(mesh_shape):
    """A DeviceMesh of `mesh_shape` for strategy queries only, on the "fake" process group
    (torch.testing._internal.distributed.fake_pg, 2.13): no communication, any world size."""
    import math

    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    n = math.prod(mesh_shape)
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1024)
    if n > dist.get_world_size():
        raise ValueError(f"mesh {list(mesh_shape)} needs {n} ranks; the fake group has {dist.get_world_size()}")
    return DeviceMesh("cpu", torch.arange(n).reshape(tuple(mesh_shape)), _init_backend=False)


def dtensor_placement_str(p) -> str:
    """Our spelling of a torch placement; placements we do not model keep a distinct name."""
    from torch.distributed.tensor import placement_types as pt

    name = type(p).__name__
    if isinstance(p, pt.Replicate):
        return "R"
    if name == "_StridedShard":
        return f"_StridedShard({p.dim},sf={p.split_factor})"
    if isinstance(p, pt.Shard):
        return f"S({p.dim})"
    if name == "MaskPartial":  # vocab-parallel embedding: a sum partial plus an index mask
        return "MaskPartial"
    if isinstance(p, pt.Partial):
        if name != "Partial":
            return f"{name}({p.reduce_op})"
        return f"P({p.reduce_op})"
    return name


def dtensor_placement(s: str):
    from torch.distributed.tensor import Partial, Replicate, Shard

    if s == "R":
        return Replicate()
    if s.startswith("S("):
        return Shard(int(s[2:-1]))
    if s.startswith("P("):
        return Partial(s[2:-1])
    raise ValueError(f"unknown placement '{s}'")


def dtensor_has_rule(op) -> bool:
    from torch.distributed.tensor import DTensor

    prop = DTensor._op_dispatcher.sharding_propagator
    return op in prop.op_strategy_funcs or op in prop.op_single_dim_strategy_funcs


def dtensor_op_strategies(op, args, kwargs, tensor_metas, input_choices, mesh):
    """All (input specs, output specs) DTensor's strategy function returns for `op`.

    `args`/`kwargs` hold ints i in place of tensor arguments (wrapped as `_TensorSlot(i)`),
    `tensor_metas[i]` = (shape, dtype) and `input_choices[i]` = the placement tuples the
    producer of input i offers (an OpStrategy with one OpSpec per choice, the way
    autoparallel feeds DTensor; ops with single-dim rules take the first choice only).
    Specs are returned in our spelling ("S(0)R").
    """
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor._op_schema import OpSchema, OpSpec, OpStrategy, TupleStrategy
    from torch.distributed.tensor._ops.single_dim_strategy import _expand_single_dim_strategy_to_mesh

    prop = DTensor._op_dispatcher.sharding_propagator

    def spec(i, placements):
        shape, dtype = tensor_metas[i]
        stride = torch.empty(shape, device="meta").stride()
        return DTensorSpec(mesh, tuple(dtensor_placement(p) for p in placements),
                           TensorMeta(torch.Size(shape), stride, dtype))

    def fill(a, make):
        if isinstance(a, _TensorSlot):
            return make(a.index)
        if isinstance(a, (list, tuple)):
            return type(a)(fill(x, make) for x in a)
        return a

    single_dim = op in prop.op_single_dim_strategy_funcs

    def as_strategy(i):
        # single-dim rules take exactly one input spec each (the eager dispatch path): the
        # expansion enumerates every mesh-dim combination itself, so the first choice is used
        choices = input_choices[i][:1] if single_dim else input_choices[i]
        return OpStrategy([OpSpec(spec(i, c)) for c in choices])

    schema_info = prop.op_to_schema_info.get(op) or prop.op_to_schema_info_for_single_dim_strategy.get(op)
    spec_schema = OpSchema(op, fill(tuple(args), lambda i: spec(i, input_choices[i][0])),
                           {k: fill(v, lambda i: spec(i, input_choices[i][0])) for k, v in kwargs.items()},
                           schema_info=schema_info)
    strat_args = fill(tuple(args), as_strategy)
    # lists of tensors are TupleStrategy in DTensor's wrapped schema
    strat_args = tuple(TupleStrategy(list(a)) if isinstance(a, list) and a and all(isinstance(x, OpStrategy) for x in a)
                       else a for a in strat_args)
    strat_schema = OpSchema(op, strat_args, {k: fill(v, as_strategy) for k, v in kwargs.items()},
                            schema_info=schema_info)
    if single_dim:
        out_meta = prop._propagate_tensor_meta_non_cached(spec_schema)
        fn = _expand_single_dim_strategy_to_mesh(mesh, strat_schema, prop.op_single_dim_strategy_funcs[op], out_meta)
        result = fn(op, strat_schema.args_meta, strat_schema.kwargs_meta)
    elif op in prop.op_strategy_funcs:
        result = prop.op_strategy_funcs[op](strat_schema)
    else:
        raise KeyError(f"DTensor has no strategy function for {op}")
    return _flatten_strategy(result)


class _TensorSlot:
    """Marks where tensor argument `index` sits in an op's args for dtensor_op_strategies."""

    def __init__(self, index: int):
        self.index = index

    def __repr__(self):
        return f"_TensorSlot({self.index})"


def _flatten_strategy(result):
    from torch.distributed.tensor._op_schema import OpStrategy, TupleStrategy

    def specs_str(specs):
        if specs is None:
            return None
        if not isinstance(specs, (list, tuple)):
            specs = [specs]
        return ["".join(dtensor_placement_str(p) for p in s.placements) if s is not None else None for s in specs]

    if isinstance(result, OpStrategy):
        out = []
        for s in result.strategies:
            outs = specs_str(s.output_specs)
            ins = specs_str(s.input_specs) if s.input_specs is not None else None
            out.append((ins, outs))
        return out
    if isinstance(result, TupleStrategy):  # one OpStrategy per output (foreach-like / multi-output)
        return [("tuple", [_flatten_strategy(c) for c in result.children])]
    raise TypeError(f"unexpected strategy type {type(result).__name__}")
