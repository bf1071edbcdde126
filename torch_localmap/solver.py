"""`torch_localmap.solve`: the C++ strategy solver (csrc/core/solver) from Python.

Thin glue: files are read (and gunzipped) here, parsed once in C++, solved in
one call. The HiGHS library of the MILP phases (and of exact mode) comes from the
`highspy` wheel, found by the C API it exports (csrc/core/solver/highs_api.h).
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import math
import numbers
import os
import time
import zlib
from typing import Callable, Optional, Union

from . import _solver  # torch-free: solving never loads torch

InfeasibleError = _solver.InfeasibleError
MilpUnavailableError = _solver.MilpUnavailableError
SolverProblem = _solver.SolverProblem
HIGHS_UNAVAILABLE = _solver.HIGHS_UNAVAILABLE


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
        import highspy  # noqa: PLC0415
    except ImportError:
        return  # highs_status() then says why; every solve reports HIGHS_UNAVAILABLE
    _solver.set_highs_library(os.path.dirname(highspy.__file__))


_register_highs()


def highs_status() -> dict:
    """The HiGHS library the solver uses: {"loaded", "path", "version", "why", "highspy"}.

    `why` says what failed when nothing was loaded (then the MILP phases are off and
    `solve(..., exact=True)` raises MilpUnavailableError)."""
    status = dict(_solver.highs_status())
    try:
        from importlib.metadata import version  # noqa: PLC0415

        status["highspy"] = version("highspy")
    except Exception:  # not installed: status["why"] already explains
        status["highspy"] = None
    return status


@dataclasses.dataclass(frozen=True)
class SolveResult:
    solution: list  # one strategy index per node
    cost: int  # exact cost of `solution` (evaluated independently of the search)
    bound: float  # proven lower bound on the optimum
    gap: float  # (cost - bound) / max(|cost|, 1)
    seconds: float
    status: str  # "optimal" | "gap_tolerance" | "good_enough" | "time_limit" | "stalled"
    optimal: bool
    milp_note: str = ""  # HIGHS_UNAVAILABLE + reason when the MILP phases were off, else ""
    phases: tuple = ()  # per phase that ran: {"name", "seconds", "runs", "improvements", "gain"}


ProblemLike = Union[str, os.PathLike, bytes, dict, SolverProblem]


def _text_of(data: bytes, source: str = "problem") -> str:
    if data[:2] == b"\x1f\x8b":  # gzip magic: contest files are shipped compressed
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{source}: corrupt or truncated gzip data ({e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{source}: not UTF-8 text (byte {e.start}: {e.reason}); expected a JSON document") from None


def load_problem(problem: ProblemLike) -> SolverProblem:
    """A parsed problem from a path (.json or .json.gz), JSON text, bytes or a dict."""
    if isinstance(problem, SolverProblem):
        return problem
    if isinstance(problem, dict):
        return SolverProblem.from_json(json.dumps(problem))
    if isinstance(problem, bytes):
        return SolverProblem.from_json(_text_of(problem, "problem bytes"))
    if isinstance(problem, str) and problem.lstrip()[:1] in ("{", "["):
        return SolverProblem.from_json(problem)
    if isinstance(problem, (str, os.PathLike)):
        path = os.fspath(problem)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"problem file not found: {path}")
        with open(path, "rb") as f:
            data = f.read()
        try:
            return SolverProblem.from_json(_text_of(data, f"problem file {path}"))
        except ValueError as e:
            if str(e).startswith("problem file"):
                raise
            raise ValueError(f"problem file {path}: {e}") from None
    raise TypeError(f"problem must be a path, JSON text, bytes or dict; got {type(problem).__name__}")


def solve(
    problem: ProblemLike,
    time_limit: float = 60.0,
    seed: int = 0,
    threads: int = 2,
    exact: bool = False,
    progress: Optional[Callable[[float, int, float], None]] = None,
    gap_tolerance: float = 1e-3,
    options: Optional[dict] = None,
) -> SolveResult:
    """Picks one strategy per node minimising node + edge costs under the memory limit.

    Stops at `time_limit` (wall seconds, reading included) or once the certified gap
    (cost - bound) / |cost| is at most `gap_tolerance` (0: search on; exact mode always
    proves optimality). `options`: tunables of the solver's schedule by name
    (`solver_options()` lists them with defaults and bounds).

    Raises ValueError for malformed problems or options, InfeasibleError (a ValueError)
    naming the conflicting constraints when no solution exists, and MilpUnavailableError
    (a RuntimeError) for exact=True when HiGHS cannot be loaded.
    """
    time_limit = _real(time_limit, "time_limit")
    if not (math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit: expected a finite number of seconds > 0, got {time_limit}")
    threads = _whole(threads, "threads")
    if threads < 1:
        raise ValueError(f"threads: expected at least 1, got {threads}")
    seed = _whole(seed, "seed")
    if seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed}")
    gap_tolerance = _real(gap_tolerance, "gap_tolerance")
    if not 0 <= gap_tolerance < 1:
        raise ValueError(f"gap_tolerance: expected a fraction in [0, 1), got {gap_tolerance}")
    search_options = {}
    for name, value in (options or {}).items():
        search_options[str(name)] = _real(value, f"options[{name!r}]")
    t0 = time.perf_counter()
    p = load_problem(problem)
    # The limit covers reading the problem too.
    left = max(time_limit - (time.perf_counter() - t0), 0.05 * time_limit)
    r = p.solve(time_limit=left, seed=seed, threads=threads, exact=bool(exact), progress=progress,
                gap_tolerance=gap_tolerance, search_options=search_options)
    return SolveResult(
        solution=list(r["solution"]),
        cost=int(r["cost"]),
        bound=float(r["bound"]),
        gap=float(r["gap"]),
        seconds=float(r["seconds"]),
        status=str(r["status"]),
        optimal=bool(r["optimal"]),
        milp_note=str(r["milp_note"]),
        phases=tuple(dict(ph) for ph in r["phases"]),
    )


def solver_options() -> list:
    """The solver schedule's tunables: [{"name", "default", "min", "max", "integer", "meaning"}]."""
    return [dict(o) for o in _solver.solver_options()]


def _real(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what}: expected a number, got {type(value).__name__}")
    return float(value)


def _whole(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: expected an integer, got {value!r} ({type(value).__name__})")
    return int(value)
