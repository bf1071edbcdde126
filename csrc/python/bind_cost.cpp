// Python access to the cost model: device table, collective and
// redistribution prices (tests, plan printouts). Specs are strings ("S(0)R"),
// meshes are shape lists; every call is one C++ evaluation, no per-node loops.
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "core/calibration.h"
#include "core/cost_model.h"
#include "core/mesh.h"

namespace py = pybind11;

namespace tlm::pybind {

namespace {

py::dict device_dict(const DeviceProfile& d) {
  py::dict out;
  out["name"] = d.name;
  out["peak_flops_fp32"] = d.peak_flops_fp32;
  out["peak_flops_bf16"] = d.peak_flops_bf16;
  out["peak_flops_fp8"] = d.peak_flops_fp8;
  out["peak_flops_fp64"] = d.peak_flops_fp64;
  out["memory_bandwidth"] = d.memory_bandwidth;
  out["memory_capacity"] = d.memory_capacity;
  out["compute_efficiency"] = d.compute_efficiency;
  out["memory_efficiency"] = d.memory_efficiency;
  out["kernel_overhead_s"] = d.kernel_overhead_s;
  out["optimizer_kernel_overhead_s"] = d.optimizer_kernel_overhead_s;
  out["optimizer_bandwidth"] = d.optimizer_bandwidth;
  out["matmul_half_dim"] = d.matmul_half_dim;
  out["attention_half_dim"] = d.attention_half_dim;
  out["attention_causal_tile"] = d.attention_causal_tile;
  return out;
}

py::dict topology_dict(const Topology& t) {
  py::dict out;
  out["ranks_per_node"] = t.ranks_per_node;
  out["intra_bandwidth"] = t.intra_bandwidth;
  out["inter_bandwidth"] = t.inter_bandwidth;
  out["intra_latency"] = t.intra_latency;
  out["inter_latency"] = t.inter_latency;
  return out;
}

TensorMeta tensor(std::vector<int64_t> shape, const std::string& dtype) {
  check_shape(shape, "tensor shape");
  return TensorMeta{std::move(shape), parse_dtype(dtype)};
}

PlacementSpec spec_for(const std::string& text, const TensorMeta& t, const Mesh& mesh, const char* what) {
  PlacementSpec s = parse_spec(text);
  validate_spec(s, t.ndim(), mesh.ndim(), what);
  return s;
}

}  // namespace

void bind_cost(py::module_& m) {
  m.def("device_names", &device_names, "Devices of the cost model's table.");
  m.def(
      "device_profile", [](const std::string& name) { return device_dict(device_profile(name)); },
      py::arg("name"), "Datasheet constants of a device (ValueError listing the known ones if unknown).");
  m.def(
      "default_topology", [](const std::string& name) { return topology_dict(default_topology(name)); },
      py::arg("name"), "The usual node topology of a device.");
  m.def(
      "mesh_dim_topology",
      [](std::vector<int64_t> mesh_shape, int mesh_dim, int64_t ranks_per_node) {
        const GroupTopology g = group_topology(make_mesh(std::move(mesh_shape)), mesh_dim, ranks_per_node);
        py::dict out;
        out["kind"] = to_string(g.kind);
        out["size"] = g.size;
        out["local"] = g.local;
        out["nodes"] = g.nodes;
        return out;
      },
      py::arg("mesh_shape"), py::arg("mesh_dim"), py::arg("ranks_per_node"),
      "How the process groups of a mesh dim sit on nodes (single/intra/inter/hierarchical/mixed).");

  py::class_<CostModel>(m, "CostModel",
                        "Roofline + collective cost model of one device, optionally calibrated "
                        "(calibration = profile JSON text; see docs/cost_model.md).")
      .def(py::init(&make_cost_model), py::arg("device") = "H100", py::arg("calibration") = "")
      .def_property_readonly("device", [](const CostModel& c) { return device_dict(c.device); })
      .def_property_readonly("topology", [](const CostModel& c) { return topology_dict(c.topology); })
      .def_property_readonly("fits",
                             [](const CostModel& c) {
                               py::list out;
                               for (const auto& f : c.fits) {
                                 py::dict d;
                                 d["collective"] = collective_name(f.kind);
                                 d["link"] = f.inter ? "inter" : "intra";
                                 d["latency"] = f.latency;
                                 d["bandwidth"] = f.bandwidth;
                                 d["samples"] = f.samples;
                                 out.append(d);
                               }
                               return out;
                             })
      .def(
          "compute_seconds",
          [](const CostModel& c, double flops, double bytes, const std::string& dtype) {
            return c.compute_seconds(OpWork{flops, bytes}, parse_dtype(dtype));
          },
          py::arg("flops"), py::arg("bytes"), py::arg("dtype") = "float32", "Roofline time of one op's work.")
      .def(
          "collective_seconds",
          [](const CostModel& c, const std::string& kind, std::vector<int64_t> mesh_shape, int mesh_dim,
             double bytes) {
            return c.collective_seconds(parse_collective_name(kind), make_mesh(std::move(mesh_shape)), mesh_dim,
                                        bytes);
          },
          py::arg("collective"), py::arg("mesh_shape"), py::arg("mesh_dim"), py::arg("bytes"),
          "Time of all_gather/reduce_scatter/all_reduce/all_to_all over a mesh dim's groups, "
          "`bytes` per rank (nccl-tests convention).")
      .def(
          "redistribute_seconds",
          [](const CostModel& c, std::vector<int64_t> shape, const std::string& dtype,
             std::vector<int64_t> mesh_shape, const std::string& src, const std::string& dst) {
            const TensorMeta t = tensor(std::move(shape), dtype);
            const Mesh mesh = make_mesh(std::move(mesh_shape));
            return c.redistribute_seconds(t, mesh, spec_for(src, t, mesh, "source placements"),
                                          spec_for(dst, t, mesh, "target placements"));
          },
          py::arg("shape"), py::arg("dtype"), py::arg("mesh_shape"), py::arg("src"), py::arg("dst"),
          "Seconds to redistribute a tensor from `src` to `dst`; inf when DTensor refuses.")
      .def(
          "redistribute_steps",
          [](const CostModel& c, std::vector<int64_t> shape, const std::string& dtype,
             std::vector<int64_t> mesh_shape, const std::string& src, const std::string& dst) {
            const TensorMeta t = tensor(std::move(shape), dtype);
            const Mesh mesh = make_mesh(std::move(mesh_shape));
            const RedistributePlan plan = plan_redistribute(t.shape, mesh, spec_for(src, t, mesh, "source placements"),
                                                            spec_for(dst, t, mesh, "target placements"));
            // A run the runtime merges into one collective is priced on its first step; the
            // others say they go with it ("merged": true, 0 s), so the prices sum to
            // redistribute_seconds.
            py::list out;
            for (const StepRun& run : merged_step_runs(plan.steps, t.shape, mesh)) {
              const double seconds = c.run_seconds(plan.steps, run, t, mesh);
              for (size_t i = run.begin; i < run.end; ++i) {
                const CollectiveStep& step = plan.steps[i];
                py::dict d;
                d["collective"] = collective_name(step.kind);
                d["mesh_dim"] = step.mesh_dim;
                d["before"] = to_string(step.before);
                d["after"] = to_string(step.after);
                d["seconds"] = i == run.begin ? seconds : 0.0;
                d["merged"] = i != run.begin;
                out.append(d);
              }
            }
            return out;
          },
          py::arg("shape"), py::arg("dtype"), py::arg("mesh_shape"), py::arg("src"), py::arg("dst"),
          "The redistribution plan's steps with their prices (for plan printouts); ValueError when "
          "DTensor refuses the transition.")
      .def(
          "local_bytes",
          [](const CostModel& c, std::vector<int64_t> shape, const std::string& dtype,
             std::vector<int64_t> mesh_shape, const std::string& spec) {
            const TensorMeta t = tensor(std::move(shape), dtype);
            const Mesh mesh = make_mesh(std::move(mesh_shape));
            return c.local_bytes(t, mesh, spec_for(spec, t, mesh, "placements"));
          },
          py::arg("shape"), py::arg("dtype"), py::arg("mesh_shape"), py::arg("spec"),
          "Bytes of the largest local shard.");
}

}  // namespace tlm::pybind
