"""`python -m torch_localmap solve FILE`: solve a strategy-selection problem file.

Reads our problem JSON or the IOPDDL contest format (plain or gzip, detected),
prints progress on stderr during long solves, and as its last stdout line
`cost=<integer> bound=<number> gap=<percent> time=<seconds>`.
"""
import sys
import time

COMMAND = "solve"
HELP = "solve a strategy-selection problem (our JSON or IOPDDL format, .json or .json.gz)"


def add_arguments(parser):
    parser.add_argument("file", help="problem file (.json or .json.gz)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--out", help="write the solution JSON here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--exact", action="store_true", help="prove optimality with HiGHS (within the time limit)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def format_bound(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:.6f}"


def summary_line(cost: int, bound: float, gap: float, seconds: float) -> str:
    return f"cost={cost} bound={format_bound(bound)} gap={100.0 * gap:.4f}% time={seconds:.2f}"


def run(args) -> int:
    from ..solver import load_problem, solve  # noqa: PLC0415  (keeps `--help` fast)

    t0 = time.monotonic()
    problem = load_problem(args.file)
    if not args.quiet:
        print(f"{problem.name or args.file}: {problem.num_nodes} nodes, {problem.num_edges} edges, "
              f"read in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    last = [0.0]

    def progress(seconds, cost, bound):
        if args.quiet or seconds - last[0] < 2.0:
            return
        last[0] = seconds
        print(f"  [{seconds:7.1f}s] cost={cost} bound={format_bound(bound)}", file=sys.stderr, flush=True)

    r = solve(problem, time_limit=args.time_limit, seed=args.seed, threads=args.threads, exact=args.exact,
              progress=progress)
    if args.out:
        extra = f'"bound":{format_bound(r.bound)},"gap":{r.gap!r},"seconds":{r.seconds!r},"status":"{r.status}"'
        with open(args.out, "w") as f:
            f.write(problem.solution_json(r.solution, extra))
            f.write("\n")
    print(summary_line(r.cost, r.bound, r.gap, r.seconds))
    return 0
