// The libtorch layer's direct entry for traced rank programs: the redistribute
// kernel without the dispatcher around it (torch/ops/localmap_ops.h), so make_fx
// records its collectives, waits and local steps one node each.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/python.h>

#include <algorithm>
#include <string>
#include <vector>

#include "python/bindings.h"
#include "torch/ops/localmap_ops.h"

namespace py = pybind11;

namespace tlm::pybind {

void bind_ops(py::module_& m) {
  m.def(
      "redistribute_steps",
      [](const at::Tensor& x, std::vector<int64_t> global_shape, const std::string& src, const std::string& dst,
         std::vector<int64_t> mesh_shape, std::vector<int64_t> coordinate, const std::vector<std::string>& groups,
         std::optional<std::string> grad_placements) {
        std::optional<std::string_view> grad;
        if (grad_placements) grad = *grad_placements;
        return ops::redistribute_steps(x, global_shape, src, dst, mesh_shape, coordinate, groups, grad);
      },
      py::arg("x"), py::arg("global_shape"), py::arg("src_placements"), py::arg("dst_placements"),
      py::arg("mesh_shape"), py::arg("coordinate"), py::arg("group_names"), py::arg("grad_placements") = py::none(),
      "localmap.redistribute's kernel as separate dispatcher calls (one traced node per collective and wait)");
  // Read from the dispatcher, so the list is what TORCH_LIBRARY(localmap) registered.
  m.def(
      "op_names",
      [] {
        const std::string prefix = "localmap::";
        std::vector<std::string> names;
        for (const auto& op : c10::Dispatcher::singleton().getAllOpNames()) {
          if (op.name.rfind(prefix, 0) == 0) names.push_back(op.name.substr(prefix.size()));
        }
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        return names;
      },
      "the torch.ops.localmap op names this extension registered, sorted");
}

}  // namespace tlm::pybind
