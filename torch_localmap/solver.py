"""`torch_localmap.solve`: the C++ strategy solver (csrc/core/solver) from Python.

Thin glue: files are read (and gunzipped) here, parsed once in C++, solved in
one call. The HiGHS library that exact mode uses comes from the `highspy` wheel.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
from typing import Callable, Optional, Union

from . import _C

InfeasibleError = _C.InfeasibleError
SolverProblem = _C.SolverProblem


def iopddl_suite_dir() -> str:
    """Where the IOPDDL instances are: $TLM_SHARED_DIR/iopddl, else shared/iopddl beside the
    repo (or beside one of its parents, for worktrees). Used by the benchmark and the tests."""
    if os.environ.get("TLM_SHARED_DIR"):
        return os.path.join(os.environ["TLM_SHARED_DIR"], "iopddl")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    up = repo
    for _ in range(3):
        candidate = os.path.join(os.path.dirname(up), "shared", "iopddl")
        if os.path.isdir(candidate):
            return candidate
        up = os.path.dirname(up)
    return os.path.join(os.path.dirname(repo), "shared", "iopddl")


def _register_highs() -> None:
    try:
        import highspy  # noqa: PLC0415  (optional: only exact mode needs it)
    except ImportError:
        return
    _C.set_highs_library(os.path.dirname(highspy.__file__))


_register_highs()


@dataclasses.dataclass(frozen=True)
class SolveResult:
    solution: list  # one strategy index per node
    cost: int  # exact cost of `solution` (evaluated independently of the search)
    bound: float  # proven lower bound on the optimum
    gap: float  # (cost - bound) / max(|cost|, 1)
    seconds: float
    status: str  # "optimal" | "time_limit" | "stalled"
    optimal: bool


ProblemLike = Union[str, os.PathLike, bytes, dict, SolverProblem]


def _text_of(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":  # gzip magic: contest files are shipped compressed
        data = gzip.decompress(data)
    return data.decode("utf-8")


def load_problem(problem: ProblemLike) -> SolverProblem:
    """A parsed problem from a path (.json or .json.gz), JSON text, bytes or a dict."""
    if isinstance(problem, SolverProblem):
        return problem
    if isinstance(problem, dict):
        return SolverProblem.from_json(json.dumps(problem))
    if isinstance(problem, bytes):
        return SolverProblem.from_json(_text_of(problem))
    if isinstance(problem, str) and problem.lstrip()[:1] in ("{", "["):
        return SolverProblem.from_json(problem)
    if isinstance(problem, (str, os.PathLike)):
        path = os.fspath(problem)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"problem file not found: {path}")
        with open(path, "rb") as f:
            return SolverProblem.from_json(_text_of(f.read()))
    raise TypeError(f"problem must be a path, JSON text, bytes or dict; got {type(problem).__name__}")


def solve(
    problem: ProblemLike,
    time_limit: float = 60.0,
    seed: int = 0,
    threads: int = 2,
    exact: bool = False,
    progress: Optional[Callable[[float, int, float], None]] = None,
) -> SolveResult:
    """Picks one strategy per node minimising node + edge costs under the memory limit.

    Raises ValueError for malformed problems and InfeasibleError (a ValueError)
    naming the conflicting constraints when no solution exists.
    """
    p = load_problem(problem)
    r = p.solve(time_limit=float(time_limit), seed=int(seed), threads=int(threads), exact=bool(exact),
                progress=progress)
    return SolveResult(
        solution=list(r["solution"]),
        cost=int(r["cost"]),
        bound=float(r["bound"]),
        gap=float(r["gap"]),
        seconds=float(r["seconds"]),
        status=str(r["status"]),
        optimal=bool(r["optimal"]),
    )
