"""`python -m torch_localmap plan`: plan a model on a simulated mesh and report the plan.

    python -m torch_localmap plan --model llama --size 8b --mesh 8x8 --batch 8
    python -m torch_localmap plan --model mypkg.models:build --mesh 8x8 --inputs 16x8192:int64 \
        --arg n_layers=32 --out plan.json --html plan.html --explain layers.0.attention.wq.weight

A `package.module:factory` model is built on the meta device (no memory for its weights,
_factory.py); the reference models (`llama`, `moe`, ...) are the bundled ones, at `--size`
(tiny by default; a real size such as llama's 8b is built on the meta device too).
With a memory limit the command says whether the plan fits and exits 1 when it does not.
"""
import ast

from ._common import DeviceChoices, one_line

COMMAND = "plan"
HELP = "plan a model (a reference one or your own factory) on a simulated mesh and report the plan"


def add_arguments(parser):
    parser.add_argument("--model", default="mlp",
                        help="mlp, a reference model (llama, llama_tied, moe, vit, cnn), or your own "
                             "'package.module:factory' returning the module and example inputs (built on the meta "
                             "device)")
    parser.add_argument("--inputs", nargs="+", default=None, metavar="SPEC",
                        help="example inputs for a factory: shapes with an optional dtype, e.g. 16x8192:int64 "
                             "(replaces the inputs the factory returns)")
    parser.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                        help="keyword argument for the factory (value read as a Python literal); repeatable")
    parser.add_argument("--mesh", default="2x2", help="mesh shape, e.g. 8x8 or 2x2x2 (default 2x2)")
    parser.add_argument("--mesh-dim-names", default=None, help="names of the mesh dims, e.g. dp,tp")
    parser.add_argument("--size", default="tiny",
                        help="size of a reference model: tiny (the default) or a real one, e.g. llama 8b or 70b, "
                             "moe 8x7b, vit b16, cnn imagenet")
    parser.add_argument("--batch", type=int, default=8, help="batch of a reference model's example inputs")
    parser.add_argument("--device", default="H100", choices=DeviceChoices(), metavar="DEVICE",
                        help="cost-model device: %(choices)s (default %(default)s)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="solver time limit in seconds")
    parser.add_argument("--memory-limit-gib", default="device",
                        help="per-rank memory limit in GiB, 'device' (the default: the device's memory minus 10%% "
                             "headroom) or 'none'")
    parser.add_argument("--recompute", default="off", choices=("off", "auto", "selective", "full"),
                        help="activations recomputed in backward: off (all kept, the default), auto (the solver "
                             "chooses what to keep, with the placements), or torchtitan's selective / full "
                             "activation checkpointing")
    parser.add_argument("--eval", action="store_true", help="plan an inference step (no backward)")
    parser.add_argument("--depth", type=int, default=2, help="module report down to this depth (default 2)")
    parser.add_argument("--graph", type=int, default=0, metavar="N",
                        help="also print the first N nodes in graph order (what the solver sees)")
    parser.add_argument("--explain", action="append", default=[], metavar="NAME",
                        help="price the alternatives of one node or parameter against the plan; repeatable")
    parser.add_argument("--out", default=None,
                        help="write the plan JSON here (a factory model: plan.json unless given)")
    parser.add_argument("--html", default=None,
                        help="write the self-contained HTML report here (a factory model: plan.html unless given)")
    parser.add_argument("--report-json", default=None, help="write the report document (JSON) here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on long solves")


def parse_mesh(text: str):
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--mesh: expected sizes joined by 'x' such as 8x8, got '{text}'") from None
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"--mesh: every size must be a positive integer, got '{text}'")
    return shape


# --recompute's choices as plan_module's `recompute` option.
_RECOMPUTE = {"off": False, "auto": True, "selective": "selective", "full": "full"}


def _in_cli_terms(message: str) -> str:
    """The planner's error names plan_module's options; this command's user has flags."""
    return (message.replace("recompute=True (", "--recompute auto (")
            .replace("memory_limit=None plans without one", "--memory-limit-gib none plans without one")
            .replace("a larger memory_limit", "a larger --memory-limit-gib"))


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


def _factory_kwargs(pairs):
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--arg: expected KEY=VALUE with a Python identifier as KEY, got '{pair}'")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value  # a bare word is a string
    return out


def _build(args):
    """(module, example_args, example_kwargs) for --model."""
    if ":" in args.model:
        from .._factory import build_from_factory

        return build_from_factory(args.model, args.inputs, **_factory_kwargs(args.arg))
    if args.inputs or args.arg:
        raise ValueError("--inputs and --arg are for a 'package.module:factory' model; the reference models take "
                         "--size and --batch")
    if args.model == "mlp":
        if args.size != "tiny":
            raise ValueError(f"--size: the mlp example has one size, got '{args.size}'; expected a reference model "
                             f"(llama, moe, ...) for --size")
        from ..examples.mlp import make_example

        model, example = make_example(batch=args.batch)
        return model, example, {}
    import torch

    from .. import models

    config = models.sized_config(args.model, args.size)
    # A real size is built on the meta device: no memory for its weights, traced with fake tensors.
    with torch.device("meta" if args.size != "tiny" else "cpu"):
        model, example = models.build(args.model, config=config, batch=args.batch)
    return model, example, {}


def run(args):
    import sys
    import time
    import warnings

    import torch

    from .. import report
    from .._mesh import MeshSpec
    from .._report import format_plan, memory_verdict
    from ..plan import plan_module
    from ..solver import InfeasibleError

    if ":" in args.model:  # your own model: its plan and page are what you came for
        args.out = args.out or "plan.json"
        args.html = args.html or "plan.html"
    shape = parse_mesh(args.mesh)
    names = tuple(n.strip() for n in args.mesh_dim_names.split(",")) if args.mesh_dim_names else None
    mesh = MeshSpec(shape, names) if names else shape
    limit = _memory_limit(args.memory_limit_gib)
    t0 = time.perf_counter()
    model, example_args, example_kwargs = _build(args)
    model.train(not args.eval)
    # An inference step (no grad): no backward in the graph. Warnings are printed one line each.
    with torch.set_grad_enabled(not args.eval), warnings.catch_warnings(record=True) as caught:
        try:
            plan = plan_module(model, mesh, example_args, example_kwargs, device=args.device,
                               time_limit=args.time_limit, memory_limit=limit, recompute=_RECOMPUTE[args.recompute],
                               progress=False if args.no_progress else None)
        except InfeasibleError as e:  # the ways to fit, named as this command's options
            raise InfeasibleError(_in_cli_terms(str(e))) from None
    elapsed = time.perf_counter() - t0
    fits, verdict = memory_verdict(plan.summary)
    for w in caught:  # the plan's memory verdict replaces the planner's own memory warning
        text = str(w.message)
        if not (not fits and "memory limit" in text):
            print(f"warning: {one_line(text.removeprefix('torch_localmap: '))}", file=sys.stderr)
    doc = report.build_report(plan)
    print(report.format_modules(doc, max_depth=args.depth))
    if args.graph:
        print()
        print(report.format_graph(doc, limit=args.graph))
    for name in args.explain:
        print()
        print(report.format_explanation(report.explain(plan, name)))
    print(format_plan(plan, max_ops=10))
    print(f"planned in {elapsed:.2f} s (build + trace + export + C++ plan)")
    if args.out:
        plan.save(args.out)
        print(f"plan written to {args.out}")
    if args.html:
        report.write_report_html(plan, args.html)
        print(f"HTML report written to {args.html}")
    if args.report_json:
        report.write_report_json(plan, args.report_json)
        print(f"report JSON written to {args.report_json}")
    if not fits:
        print(f"error: {verdict}", file=sys.stderr)
    return 0 if fits else 1
