// Device-agnostic kernel: checks the placements and copies. A copy rather than
// an alias keeps the op functional, so make_fx, functionalization and export
// keep it as a plain node; on local shards (the rank program) it is the same copy.
#include <ATen/ops/clone.h>
#include <torch/library.h>

#include "torch/ops/placement_args.h"

namespace tlm::ops {
namespace {

at::Tensor sharding_constraint_kernel(const at::Tensor& x, std::string_view placements,
                                      std::optional<std::string_view> grad_placements) {
  const PlacementSpec spec = parse_placements(placements, x.dim(), -1, "localmap.sharding_constraint", "placements");
  grad_placements_of(spec, grad_placements, x.dim(), "localmap.sharding_constraint");
  return x.clone();
}

}  // namespace

TORCH_LIBRARY_IMPL(localmap, CompositeExplicitAutograd, m) {
  m.impl("sharding_constraint", TORCH_FN(sharding_constraint_kernel));
}

}  // namespace tlm::ops
