"""Regions written with torch's own local_map (torch.distributed.tensor.experimental) in a
model we plan (issue 14): traced on plain tensors, torch would run the body on whole
tensors and the region would vanish; we trace it as our region instead, so the planner pins
its placements and the body runs on local shards -- with the gradient placements it declares."""
import torch
import torch.nn as nn
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.experimental import local_map as torch_local_map

from dist_utils import full_value, make_mesh, run_distributed

SEEN_SHAPES = []


# Rows of x on each rank, w whole: w's gradient from local rows is a pending sum (Partial).
@torch_local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], [Replicate()]),
                 in_grad_placements=([Shard(0)], [Partial()]), device_mesh=None)
def rowwise_matmul(x, w):
    SEEN_SHAPES.append(tuple(x.shape))
    return torch.relu(x @ w)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(16, 16)
        self.w = nn.Parameter(torch.randn(16, 8) / 4)

    def forward(self, x):
        return rowwise_matmul(self.proj(x), self.w).square().mean()


def _x():
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(1))


def test_torch_local_map_region_is_pinned_and_runs_on_local_shards():
    from torch_localmap.plan import plan_module

    SEEN_SHAPES.clear()
    plan = plan_module(Model(), (2,), (_x(),), time_limit=2)
    regions = [(node.fixed["role"], node.fixed["inputs"], planned.inputs)
               for node, planned in zip(plan.graph.nodes, plan.nodes) if node.fixed is not None]
    assert ("forward", ["S(0)", "R"], ("S(0)", "R")) in regions
    assert any(role == "backward" for role, *_ in regions)
    assert (4, 16) in SEEN_SHAPES and (8, 16) not in SEEN_SHAPES  # the body saw one rank's rows


def _rank_step(rank, world_size):
    import torch_localmap

    model = Model()
    pmodel = torch_localmap.parallelize(model, make_mesh((2,)), (_x(),), time_limit=2)
    loss = pmodel(_x())
    loss.backward()
    return float(loss.full_tensor()), {k: full_value(p.grad) for k, p in pmodel.named_parameters()}


def test_torch_local_map_region_trains_like_one_process():
    model = Model()
    loss = model(_x())
    loss.backward()
    for got_loss, grads in run_distributed(_rank_step, 2, timeout=300):
        assert abs(got_loss - float(loss.detach())) < 1e-6
        for k, p in model.named_parameters():
            # w's gradient is summed over the ranks' rows (declared Partial), not one rank's share
            torch.testing.assert_close(grads[k], p.grad, msg=k)
