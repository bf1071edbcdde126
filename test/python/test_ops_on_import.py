"""The localmap ops exist once the package is imported (issue 29, part 2): whichever of
torch and torch_localmap is imported first, torch.ops.localmap lists and resolves them, and a
program saved with torch.export that holds them loads in a fresh process. Each check runs
in a fresh interpreter (the test process has long loaded the extension)."""
import importlib.util
import os
import subprocess
import sys

import pytest

# Where the package under test lives (the source tree, or site-packages when the tests run
# against an installed copy: tools/test_compat.sh); the fresh interpreters import it from there.
REPO = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch_localmap").origin))


def _python(code: str, *argv: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=180,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _registered() -> list:
    from torch_localmap import _C

    return _C.op_names()


def test_extension_reports_its_ops():
    assert _registered() == ["redistribute", "sharding_constraint"]


@pytest.mark.parametrize("imports", ["import torch, torch_localmap", "import torch_localmap; import torch"])
def test_ops_listed_after_import_in_either_order(imports):
    out = _python(f"{imports}; print(sorted(torch.ops.localmap)); print(torch.ops.localmap.redistribute)")
    listed, op = out.splitlines()
    assert listed == repr(_registered())
    assert op == "localmap.redistribute"


def test_package_import_alone_does_not_load_torch():
    assert _python("import sys, torch_localmap; print('torch' in sys.modules)") == "False"


_SAVE = """
import sys, torch, torch_localmap
class Pinned(torch.nn.Module):
    def forward(self, x):
        return torch.ops.localmap.sharding_constraint(x * 2, "R") + 1
torch.export.save(torch.export.export(Pinned(), (torch.randn(3, 4),)), sys.argv[1])
"""

_LOAD = """
import sys
{imports}
program = torch.export.load(sys.argv[1])
targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
assert "localmap.sharding_constraint.default" in targets, targets
print(program.module()(torch.ones(3, 4)).sum().item())
"""


def test_exported_program_with_localmap_ops_loads_in_a_fresh_process(tmp_path):
    path = str(tmp_path / "pinned.pt2")
    _python(_SAVE, path)
    assert _python(_LOAD.format(imports="import torch_localmap\nimport torch"), path) == "36.0"
    # Without the package the program's op is unknown: the check above is not vacuous.
    proc = subprocess.run([sys.executable, "-c", _LOAD.format(imports="import torch"), path], capture_output=True,
                          text=True, timeout=180, cwd=REPO)
    assert proc.returncode != 0
