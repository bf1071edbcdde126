#include <pybind11/stl.h>

#include "python/bindings.h"
#include "core/graph.h"
#include "core/json.h"
#include "core/mesh.h"
#include "core/placement.h"

namespace py = pybind11;

namespace tlm::pybind {

void bind_core(py::module_& m) {
  m.def(
      "normalize_spec",
      [](const std::string& spec, int64_t ndim, size_t mesh_ndim, const std::string& what) {
        PlacementSpec s = parse_spec(spec);
        if (ndim >= 0) validate_spec(s, ndim, mesh_ndim, what);
        return to_string(s);
      },
      py::arg("spec"), py::arg("ndim") = -1, py::arg("mesh_ndim") = 0, py::arg("what") = "placements",
      "Parses a placement spec string and returns its canonical spelling; validates it "
      "against a tensor rank and mesh ndim when ndim >= 0.");
  m.def(
      "check_mesh",
      [](std::vector<int64_t> shape, std::vector<std::string> names) {
        return make_mesh(std::move(shape), std::move(names)).to_string();
      },
      py::arg("shape"), py::arg("dim_names") = std::vector<std::string>{});
  m.def(
      "check_graph",
      [](const std::string& doc) {
        Graph g = read_graph(doc);
        return g.nodes.size();
      },
      py::arg("ir_json"), "Parses and validates a planner IR document; returns its node count.");
}

}  // namespace tlm::pybind
