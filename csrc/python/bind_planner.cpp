#include <pybind11/stl.h>

#include <optional>

#include "python/bindings.h"
#include "core/plan_json.h"
#include "core/planner.h"

namespace py = pybind11;

namespace tlm::pybind {

void bind_planner(py::module_& m) {
  m.attr("PLAN_FORMAT_VERSION") = kPlanFormatVersion;
  m.def(
      "plan",
      [](const std::string& ir_json, const std::string& options_json) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        std::optional<Plan> plan;
        {
          py::gil_scoped_release release;  // planning is pure C++; let other Python threads run
          plan = plan_graph(g, opt);
        }
        return plan_to_json(*plan).dump();
      },
      py::arg("ir_json"), py::arg("options_json") = "",
      "Plans a whole IR graph in one call; returns the plan as JSON text.");
  m.def(
      "build_cost_tables_stats",
      [](const std::string& ir_json, const std::string& options_json) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        BuildStats s;
        {
          py::gil_scoped_release release;
          s = build_only(g, opt);
        }
        py::dict d;
        d["nodes"] = s.nodes;
        d["strategies"] = s.strategies;
        d["edges"] = s.edges;
        d["edge_matrix_entries"] = s.edge_matrix_entries;
        d["distinct_redistribution_costs"] = s.distinct_redistribution_costs;
        return d;
      },
      py::arg("ir_json"), py::arg("options_json") = "",
      "Strategies and every cost of a graph, no solve (benchmarks): counts of the solver problem.");
  m.def(
      "graph_work",
      [](const std::string& ir_json) {
        OpWork w = graph_work(read_graph(ir_json));
        return std::make_pair(w.flops, w.bytes);
      },
      py::arg("ir_json"), "(flops, bytes) of every op of a graph; prices local_map region bodies.");
  m.def(
      "rank_call_args",
      [](const std::string& ir_json, const std::string& plan_json, const std::vector<int64_t>& coord) {
        return rank_call_args(read_graph(ir_json), plan_from_json(json::parse(plan_json)), coord).dump();
      },
      py::arg("ir_json"), py::arg("plan_json"), py::arg("coord"),
      "Per-node local call arguments for the rank at mesh coordinate `coord` (JSON list).");
}

}  // namespace tlm::pybind
