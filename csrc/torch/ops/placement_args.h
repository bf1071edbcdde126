// Argument checks shared by the localmap kernels: core's InvalidArgument
// becomes torch's ValueError (Python sees ValueError, naming the argument).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/mesh.h"
#include "core/rank_steps.h"
#include "core/placement.h"

namespace tlm::ops {

// Parses `spec` for a tensor of rank `ndim` on a mesh of `mesh_ndim` dims
// (mesh_ndim < 0: the spec's own length); `what` names the argument.
PlacementSpec parse_placements(std::string_view spec, int64_t ndim, int64_t mesh_ndim, const char* op,
                               const char* what);

// `grad` when given (checked like the placements), else the gradient of `spec`.
std::string grad_placements_of(const PlacementSpec& spec, std::optional<std::string_view> grad, int64_t ndim,
                               const char* op);

// A mesh of `mesh_shape` with `coordinate` inside it; throws ValueError.
Mesh checked_mesh(at::IntArrayRef mesh_shape, at::IntArrayRef coordinate, size_t num_groups, const char* op);

std::vector<int64_t> local_shape_at(at::IntArrayRef global_shape, const Mesh& mesh, const PlacementSpec& spec,
                                    at::IntArrayRef coordinate, const char* op, const char* what);

// Every argument of localmap::redistribute checked (ValueError naming it), with
// the steps this rank runs.
struct RedistributeCall {
  Mesh mesh;
  PlacementSpec src, dst;
  std::vector<int64_t> out_shape;  // local shape of the result at this coordinate
  std::vector<RankStep> steps;
};
RedistributeCall check_redistribute(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                                    std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                                    size_t num_groups, std::optional<std::string_view> grad_placements);

}  // namespace tlm::ops
