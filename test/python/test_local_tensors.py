"""The state's local shards taken in one autograd node (_torch_private/dtensor.local_tensors)
give what DTensor.to_local gives, forward and backward: the same local values, and DTensor
gradients in the same placements, shapes and strides, on Shard and Replicate parameters."""
import torch

from dist_utils import make_mesh, run_distributed


def _grads(rank, world, bulk):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from torch_localmap._torch_private import dtensor

    torch.manual_seed(0)
    mesh = make_mesh((world,))
    params = [torch.nn.Parameter(distribute_tensor(torch.randn(8, 6), mesh, [p]))
              for p in (Shard(0), Shard(1), Replicate())]
    frozen = distribute_tensor(torch.randn(4), mesh, [Replicate()])  # a buffer: no gradient
    state = params + [frozen]
    local = dtensor.local_tensors(state) if bulk else [d.to_local() for d in state]
    # The first parameter's local gradient arrives with other strides than its shard's: the
    # backward of t() is a transposed view.
    weight = torch.arange(float(local[0].numel())).view(local[0].shape[1], local[0].shape[0])
    loss = (local[0].t().contiguous() * weight).sum() + (local[1] ** 2).sum() + (local[2] * local[3].sum()).sum()
    loss.backward()
    out = []
    for p in params:
        g = p.grad
        out.append((type(g).__name__, tuple(g.placements), tuple(g.shape), g.stride(), g.to_local().stride(),
                    g.to_local().clone()))
    return out, [t.clone() for t in local], local[3].requires_grad


def test_local_tensors_match_to_local_forward_and_backward():
    for rank_bulk, rank_ref in zip(run_distributed(_grads, 2, True), run_distributed(_grads, 2, False)):
        (grads, values, frozen_grad), (ref_grads, ref_values, ref_frozen_grad) = rank_bulk, rank_ref
        assert frozen_grad is ref_frozen_grad is False
        for a, b in zip(values, ref_values):
            assert torch.equal(a, b)
        for a, b in zip(grads, ref_grads):
            assert a[:5] == b[:5]
            assert torch.equal(a[5], b[5])


def _no_grad_views(rank, world):
    from torch.distributed.tensor import Shard, distribute_tensor

    from torch_localmap._torch_private import dtensor

    p = torch.nn.Parameter(distribute_tensor(torch.randn(8, 6), make_mesh((world,)), [Shard(0)]))
    with torch.no_grad():
        (local,) = dtensor.local_tensors([p])
    # A new tensor object over the shard's storage, never the DTensor's own _local_tensor.
    return local.requires_grad, local is p._local_tensor, local.data_ptr() == p._local_tensor.data_ptr()


def test_local_tensors_without_grad_are_views_of_the_shards():
    for requires_grad, same_object, same_storage in run_distributed(_no_grad_views, 2):
        assert (requires_grad, same_object, same_storage) == (False, False, True)
