// Device-agnostic kernel of localmap::redistribute: runs core's per-rank steps
// (core/rank_steps.h) with _c10d_functional collectives called through the
// dispatcher, so the same kernel serves gloo (CPU) and NCCL (CUDA) groups.
// Results equal DTensor's redistribute: torch.chunk-style uneven shards, zero
// padding for the collectives.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include "torch/ops/localmap_ops.h"
#include "torch/ops/placement_args.h"

namespace tlm::ops {
namespace {

constexpr const char* kOp = "localmap.redistribute";

// The _c10d_functional ops, looked up once.
struct Collectives {
  c10::OperatorHandle all_gather, reduce_scatter, all_reduce, all_to_all, wait;
};
const Collectives& collectives() {
  static const Collectives ops = [] {
    auto& d = c10::Dispatcher::singleton();
    return Collectives{d.findSchemaOrThrow("_c10d_functional::all_gather_into_tensor", ""),
                       d.findSchemaOrThrow("_c10d_functional::reduce_scatter_tensor", ""),
                       d.findSchemaOrThrow("_c10d_functional::all_reduce", ""),
                       d.findSchemaOrThrow("_c10d_functional::all_to_all_single", ""),
                       d.findSchemaOrThrow("_c10d_functional::wait_tensor", "")};
  }();
  return ops;
}

// Calls a collective boxed (its group_name is an `Any` argument) and waits for it.
at::Tensor collective(const c10::OperatorHandle& op, std::vector<c10::IValue> args) {
  torch::jit::Stack stack(std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  op.callBoxed(&stack);
  torch::jit::Stack w{stack.back()};
  collectives().wait.callBoxed(&w);
  return w.back().toTensor();
}

// Zero-pads the end of `dim` up to `size` (collectives need equal pieces).
at::Tensor pad_end(const at::Tensor& t, int64_t dim, int64_t size) {
  const int64_t extra = size - t.size(dim);
  if (extra == 0) return t;
  std::vector<int64_t> pad(2 * (t.dim() - dim), 0);
  pad[2 * (t.dim() - 1 - dim) + 1] = extra;  // constant_pad_nd lists the last dim first
  return at::constant_pad_nd(t, pad, 0);
}

at::Tensor narrow_to(const at::Tensor& t, int64_t dim, int64_t size) {
  return t.size(dim) == size ? t : t.narrow(dim, 0, size);
}

at::Tensor run_step(const at::Tensor& local, const RankStep& r, const std::string& group) {
  const CollectiveStep& s = r.step;
  const int64_t n = r.group_size;
  const std::string reduce = to_string(s.reduce);
  switch (s.kind) {
    case CollectiveKind::AllGather: {
      const int64_t d = s.src_dim;
      at::Tensor x = pad_end(local, d, r.src_full).contiguous().unsqueeze(0);
      // Gathered along a new leading dim, then folded into `d` rank-major.
      at::Tensor out = collective(collectives().all_gather, {x, n, group});
      out = out.movedim(0, d).flatten(d, d + 1);
      return narrow_to(out, d, r.logical_shape[d]).contiguous();
    }
    case CollectiveKind::ReduceScatter: {
      const int64_t d = s.dst_dim;
      // torch.chunk pieces are full-sized except the tail: padding each piece to
      // dst_full equals padding the whole dim at its end to n * dst_full.
      at::Tensor x = pad_end(local, d, n * r.dst_full).unflatten(d, {n, r.dst_full}).movedim(d, 0).contiguous();
      at::Tensor out = collective(collectives().reduce_scatter, {x, reduce, n, group}).squeeze(0);
      return narrow_to(out, d, r.chunk_size);
    }
    case CollectiveKind::AllReduce:
      return collective(collectives().all_reduce, {local.contiguous(), reduce, group});
    case CollectiveKind::AllToAll: {
      const int64_t a = s.src_dim, b = s.dst_dim;
      at::Tensor x = pad_end(pad_end(local, a, r.src_full), b, n * r.dst_full);
      // Piece j of dim b goes to rank j; pieces travel as rows of a leading dim.
      x = x.unflatten(b, {n, r.dst_full}).movedim(b, 0).contiguous();
      std::vector<int64_t> rows(n, 1);
      at::Tensor out = collective(collectives().all_to_all, {x, rows, rows, group});
      // Row j came from rank j: its piece of dim a, concatenated along a.
      out = out.movedim(0, a).flatten(a, a + 1);
      out = narrow_to(out, a, r.logical_shape[a]);
      return narrow_to(out, b, r.chunk_size).contiguous();
    }
    case CollectiveKind::LocalChunk:
      return local.narrow(s.dst_dim, r.chunk_start, r.chunk_size).clone();
    case CollectiveKind::LocalPartition:
      // Replicate -> Partial: n equal partial values must reduce back to the value;
      // only sum needs a rewrite (avg, max and min of equal values are exact).
      return s.reduce == ReduceOp::Sum ? local.div(n) : local.clone();
  }
  TORCH_CHECK(false, kOp, ": unknown step kind");
}

bool communicates(const RankStep& r) {
  return r.step.kind != CollectiveKind::LocalChunk && r.step.kind != CollectiveKind::LocalPartition;
}

}  // namespace

at::Tensor redistribute_steps(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                               std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                               const std::vector<std::string>& group_names,
                               std::optional<std::string_view> grad_placements) {
  const RedistributeCall call = check_redistribute(x, global_shape, src, dst, mesh_shape, coordinate,
                                                   group_names.size(), grad_placements);
  const std::vector<RankStep>& steps = call.steps;
  at::Tensor local = x;
  for (const RankStep& r : steps) {
    const std::string& group = group_names.at(r.step.mesh_dim);
    if (local.is_complex() && communicates(r)) {
      // Collective backends move no complex dtypes: the (real, imag) view travels;
      // its extra trailing dim is untouched by the step's dims, and sums of pairs
      // are sums of complex numbers.
      local = at::view_as_complex(run_step(at::view_as_real(local), r, group).contiguous());
    } else {
      local = run_step(local, r, group);
    }
  }
  // Always a fresh, contiguous tensor: the op is functional, and its Meta kernel (what
  // traced programs are planned with) promises contiguous strides.
  return steps.empty() ? x.clone(at::MemoryFormat::Contiguous) : local.contiguous();
}

TORCH_LIBRARY_IMPL(localmap, CompositeExplicitAutograd, m) {
  m.impl("redistribute", TORCH_FN(redistribute_steps));
}

}  // namespace tlm::ops
