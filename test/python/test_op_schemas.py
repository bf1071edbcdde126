"""The op schemas the C++ rules decode arguments with (csrc/core/strategies/op_schemas.inc)
are torch's, for every op with a rule; the verifier's audit compares reads with torch."""
import importlib.util
import pathlib

import pytest

from torch_localmap import _C
from torch_localmap import _op_schemas
from torch_localmap import _verify as verify

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_op_schemas", ROOT / "tools/gen_op_schemas.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_checked_in_schemas_are_torchs():
    gen = _generator()
    _op_schemas.load_op_libraries()
    checked_in, now = gen.OUT.read_text(), gen.render(_C.ops_with_rules())
    if checked_in.splitlines()[0] == now.splitlines()[0]:  # the torch it was generated from
        assert checked_in == now, "op_schemas.inc is stale: rerun `PYTHONPATH=. python tools/gen_op_schemas.py`"
        return
    # Another supported torch (make test-compat): the C++ decodes with the checked-in
    # schemas, which stay right as long as this torch only appends arguments.
    old, new = checked_in.splitlines()[3:], now.splitlines()[3:]
    assert [line.split(",", 1)[0] for line in old] == [line.split(",", 1)[0] for line in new]
    for a, b in zip(old, new):
        args_a, args_b = a.rsplit("}", 1)[0], b.rsplit("}", 1)[0]
        assert args_b.startswith(args_a.rstrip("}")), f"this torch changed the arguments of an op with a rule:\n{a}\n{b}"


def test_schema_spellings():
    args = {a.name: a for a in _op_schemas.op_arguments("aten.sum.dim_IntList")}
    assert (args["dim"].type, args["keepdim"].type, args["keepdim"].default) == ("int[]?", "bool", "false")
    assert args["dtype"].kwarg_only and not args["dim"].kwarg_only
    assert _op_schemas.op_arguments("aten.leaky_relu.default")[1].default == "0.01"
    _op_schemas.load_op_libraries()
    flex = {a.name: a.type for a in _op_schemas.op_arguments("higher_order.flex_attention")}
    assert (flex["query"], flex["score_mod"], flex["block_mask"]) == ("Tensor", "Subgraph", "Any[]")
    assert _op_schemas.op_arguments("aten.no_such_op.default") is None
    assert _op_schemas.op_arguments("higher_order.no_such_op") is None


@pytest.mark.parametrize("record,expected", [
    (("aten.sum.dim_IntList", 2, "keepdim"), []),
    (("aten.sum.dim_IntList", 1, "keepdim"), ["aten.sum.dim_IntList: rule reads argument 'keepdim' at position 1; "
                                              "the schema's argument 1 is 'dim'"]),
    (("higher_order.flex_attention", 4, "block_mask"), []),
    (("aten.no_such_op.default", 0, "x"), ["aten.no_such_op.default: rule reads argument 'x' at position 0, "
                                           "but torch has no such op"]),
])
def test_audit_compares_reads_with_torch(record, expected):
    assert verify.schema_mismatches([record]) == expected
