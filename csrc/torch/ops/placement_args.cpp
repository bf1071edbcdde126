#include "torch/ops/placement_args.h"

#include <c10/util/Exception.h>

#include "core/layout.h"
#include "core/region.h"

namespace tlm::ops {

PlacementSpec parse_placements(std::string_view spec, int64_t ndim, int64_t mesh_ndim, const char* op,
                               const char* what) {
  try {
    PlacementSpec p = parse_spec(std::string(spec));
    const size_t mesh_dims = mesh_ndim < 0 ? p.size() : static_cast<size_t>(mesh_ndim);
    validate_spec(p, ndim, mesh_dims, "the spec");
    return p;
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, op, ": ", what, " '", spec, "' is not valid (", e.what(),
                      "); expected one placement per mesh dim, e.g. 'S(0)R' or 'RP(sum)'");
  }
}

std::string grad_placements_of(const PlacementSpec& spec, std::optional<std::string_view> grad, int64_t ndim,
                               const char* op) {
  if (!grad) return to_string(grad_spec(spec));
  PlacementSpec g = parse_placements(*grad, ndim, static_cast<int64_t>(spec.size()), op, "grad_placements");
  return to_string(g);
}

Mesh checked_mesh(at::IntArrayRef mesh_shape, at::IntArrayRef coordinate, size_t num_groups, const char* op) {
  TORCH_CHECK_VALUE(!mesh_shape.empty(), op, ": mesh_shape is empty (expected one size per mesh dim)");
  for (int64_t s : mesh_shape) TORCH_CHECK_VALUE(s > 0, op, ": mesh_shape ", mesh_shape, " has a size < 1");
  TORCH_CHECK_VALUE(coordinate.size() == mesh_shape.size(), op, ": coordinate ", coordinate, " has ",
                    coordinate.size(), " entries; expected one per mesh dim (mesh_shape ", mesh_shape, ")");
  for (size_t m = 0; m < coordinate.size(); ++m)
    TORCH_CHECK_VALUE(coordinate[m] >= 0 && coordinate[m] < mesh_shape[m], op, ": coordinate ", coordinate,
                      " is outside mesh_shape ", mesh_shape);
  TORCH_CHECK_VALUE(num_groups == mesh_shape.size(), op, ": group_names has ", num_groups,
                    " entries; expected one process group name per mesh dim (mesh_shape ", mesh_shape, ")");
  return make_mesh(mesh_shape.vec());
}

std::vector<int64_t> local_shape_at(at::IntArrayRef global_shape, const Mesh& mesh, const PlacementSpec& spec,
                                    at::IntArrayRef coordinate, const char* op, const char* what) {
  try {
    return local_layout(global_shape.vec(), mesh, spec, coordinate.vec()).shape;
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, op, ": ", what, ": ", e.what());
  }
}

RedistributeCall check_redistribute(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                                    std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                                    size_t num_groups, std::optional<std::string_view> grad_placements) {
  constexpr const char* op = "localmap.redistribute";
  RedistributeCall call{checked_mesh(mesh_shape, coordinate, num_groups, op), {}, {}, {}, {}};
  for (int64_t s : global_shape) TORCH_CHECK_VALUE(s >= 0, op, ": global_shape ", global_shape, " has a negative size");
  const auto ndim = static_cast<int64_t>(global_shape.size());
  const auto mdim = static_cast<int64_t>(mesh_shape.size());
  call.src = parse_placements(src, ndim, mdim, op, "src_placements");
  call.dst = parse_placements(dst, ndim, mdim, op, "dst_placements");
  grad_placements_of(call.dst, grad_placements, ndim, op);
  const auto in_shape = local_shape_at(global_shape, call.mesh, call.src, coordinate, op, "global_shape");
  // Symbolic sizes (dynamic-shape tracing) are specialized: a rank's local shape is
  // fixed by the global shape, the placements and the coordinate.
  std::vector<int64_t> sizes;
  for (const c10::SymInt& s : x.sym_sizes()) sizes.push_back(s.guard_int(__FILE__, __LINE__));
  TORCH_CHECK_VALUE(sizes == in_shape, op, ": x has shape ", at::IntArrayRef(sizes), " but the local shard of ",
                    global_shape, " placed ", src, " at coordinate ", coordinate, " has shape ",
                    at::IntArrayRef(in_shape));
  call.out_shape = local_shape_at(global_shape, call.mesh, call.dst, coordinate, op, "global_shape");
  try {
    call.steps = rank_redistribute_steps(global_shape.vec(), call.mesh, call.src, call.dst, coordinate.vec());
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, op, ": ", e.what());
  }
  return call;
}

}  // namespace tlm::ops
