"""`python -m torch_localmap verify-strategies`: check every C++ sharding strategy numerically."""
from __future__ import annotations

import sys
import time

COMMAND = "verify-strategies"
HELP = ("Run every sharding strategy of every supported op on random inputs, one mesh coordinate at a "
        "time, and compare the reassembled output with the unsharded op.")


def add_arguments(parser):
    parser.add_argument("--mesh", action="append", metavar="SHAPE",
                        help="mesh shape such as 2x2 (repeatable); default: 2, 2x2, 2x1x2, 3x2")
    parser.add_argument("--op", help="only this op (aten.mm.default, aten.mm or mm)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for inputs and splits (default 0)")
    parser.add_argument("--max-cases-per-op", type=int, default=6,
                        help="distinct instances per op to check (0: all; default 6)")
    parser.add_argument("--show", type=int, default=50, help="print at most this many failure lines (default 50)")
    parser.add_argument("-v", "--verbose", action="store_true", help="per-family counts per mesh")


def run(args) -> int:
    from .. import _C
    from .. import _verify as verify

    meshes = [verify.parse_mesh(m) for m in args.mesh] if args.mesh else list(verify.DEFAULT_MESHES)
    t0 = time.perf_counter()
    cases = verify.collect_cases(args.seed, args.op, max_per_op=args.max_cases_per_op)
    if not cases:
        raise ValueError(f"no op instance matches --op {args.op!r}")
    print(f"{len(cases)} op instances from the reference models and hand-made edge cases "
          f"({time.perf_counter() - t0:.1f}s)")
    skipped = sorted({c.op for c in cases if c.op in verify.EXCLUDED_OPS})
    for op in skipped:
        print(f"skipped {op}: {verify.EXCLUDED_OPS[op]}")
    all_ops, total, failures, fallback = set(), 0, [], set()
    _C.set_arg_audit(True)
    for mesh in meshes:
        t = time.perf_counter()
        rep = verify.verify_cases(cases, mesh, seed=args.seed)
        all_ops |= rep.ops
        total += rep.strategies
        failures += rep.failures
        fallback |= rep.fallback_ops
        print(f"mesh {'x'.join(map(str, mesh))}: {len(rep.ops)} ops, {rep.strategies} strategies, "
              f"{len(rep.failures)} failures ({time.perf_counter() - t:.1f}s)")
        if args.verbose:
            for fam, (n_cases, n_strats, n_fail) in sorted(rep.per_family.items()):
                print(f"    {fam:<16} {n_cases:5d} instances {n_strats:7d} strategies {n_fail:5d} failures")
    _C.set_arg_audit(False)
    # Rules read arguments by name at the position op_schemas.inc gives: both must match torch.
    failures += verify.schema_mismatches(_C.arg_audit_records())
    if fallback:
        print(f"not verified (replicate-only fallback, no C++ rule): {', '.join(sorted(fallback))}")
    uncovered = {} if args.op else verify.unverified_rules(cases)
    cuda_only = sorted(op for op in uncovered if op in verify.CUDA_ONLY_OPS)
    if cuda_only:
        print(f"not verified (kernels exist on CUDA only; this verifier runs on CPU): {', '.join(cuda_only)}")
    # A rule no case reaches is a rule nobody checked: that fails the run like a wrong strategy.
    failures += [f"{op}: C++ rule never verified ({why})" for op, why in sorted(uncovered.items())
                 if op not in verify.CUDA_ONLY_OPS]
    for line in failures[: args.show]:
        print(line)
    if len(failures) > args.show:
        print(f"... {len(failures) - args.show} more failures")
    print(f"{len(all_ops)} ops, {total} strategies verified, {len(failures)} failures")
    sys.stdout.flush()
    return 1 if failures else 0
