// local_map regions: validation and global <-> local shapes of a region's
// boundary, one call per boundary (csrc/core/region.h does the work).
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "core/region.h"
#include "core/tensor_meta.h"

namespace py = pybind11;

namespace tlm::pybind {
namespace {

using OptShape = std::optional<std::vector<int64_t>>;
using OptSpec = std::optional<std::string>;

// shapes[i] is None for a non-tensor value; type_names[i] names its type for messages.
std::vector<RegionValue> region_values(const std::vector<OptShape>& shapes, const std::vector<std::string>& type_names,
                                       const std::vector<OptSpec>& actual) {
  if (type_names.size() != shapes.size() || (!actual.empty() && actual.size() != shapes.size()))
    throw InvalidArgument("region values: shapes, type_names and actual specs must have the same length");
  std::vector<RegionValue> out(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    out[i].is_tensor = shapes[i].has_value();
    if (shapes[i]) {
      check_shape(*shapes[i], "value " + std::to_string(i) + " shape");
      out[i].shape = *shapes[i];
    }
    out[i].type_name = type_names[i];
    if (!actual.empty()) out[i].actual = actual[i];
  }
  return out;
}

py::list spec_list(const std::vector<std::optional<PlacementSpec>>& specs) {
  py::list out;
  for (const auto& s : specs) out.append(s ? py::cast(to_string(*s)) : py::none());
  return out;
}

}  // namespace

void bind_local_map(py::module_& m) {
  m.def(
      "grad_specs",
      [](const std::vector<OptSpec>& specs) {
        std::vector<OptSpec> out;
        for (const auto& s : specs) out.push_back(s ? OptSpec(to_string(grad_spec(parse_spec(*s)))) : std::nullopt);
        return out;
      },
      py::arg("specs"), "Gradient placement spec of each spec (Partial -> Replicate); None stays None.");
  m.def(
      "plan_region_inputs",
      [](std::vector<int64_t> mesh_shape, std::vector<std::string> mesh_dim_names, const std::vector<OptShape>& shapes,
         const std::vector<std::string>& type_names, const std::vector<OptSpec>& specs,
         const std::vector<OptSpec>& actual, bool redistribute_inputs, bool all_ranks, const std::string& what) {
        Mesh mesh = make_mesh(std::move(mesh_shape), std::move(mesh_dim_names));
        RegionInputPlan plan =
            plan_region_inputs(mesh, region_values(shapes, type_names, actual), specs, redistribute_inputs, all_ranks, what);
        py::list shapes_out, offsets_out;
        for (size_t r = 0; r < plan.layouts.size(); ++r) {
          py::list srow, orow;
          for (size_t i = 0; i < plan.layouts[r].size(); ++i) {
            const bool t = plan.specs[i].has_value();
            srow.append(t ? py::cast(plan.layouts[r][i].shape) : py::none());
            orow.append(t ? py::cast(plan.layouts[r][i].offset) : py::none());
          }
          shapes_out.append(srow);
          offsets_out.append(orow);
        }
        py::dict d;
        d["specs"] = spec_list(plan.specs);
        d["redistribute"] = plan.redistribute;
        d["local_shapes"] = shapes_out;
        d["offsets"] = offsets_out;
        return d;
      },
      py::arg("mesh_shape"), py::arg("mesh_dim_names"), py::arg("shapes"), py::arg("type_names"), py::arg("specs"),
      py::arg("actual") = std::vector<OptSpec>{}, py::arg("redistribute_inputs") = false,
      py::arg("all_ranks") = false, py::arg("what") = "in_placements",
      "Validates a local_map region's flattened arguments (global shapes; None for non-tensors) against\n"
      "their declared placement specs and returns {specs (canonical), redistribute (argument indices\n"
      "whose DTensor placements differ), local_shapes[rank][arg], offsets[rank][arg]} for rank 0, or\n"
      "for every rank when all_ranks. Raises ValueError naming the argument index on bad input.");
  m.def(
      "plan_region_outputs",
      [](std::vector<int64_t> mesh_shape, std::vector<std::string> mesh_dim_names, const std::vector<OptShape>& shapes,
         const std::vector<std::string>& type_names, const std::vector<OptSpec>& specs,
         const std::vector<std::vector<std::vector<int64_t>>>& other_rank_shapes, const std::string& what) {
        Mesh mesh = make_mesh(std::move(mesh_shape), std::move(mesh_dim_names));
        RegionOutputPlan plan = plan_region_outputs(mesh, region_values(shapes, type_names, {}), specs,
                                                    other_rank_shapes, what);
        py::list globals;
        for (size_t i = 0; i < plan.global_shapes.size(); ++i)
          globals.append(plan.specs[i] ? py::cast(plan.global_shapes[i]) : py::none());
        py::dict d;
        d["specs"] = spec_list(plan.specs);
        d["global_shapes"] = globals;
        d["offsets"] = plan.offsets;
        return d;
      },
      py::arg("mesh_shape"), py::arg("mesh_dim_names"), py::arg("shapes"), py::arg("type_names"), py::arg("specs"),
      py::arg("other_rank_shapes") = std::vector<std::vector<std::vector<int64_t>>>{},
      py::arg("what") = "out_placements",
      "Global shapes of a local_map region's flattened outputs from their local shapes on rank 0\n"
      "(None for non-tensors), checked against the local shapes of further ranks when given.\n"
      "Returns {specs, global_shapes, offsets[rank][output]}.");
}

}  // namespace tlm::pybind
