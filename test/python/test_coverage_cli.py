"""`python -m torch_localmap coverage`: per-op counts and rule families, loud fallbacks."""
import re

import pytest
import torch

from torch_localmap._cli import coverage


def _run(capsys, *argv):
    from torch_localmap.__main__ import main

    code = main(["coverage", *argv])
    return code, capsys.readouterr().out.strip().splitlines()


def test_zoo_model_coverage_lists_every_op_with_its_rule(capsys):
    code, lines = _run(capsys, "--model", "zoo:gpt2", "--mesh", "4x2")
    assert code == 0
    rows = {parts[0]: parts[1:] for parts in (line.split() for line in lines[1:-1])}
    assert rows["aten.mm.default"][1] == "matmul" and int(rows["aten.mm.default"][0]) > 0
    assert "aten.native_layer_norm_backward.default" in rows  # the joint graph: backward ops too
    m = re.fullmatch(r"(\d+) ops, (\d+) nodes, 0 without a rule", lines[-1])
    assert m and int(m.group(1)) == len(rows)


def _model_with_an_unruled_op():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            return torch.special.zeta(x @ self.w, 2.0).sum()  # no sharding rule for zeta

    return M(), (torch.rand(4, 8),)


def test_fallback_ops_are_listed_and_fail_the_command(capsys, monkeypatch):
    import sys
    import types

    mod = types.ModuleType("coverage_fixture")
    mod.make = _model_with_an_unruled_op
    monkeypatch.setitem(sys.modules, "coverage_fixture", mod)
    with pytest.warns(UserWarning, match="no sharding rule for aten.special_zeta"):  # loud at plan time too
        code, lines = _run(capsys, "--model", "coverage_fixture:make", "--mesh", "2x2", "--eval")
    assert code == 1
    assert any(line.startswith("aten.special_zeta") and "FALLBACK" in line for line in lines)
    assert "aten.special_zeta" in lines[-1]


def test_bad_model_spec_names_what_was_expected():
    with pytest.raises(ValueError, match="package.module:factory"):
        coverage.load_model("no_such_module_xyz:make")
