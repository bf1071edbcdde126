"""`python -m torch_localmap <command>`: one module per command in torch_localmap/_cli/.

Each command module defines `COMMAND` (its name), `HELP`, `add_arguments(parser)` and
`run(args) -> int`.
"""
import argparse
import importlib
import os
import pkgutil
import sys

from . import _cli
from ._solver import MilpUnavailableError  # torch-free: `solve` never loads torch
from ._cli._common import one_line


def _commands():
    found = {}
    for info in sorted(pkgutil.iter_modules(_cli.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{_cli.__name__}.{info.name}")
        found[mod.COMMAND] = mod
    return found


def main(argv=None) -> int:
    commands = _commands()
    parser = argparse.ArgumentParser(prog="python -m torch_localmap", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in commands.items():
        mod.add_arguments(sub.add_parser(name, help=mod.HELP, description=mod.HELP))
    args = parser.parse_args(argv)
    try:
        return int(commands[args.command].run(args) or 0)
    except (ValueError, OSError, MilpUnavailableError) as e:  # bad input: one clear line, no traceback
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return 2


def entry_point() -> None:
    """`python -m torch_localmap` and the `torch-localmap` script: main(), then exit at once.

    Interpreter teardown with torch loaded takes about 0.5 s (unloading its libraries);
    a command's --time-limit covers the whole call, so once the output is flushed and the
    files are closed the process ends without it."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry_point()
