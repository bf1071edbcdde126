"""`python -m torch_localmap demo`."""
COMMAND = "demo"
HELP = "plan an MLP on a 2x2 mesh, train it on 4 gloo CPU ranks, check losses against one process"


def add_arguments(parser):
    parser.add_argument("--steps", type=int, default=5, help="SGD steps (default 5)")


def run(args):
    from .._demo import run as run_demo

    return run_demo(steps=args.steps)
