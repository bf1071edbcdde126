// Schemas of the localmap library and the dispatcher calls behind localmap_ops.h.
#include "torch/ops/localmap_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace tlm::ops {

at::Tensor sharding_constraint(const at::Tensor& x, std::string_view placements,
                               std::optional<std::string_view> grad_placements) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("localmap::sharding_constraint", "")
                       .typed<decltype(sharding_constraint)>();
  return op.call(x, placements, grad_placements);
}

at::Tensor redistribute(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                        std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                        const std::vector<std::string>& group_names,
                        std::optional<std::string_view> grad_placements) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("localmap::redistribute", "")
                       .typed<decltype(redistribute)>();
  return op.call(x, global_shape, src, dst, mesh_shape, coordinate, group_names, grad_placements);
}

TORCH_LIBRARY(localmap, m) {
  // The in-graph carrier of placements: a functional identity (a copy, so no alias
  // analysis is needed) the planner pins to `placements`.
  m.def("sharding_constraint(Tensor x, str placements, str? grad_placements=None) -> Tensor");
  m.def(
      "redistribute(Tensor x, int[] global_shape, str src_placements, str dst_placements, int[] mesh_shape, "
      "int[] coordinate, str[] group_names, str? grad_placements=None) -> Tensor");
}

}  // namespace tlm::ops
