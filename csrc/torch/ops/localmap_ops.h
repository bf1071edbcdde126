// torch.ops.localmap: the dispatcher entry points (schemas in localmap_ops.cpp).
//
// Layout follows torchvision's csrc/ops: this file and localmap_ops.cpp declare
// the ops and call them through the dispatcher; composite/, meta/ and autograd/
// hold one kernel file per op and dispatch key.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tlm::ops {

// Identity on a global tensor that pins its placements ("S(0)R"); its backward
// applies the same op to the gradient with `grad_placements` (default: the
// placements' gradient, Partial -> Replicate).
at::Tensor sharding_constraint(const at::Tensor& x, std::string_view placements,
                               std::optional<std::string_view> grad_placements);

// One rank's local tensor of a `global_shape` tensor moved from `src` to `dst`
// placements on a mesh, by _c10d_functional collectives on `group_names` (one
// process group per mesh dim). `grad_placements`: how the output's gradient
// arrives (default: the gradient of `dst`); the backward redistributes it to
// the gradient of `src`.
at::Tensor redistribute(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                        std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                        const std::vector<std::string>& group_names,
                        std::optional<std::string_view> grad_placements);

// The redistribute op's kernel called directly (not through the dispatcher): every
// collective, its wait and the local pad / fold steps are separate dispatcher calls,
// so a trace under make_fx records them as separate nodes -- what the rank
// programs' overlap scheduling and Inductor's comm passes work on.
at::Tensor redistribute_steps(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                              std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                              const std::vector<std::string>& group_names,
                              std::optional<std::string_view> grad_placements);

}  // namespace tlm::ops
