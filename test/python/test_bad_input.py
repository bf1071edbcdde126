"""Bad input gets a clear Python exception naming what is wrong and what was expected."""
import json

import pytest
import torch

import torch_localmap
from torch_localmap import _C
from torch_localmap.examples.mlp import make_example
from torch_localmap.plan import plan_module


@pytest.fixture
def fake_world():
    """A 4-rank fake process group: DeviceMesh objects without real processes."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=4, store=FakeStore())
    yield
    dist.destroy_process_group()


def test_mesh_size_must_equal_world_size(fake_world):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2,))  # 2 of the 4 ranks
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match=r"mesh has 2 devices .* world size is 4"):
        torch_localmap.parallelize(model, mesh, ex)


def test_mesh_must_be_a_device_mesh():
    model, ex = make_example(batch=8)
    with pytest.raises(TypeError, match="DeviceMesh"):
        torch_localmap.parallelize(model, (2, 2), ex)


def test_placement_count_must_match_mesh_ndim():
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match=r"1 placements but the mesh has 2 dims"):
        plan_module(model, (2, 2), ex, fixed_params={"layers.0.weight": "S(0)"})


def test_shard_dim_out_of_range():
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match=r"Shard\(2\) is out of range for a tensor with 2 dims"):
        plan_module(model, (2, 2), ex, fixed_params={"layers.0.weight": "S(2)R"})


def test_unknown_parameter_name():
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match="'nope', which is not a parameter"):
        plan_module(model, (2,), ex, fixed_params={"nope": "R"})


def test_example_input_count_mismatch():
    model, (x, _y) = make_example(batch=8)
    with pytest.raises(ValueError, match=r"example arguments: MLPRegression.forward\(x, y\) cannot take 1 positional"):
        plan_module(model, (2,), (x,))


def test_example_input_shape_mismatch():
    model, (x, y) = make_example(batch=8, d_in=32)
    with pytest.raises(ValueError, match=r"example inputs of shapes \[\(8, 31\), \(8, 16\)\]"):
        plan_module(model, (2,), (x[:, :31], y))


def test_mesh_with_zero_size():
    model, ex = make_example(batch=8)
    with pytest.raises(ValueError, match="expected every size >= 1"):
        plan_module(model, (2, 0), ex)


class _Cumulative(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.special.erfcx(self.lin(x)).sum()  # an op with no sharding rule


def test_op_without_strategy_names_op_and_node_and_suggests_local_map():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"aten\.special_erfcx.*node.*local_map"):
        plan_module(_Cumulative(), (2,), (x,), fallback_replicate=False)
    with pytest.warns(UserWarning, match=r"no sharding rule for aten\.special_erfcx"):
        plan = plan_module(_Cumulative(), (2,), (x,))
    assert "aten.special_erfcx.default" in plan.summary.fallback_ops


def test_cpp_errors_become_python_exceptions():
    with pytest.raises(ValueError, match="JSON parse error at line 1"):
        _C.plan("{not json", "")
    with pytest.raises(ValueError, match="missing field 'mesh'"):
        _C.plan("{}", "")
    with pytest.raises(ValueError, match="options.mode"):
        _C.plan('{"mesh": {"shape": [2]}, "nodes": [{"name": "output", "op": "output", "args": [[]]}]}',
                '{"mode": "fast"}')
    for host_seconds in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="host_seconds must be a finite number of seconds >= 0"):
            _C.plan(_nll_loss_ir(2), "", None, host_seconds)


def _nll_loss_ir(n_outputs: int) -> str:
    """IR JSON of one nll_loss_forward (which returns (output, total_weight)) with `n_outputs` outputs."""
    outputs = [{"shape": [], "dtype": "float32"}] * n_outputs
    nodes = [
        {"name": "logp", "op": "placeholder", "role": "input", "outputs": [{"shape": [4, 6], "dtype": "float32"}]},
        {"name": "target", "op": "placeholder", "role": "input", "outputs": [{"shape": [4], "dtype": "int64"}]},
        {"name": "nll", "op": "aten.nll_loss_forward.default",
         "args": [{"t": [0, 0]}, {"t": [1, 0]}, None, 1, -100], "kwargs": {}, "outputs": outputs},
        {"name": "output", "op": "output", "args": [[{"t": [2, 0]}]]},
    ]
    return json.dumps({"mesh": {"shape": [2]}, "nodes": nodes})


def test_node_with_the_wrong_number_of_outputs_is_a_python_exception_not_a_crash():
    # A 1-output nll_loss_forward once sent the loss rule past its row (heap corruption).
    with pytest.raises(ValueError, match=r"node 'nll' \(aten\.nll_loss_forward\.default\): has 1 output, "
                                         r"but the op returns 2"):
        _C.plan(_nll_loss_ir(1), "")
    _C.plan(_nll_loss_ir(2), "")  # the same node with its real outputs plans
