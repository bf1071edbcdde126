"""`python -m torch_localmap solve FILE`: solve a strategy-selection problem file.

Reads our problem JSON or the IOPDDL contest format (plain or gzip, detected),
prints progress on stderr during long solves, and as its last stdout line
`cost=<integer> bound=<number> gap=<percent> time=<seconds>`.

`--time-limit` is the wall time of the whole command: interpreter start-up, reading
the file and writing the solution count against it (the solver gets what is left,
minus a reserve for writing and exiting).
"""
import os
import sys
import time

from ._common import one_line, printable

COMMAND = "solve"
HELP = "solve a strategy-selection problem (our JSON or IOPDDL format, .json or .json.gz)"

# What printing, writing the solution and exiting take after the solve (the process
# skips interpreter teardown, __main__.entry_point); the solver's share ends this early.
_EXIT_RESERVE_S = 0.15


def add_arguments(parser):
    parser.add_argument("file", nargs="?", help="problem file (.json or .json.gz)")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="wall seconds for the whole command, reading included (default 60)")
    parser.add_argument("--out", help="write the solution JSON here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--exact", action="store_true", help="prove optimality with HiGHS (within the time limit)")
    parser.add_argument("--gap-tolerance", type=float, default=1e-3,
                        help="stop once the certified gap is at most this fraction (default 0.001; 0: search on)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a tunable of the solver's schedule (repeatable); --list-options lists them")
    parser.add_argument("--list-options", action="store_true", help="list the solver's tunables and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def format_bound(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:.6f}"


def summary_line(cost: int, bound: float, gap: float, seconds: float) -> str:
    return f"cost={cost} bound={format_bound(bound)} gap={100.0 * gap:.4f}% time={seconds:.2f}"


def process_age_s() -> float:
    """Seconds since this process started (Linux: /proc); 0 where that is unknown."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _check_out_path(path: str) -> None:
    """Fails before the solve, not after it, when the solution cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out {path}: directory {folder} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"--out {path}: is a directory; expected a file name")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out {path}: directory {folder} is not writable")


def _parse_options(items) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--option {item}: expected NAME=VALUE")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--option {item}: expected a number after '='") from None
    return out


def _list_options() -> int:
    from ..solver import solver_options  # noqa: PLC0415

    for o in solver_options():
        kind = "integer" if o["integer"] else "number"
        print(f"{o['name']:<28} default {o['default']:<10g} {kind} in [{o['min']:g}, {o['max']:g}]  {o['meaning']}")
    return 0


def run(args) -> int:
    started = time.monotonic() - process_age_s()
    if args.list_options:
        return _list_options()
    if not args.file:
        raise ValueError("solve: expected a problem file (or --list-options)")
    options = _parse_options(args.option)
    if not (args.time_limit > 0 and args.time_limit < float("inf")):
        raise ValueError(f"--time-limit: expected a finite number of seconds > 0, got {args.time_limit}")
    if args.threads < 1:
        raise ValueError(f"--threads: expected at least 1, got {args.threads}")
    if args.out:
        _check_out_path(args.out)
    from .._progress import SolveProgress  # noqa: PLC0415
    from ..solver import load_problem, solve  # noqa: PLC0415  (keeps `--help` fast)

    t_read = time.monotonic()
    problem = load_problem(args.file)
    name = printable(problem.name or args.file)
    if not args.quiet:
        print(f"{name}: {problem.num_nodes} nodes, {problem.num_edges} edges, "
              f"read in {time.monotonic() - t_read:.1f}s", file=sys.stderr)
    left = args.time_limit - (time.monotonic() - started) - _EXIT_RESERVE_S
    minimum = min(1.0, 0.05 * args.time_limit)  # enough for a first labelling: a plan is always returned
    if left < minimum:
        print(f"warning: --time-limit {args.time_limit:g}: start-up and reading took "
              f"{time.monotonic() - started:.1f} s; solving for {minimum:.2f} s more", file=sys.stderr)
        left = minimum
    last = [0.0]

    def progress(seconds, cost, bound):  # a log: one line per improvement, at most every 2 s
        if args.quiet or seconds - last[0] < 2.0:
            return
        last[0] = seconds
        print(f"  [{seconds:7.1f}s] cost={cost} bound={format_bound(bound)}", file=sys.stderr, flush=True)

    # On a terminal: a progress bar (cost, bound, gap) instead of the lines.
    bar = SolveProgress(left, enabled=not args.quiet and sys.stderr.isatty(), description=name[:30],
                        fmt=lambda v: f"{v:.6g}")
    with bar:
        r = solve(problem, time_limit=left, seed=args.seed, threads=args.threads, exact=args.exact,
                  progress=bar.update if bar.enabled else progress, gap_tolerance=args.gap_tolerance,
                  options=options)
        bar.update(r.seconds, r.cost, r.bound)  # the bar ends on the result, not the last report
    if args.out:
        extra = f'"bound":{format_bound(r.bound)},"gap":{r.gap!r},"seconds":{r.seconds!r},"status":"{r.status}"'
        with open(args.out, "w") as f:
            f.write(problem.solution_json(r.solution, extra))
            f.write("\n")
    if r.milp_note:
        print(one_line(r.milp_note))
    print(summary_line(r.cost, r.bound, r.gap, time.monotonic() - started))
    return 0
