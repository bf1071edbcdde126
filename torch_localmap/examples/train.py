"""A complete training script, started with torchrun (one process per rank):

    torchrun --nproc-per-node 4 -m torch_localmap.examples.train            # CPU, gloo
    torchrun --nproc-per-node 4 -m torch_localmap.examples.train --device cuda   # one GPU per rank, NCCL

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; the process
group is initialized from them (env://). Every rank builds the same model (same seed),
plans it (rank 0 solves, the plan is broadcast), and trains with DTensor parameters.
"""
import argparse
import math
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

import torch_localmap
import torch_localmap.report
from torch_localmap.examples.mlp import make_example


def _mesh_shape(text: str, world_size: int) -> tuple:
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"error: --mesh: expected sizes joined by 'x' such as 2x2, got '{text}'") from None
    if len(shape) > 2 or any(s <= 0 for s in shape):
        raise SystemExit(f"error: --mesh: expected one or two positive sizes (dims dp, tp), got '{text}'")
    if math.prod(shape) != world_size:
        raise SystemExit(f"error: --mesh {text} has {math.prod(shape)} ranks but torchrun started {world_size}; "
                         f"expected sizes whose product is {world_size} (e.g. --mesh {world_size}) or "
                         f"--nproc-per-node {math.prod(shape)}")
    return shape


def _check_gpu(local_rank: int) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("error: --device cuda: no CUDA GPU is visible to this process (torch "
                         f"{torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); expected --device cpu here")
    if local_rank >= torch.cuda.device_count():
        raise SystemExit(f"error: --device cuda: local rank {local_rank} has no GPU of its own "
                         f"({torch.cuda.device_count()} visible); expected --nproc-per-node at most "
                         f"{torch.cuda.device_count()}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--mesh", default="2x2", help="mesh shape covering every rank, e.g. 2x2 or 4")
    args = parser.parse_args(argv)

    if "RANK" not in os.environ:
        raise SystemExit("start this script with torchrun (it sets RANK and WORLD_SIZE), e.g. "
                         "torchrun --nproc-per-node 4 -m torch_localmap.examples.train")
    # Each problem a user can fix is one line per rank, found before any process group waits on peers.
    shape = _mesh_shape(args.mesh, int(os.environ["WORLD_SIZE"]))
    if args.device == "cuda":
        _check_gpu(int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    mesh = init_device_mesh(args.device, shape, mesh_dim_names=("dp", "tp")[: len(shape)])

    model, (x, y) = make_example(batch=64, d_in=64, hidden=128, d_out=32)
    model, x, y = model.to(args.device), x.to(args.device), y.to(args.device)
    pmodel = torch_localmap.parallelize(model, mesh, (x, y), time_limit=5)
    opt = torch.optim.AdamW(pmodel.parameters(), lr=1e-3)
    for step in range(args.steps):
        opt.zero_grad()
        loss = pmodel(x, y)
        loss.backward()
        opt.step()
        if dist.get_rank() == 0:
            print(f"step {step}: loss {loss.item():.6f}", flush=True)
    if dist.get_rank() == 0:
        print(f"parameter placements: {pmodel.plan.param_placements()}")
        why = torch_localmap.report.replication_reason(pmodel.plan)
        if why:  # a model this small: say why nothing is sharded
            print(why)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
