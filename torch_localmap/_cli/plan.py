"""`python -m torch_localmap plan`: plan a reference model on a simulated mesh."""
COMMAND = "plan"
HELP = "plan a reference model on a simulated mesh (no process group needed) and print the plan"


def add_arguments(parser):
    parser.add_argument("--model", default="mlp", help="mlp, or a reference model: llama, llama_tied, moe, vit, cnn")
    parser.add_argument("--mesh", default="2x2", help="mesh shape, e.g. 8x8 or 2x2x2 (default 2x2)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="H100", help="cost-model device: H100, H200, A100, B200, cpu")
    parser.add_argument("--time-limit", type=float, default=10.0, help="solver time limit in seconds")
    parser.add_argument("--memory-limit-gib", default="device",
                        help="per-rank memory limit in GiB, 'device' (the default: the device's memory minus 10%% "
                             "headroom) or 'none'")
    parser.add_argument("--out", default=None, help="write the plan JSON here")


def parse_mesh(text: str):
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--mesh: expected sizes joined by 'x' such as 8x8, got '{text}'") from None
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"--mesh: every size must be a positive integer, got '{text}'")
    return shape


def _memory_limit(text: str):
    if text in ("device", "none"):
        return None if text == "none" else "device"
    try:
        gib = float(text)
    except ValueError:
        raise ValueError(f"--memory-limit-gib: expected a number of GiB, 'device' or 'none', got '{text}'") from None
    if not gib > 0:
        raise ValueError(f"--memory-limit-gib: expected a positive number of GiB, got '{text}'")
    return int(gib * 2**30)


def run(args):
    import time

    from ..plan import plan_module
    from .._report import format_plan

    mesh = parse_mesh(args.mesh)
    if args.model == "mlp":
        from ..examples.mlp import make_example

        model, example = make_example(batch=args.batch)
    else:
        from .. import models

        model, example = models.build(args.model, batch=args.batch)
    limit = _memory_limit(args.memory_limit_gib)
    t0 = time.perf_counter()
    plan = plan_module(model, mesh, example, device=args.device, time_limit=args.time_limit, memory_limit=limit)
    print(format_plan(plan))
    print(f"planned in {time.perf_counter() - t0:.2f} s (trace + export + C++ plan)")
    if args.out:
        plan.save(args.out)
        print(f"plan written to {args.out}")
    return 0
