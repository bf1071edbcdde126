"""`python -m torch_localmap coverage`: which aten ops of a model's graph have a sharding rule."""
from __future__ import annotations

import importlib

COMMAND = "coverage"
HELP = ("Trace a model (fake tensors, no process group), plan it on a simulated mesh and list every aten op "
        "of its graph with its count and the C++ rule family that planned it, or FALLBACK where the op has "
        "no rule and runs replicated. Exit status 1 when any op fell back.")


def add_arguments(parser):
    parser.add_argument("--model", required=True,
                        help="a reference model (mlp, llama, llama_tied, moe, vit, cnn) or 'package.module:factory', "
                             "a callable returning (model, args), (model, args, kwargs) or an object with "
                             ".model, .args and .kwargs")
    parser.add_argument("--mesh", default="8x8", help="simulated mesh shape (default 8x8)")
    parser.add_argument("--eval", action="store_true", help="plan the forward-only graph (model.eval(), no_grad)")
    parser.add_argument("--batch", type=int, default=8, help="batch size for the reference models")
    parser.add_argument("--time-limit", type=float, default=5.0, help="solver time limit in seconds")


def load_model(spec: str, batch: int = 8):
    """(model, args, kwargs) from a reference-model name or a 'module:factory' path."""
    if ":" not in spec:
        if spec == "mlp":
            from ..examples.mlp import make_example

            model, example = make_example(batch=batch)
        else:
            from .. import models

            model, example = models.build(spec, batch=batch)
        return model, tuple(example) if isinstance(example, (tuple, list)) else (example,), {}
    mod_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"--model {spec!r}: cannot load {attr!r} from module {mod_name!r} ({e}); expected "
                         "'package.module:factory'") from e
    made = factory()
    if hasattr(made, "model") and hasattr(made, "args"):
        return made.model, tuple(made.args), dict(getattr(made, "kwargs", None) or {})
    if isinstance(made, tuple) and len(made) in (2, 3):
        model, args, *rest = made
        return model, tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(rest[0] if rest else {})
    raise ValueError(f"--model {spec!r}: the factory returned {type(made).__name__}; expected (model, args), "
                     "(model, args, kwargs) or an object with .model, .args and .kwargs")


def op_table(plan) -> list:
    """[(op, count, family, fell_back)] over the plan's aten nodes, sorted by op name."""
    rows = {}
    for n in plan.nodes:
        if "." not in n.op or n.op.startswith(("placeholder", "output")):
            continue
        count, family, fell = rows.get(n.op, (0, n.family, False))
        rows[n.op] = (count + 1, family, fell or n.fell_back)
    return [(op, *rows[op]) for op in sorted(rows)]


def run(args) -> int:
    import torch

    from ..plan import plan_module
    from .plan import parse_mesh

    mesh = parse_mesh(args.mesh)
    model, ex_args, ex_kwargs = load_model(args.model, args.batch)
    model.train(not args.eval)
    with torch.set_grad_enabled(not args.eval):
        plan = plan_module(model, mesh, ex_args, ex_kwargs, time_limit=args.time_limit)
    table = op_table(plan)
    width = max((len(op) for op, *_ in table), default=10)
    print(f"{'op':<{width}}  {'count':>5}  rule")
    for op, count, family, fell in table:
        print(f"{op:<{width}}  {count:5d}  {'FALLBACK (no rule: runs replicated)' if fell else family}")
    fallback = [op for op, _, _, fell in table if fell]
    print(f"{len(table)} ops, {sum(c for _, c, _, _ in table)} nodes, {len(fallback)} without a rule"
          + (f": {', '.join(fallback)}" if fallback else ""))
    return 1 if fallback else 0
