"""Tables written once: the device list and the solver options live in C++ tables, Python and
the CLI read them through the extensions, and the public names are `_PUBLIC`'s keys.

The first tests compare each Python view with the table as the C++ source writes it, so a
binding that drops or renames a column, or an extension built from older sources, fails here.
"""
import argparse
import os
import re
import subprocess
import sys

import pytest

import torch_localmap
from torch_localmap import cost_model
from torch_localmap._cli import calibrate as calibrate_cli
from torch_localmap._cli import plan as plan_cli
from torch_localmap.solver import solver_options

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _source(path: str) -> str:
    with open(os.path.join(REPO, path)) as f:
        return re.sub(r"//[^\n]*", "", f.read())  # comments may quote names too


def _block(text: str, start: str) -> str:
    """From `start` to the end of the brace-initialised table that follows it."""
    begin = text.index(start)
    return text[begin:text.index("\n};", begin)] if "\n};" in text[begin:] else text[begin:]


def _device_rows():
    """Device names in the order of kDevices in device_table.cpp."""
    return re.findall(r'\{\s*"([^"]+)"\s*,', _block(_source("csrc/core/device_table.cpp"), "kDevices[]"))


def _option_rows():
    """(name, field, lo, hi, integer, meaning) of each row of search_option_table()."""
    text = _source("csrc/core/solver/search_options.cpp")
    body = text[text.index("search_option_table()"):]
    body = body[:body.index("return table;")]
    starts = list(re.finditer(r'\{\s*"(\w+)"\s*,\s*&O::(\w+)\s*,\s*([^,]+),\s*([^,]+),\s*(true|false)\s*,', body))
    rows = []
    for i, m in enumerate(starts):
        rest = body[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(body)]
        meaning = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', rest))  # adjacent literals concatenate
        rows.append((m.group(1), m.group(2), float(m.group(3)), float(m.group(4)), m.group(5) == "true", meaning))
    return rows


def _option_defaults():
    """Field name -> default, from the SearchOptions struct in search_options.h."""
    text = _source("csrc/core/solver/search_options.h")
    struct = _block(text, "struct SearchOptions {")
    return {name: float(value) for name, value in re.findall(r"double (\w+) = ([^;]+);", struct)}


def test_python_device_list_equals_the_cpp_table():
    rows = _device_rows()
    assert rows, "no rows found in csrc/core/device_table.cpp"
    assert cost_model.device_names() == rows


def test_python_solver_options_equal_the_cpp_table():
    rows = _option_rows()
    defaults = _option_defaults()
    assert rows, "no rows found in csrc/core/solver/search_options.cpp"
    got = [(o["name"], o["default"], o["min"], o["max"], o["integer"], o["meaning"]) for o in solver_options()]
    want = [(name, defaults[field], lo, hi, integer, meaning) for name, field, lo, hi, integer, meaning in rows]
    assert got == want


def test_solve_lists_every_option_with_its_meaning():
    env = {**os.environ, "PYTHONPATH": REPO}
    out = subprocess.run([sys.executable, "-m", "torch_localmap", "solve", "--list-options"], capture_output=True,
                         text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    options = solver_options()
    assert len(lines) == len(options)
    for line, o in zip(lines, options):
        assert line.split()[0] == o["name"] and line.endswith(o["meaning"]), (line, o)


def _parser(cli):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser


@pytest.mark.parametrize("cli, option, extra", [(plan_cli, "--device", []),
                                                (calibrate_cli, "--table", ["--out", "x.json"])])
def test_cli_device_choices_are_the_table(cli, option, extra, capsys):
    parser = _parser(cli)
    names = cost_model.device_names()
    assert list(next(a for a in parser._actions if option in a.option_strings).choices) == names
    help_text = " ".join(parser.format_help().split())
    assert ", ".join(names) in help_text
    for name in names:  # the C++ lookup ignores case; so does the CLI, and it keeps the name as typed
        for spelled in (name, name.lower(), name.upper()):
            assert getattr(parser.parse_args([option, spelled, *extra]), option[2:]) == spelled
    with pytest.raises(SystemExit) as e:
        parser.parse_args([option, "V100", *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'V100'" in err and all(repr(n) in err for n in names)


def test_cli_parser_loads_torch_only_when_a_device_is_read():
    """Every command's parser is built on each call; `solve` must still run without torch."""
    code = ("import sys; from torch_localmap.__main__ import main; main(['solve', '--list-options']); "
            "print(sorted(m for m in ('torch', 'torch_localmap._C') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_public_names_are_written_once():
    assert torch_localmap.__all__ == sorted(torch_localmap._PUBLIC)
    namespace = {}
    exec("from torch_localmap import *", namespace)  # noqa: S102
    for name in torch_localmap.__all__:
        assert namespace[name] is getattr(torch_localmap, name)
        assert name in dir(torch_localmap)
