// Autograd kernel of localmap::sharding_constraint, in C++: the backward is the
// same op on the gradient with the gradient placements, so in_grad_placements
// appear in a joint graph because autograd put them there.
#include <torch/autograd.h>
#include <torch/library.h>

#include "torch/ops/localmap_ops.h"
#include "torch/ops/placement_args.h"

namespace tlm::ops {
namespace {

class ShardingConstraintFunction : public torch::autograd::Function<ShardingConstraintFunction> {
 public:
  static torch::autograd::Variable forward(torch::autograd::AutogradContext* ctx, const torch::autograd::Variable& x,
                                           std::string placements, std::optional<std::string> grad_placements) {
    const PlacementSpec spec =
        parse_placements(placements, x.dim(), -1, "localmap.sharding_constraint", "placements");
    // The gradient's own gradient (double backward) is constrained like the value.
    ctx->saved_data["grad"] = grad_placements_of(spec, grad_placements, x.dim(), "localmap.sharding_constraint");
    ctx->saved_data["value"] = to_string(spec);
    at::AutoDispatchBelowADInplaceOrView guard;
    return sharding_constraint(x, placements, grad_placements);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::string grad = ctx->saved_data["grad"].toStringRef();
    const std::string value = ctx->saved_data["value"].toStringRef();
    return {sharding_constraint(grads[0], grad, value), torch::autograd::Variable(), torch::autograd::Variable()};
  }
};

at::Tensor sharding_constraint_autograd(const at::Tensor& x, std::string_view placements,
                                        std::optional<std::string_view> grad_placements) {
  std::optional<std::string> grad;
  if (grad_placements) grad = std::string(*grad_placements);
  return ShardingConstraintFunction::apply(x, std::string(placements), grad);
}

}  // namespace

TORCH_LIBRARY_IMPL(localmap, Autograd, m) {
  m.impl("sharding_constraint", TORCH_FN(sharding_constraint_autograd));
}

}  // namespace tlm::ops
