// Autograd kernel of localmap::redistribute, in C++: the backward is the
// transposed redistribution, from the placements the gradient arrives in
// (grad_placements, default the gradient of dst: Partial -> Replicate) to the
// gradient of src. All-gather <-> reduce-scatter (when the gradient of a
// gathered value arrives Partial) or local chunk (when it arrives Replicate),
// all-reduce <-> identity on a Replicate gradient, all-to-all <-> all-to-all.
#include <torch/autograd.h>
#include <torch/library.h>

#include "core/region.h"
#include "torch/ops/localmap_ops.h"
#include "torch/ops/placement_args.h"

namespace tlm::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

class RedistributeFunction : public torch::autograd::Function<RedistributeFunction> {
 public:
  static Variable forward(AutogradContext* ctx, const Variable& x, std::vector<int64_t> global_shape, std::string src,
                          std::string dst, std::vector<int64_t> mesh_shape, std::vector<int64_t> coordinate,
                          std::vector<std::string> group_names, std::optional<std::string> grad_placements) {
    // Only what the backward needs is read here; the kernel below checks every argument.
    const auto ndim = static_cast<int64_t>(global_shape.size());
    const auto mdim = static_cast<int64_t>(mesh_shape.size());
    const PlacementSpec from = parse_placements(src, ndim, mdim, "localmap.redistribute", "src_placements");
    const PlacementSpec to = parse_placements(dst, ndim, mdim, "localmap.redistribute", "dst_placements");
    ctx->saved_data["global_shape"] = global_shape;
    ctx->saved_data["mesh_shape"] = mesh_shape;
    ctx->saved_data["coordinate"] = coordinate;
    ctx->saved_data["group_names"] = c10::List<std::string>(group_names);
    ctx->saved_data["grad_from"] =
        grad_placements_of(to, grad_placements, ndim, "localmap.redistribute");
    ctx->saved_data["grad_to"] = to_string(grad_spec(from));
    at::AutoDispatchBelowADInplaceOrView guard;
    return redistribute(x, global_shape, src, dst, mesh_shape, coordinate, group_names, grad_placements);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto global_shape = ctx->saved_data["global_shape"].toIntVector();
    const auto mesh_shape = ctx->saved_data["mesh_shape"].toIntVector();
    const auto coordinate = ctx->saved_data["coordinate"].toIntVector();
    std::vector<std::string> groups;
    for (const auto& g : ctx->saved_data["group_names"].toList()) groups.push_back(g.get().toStringRef());
    const std::string from = ctx->saved_data["grad_from"].toStringRef();
    const std::string to = ctx->saved_data["grad_to"].toStringRef();
    Variable g = redistribute(grads[0].contiguous(), global_shape, from, to, mesh_shape, coordinate, groups,
                              std::nullopt);
    variable_list out(8);
    out[0] = g;
    return out;
  }
};

at::Tensor redistribute_autograd(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                                 std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                                 const std::vector<std::string>& group_names,
                                 std::optional<std::string_view> grad_placements) {
  std::optional<std::string> grad;
  if (grad_placements) grad = std::string(*grad_placements);
  return RedistributeFunction::apply(x, global_shape.vec(), std::string(src), std::string(dst), mesh_shape.vec(),
                                     coordinate.vec(), group_names, grad);
}

}  // namespace

TORCH_LIBRARY_IMPL(localmap, Autograd, m) {
  m.impl("redistribute", TORCH_FN(redistribute_autograd));
}

}  // namespace tlm::ops
