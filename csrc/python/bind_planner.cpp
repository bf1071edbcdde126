#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <tuple>

#include "python/bindings.h"
#include "core/solver/problem_io.h"
#include "core/plan_check.h"
#include "core/plan_fingerprint.h"
#include "core/plan_json.h"
#include "core/collective_buckets.h"
#include "core/gather_units.h"
#include "core/cost_tables.h"
#include "core/overlap_schedule.h"
#include "core/placement.h"
#include "core/planner.h"
#include "core/shared_moves.h"
#include "core/background_release.h"
#include "core/solver/trace.h"

namespace py = pybind11;

namespace tlm::pybind {

namespace {

// A rank program as the scheduling passes read it: one letter per node (F fixed, C
// compute, M move, S collective start, W wait), inputs as offsets into one flat list.
std::vector<ScheduleNode> schedule_nodes(const char* what, const std::string& kinds,
                                         const std::vector<int64_t>& input_offsets, const std::vector<int>& inputs,
                                         const std::vector<int64_t>& bytes) {
  const size_t n = kinds.size();
  if (input_offsets.size() != n + 1 || bytes.size() != n || input_offsets.back() != static_cast<int64_t>(inputs.size()))
    throw InvalidArgument(std::string(what) + ": expected len(input_offsets) == len(kinds) + 1 == len(bytes) + 1 and "
                          "input_offsets[-1] == len(inputs)");
  std::vector<ScheduleNode> nodes(n);
  for (size_t i = 0; i < n; ++i) {
    switch (kinds[i]) {
      case 'F': nodes[i].kind = ScheduleKind::Fixed; break;
      case 'C': nodes[i].kind = ScheduleKind::Compute; break;
      case 'M': nodes[i].kind = ScheduleKind::Move; break;
      case 'S': nodes[i].kind = ScheduleKind::Start; break;
      case 'W': nodes[i].kind = ScheduleKind::Wait; break;
      default: throw InvalidArgument(std::string(what) + ": unknown node kind '" + kinds[i] +
                                     "'; expected one of F (fixed), C (compute), M (move), S (start), W (wait)");
    }
    if (input_offsets[i] < 0 || input_offsets[i] > input_offsets[i + 1])
      throw InvalidArgument(std::string(what) + ": input_offsets must start at 0 and not decrease");
    nodes[i].inputs.assign(inputs.begin() + input_offsets[i], inputs.begin() + input_offsets[i + 1]);
    nodes[i].bytes = bytes[i];
  }
  return nodes;
}

}  // namespace

void bind_planner(py::module_& m) {
  m.attr("PLAN_FORMAT_VERSION") = kPlanFormatVersion;
  m.def(
      "plan",
      [](const std::string& ir_json, const std::string& options_json, py::object progress, double host_seconds) {
        const auto t0 = std::chrono::steady_clock::now();
        solver::trace("plan: reading the IR");
        // The IR, the cost tables, the plan and its document are freed on a background thread
        // once the text is written (background_release.h): on a 70B graph that took 0.3 s
        // of the call. Freed alongside the document's making instead, it slowed that by as much.
        auto graph = std::make_shared<Graph>(read_graph(ir_json));
        Graph& g = *graph;
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        opt.elapsed_before_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!(host_seconds >= 0) || !std::isfinite(host_seconds))
          throw InvalidArgument("plan: host_seconds must be a finite number of seconds >= 0");
        opt.host_seconds = host_seconds;
        // The planner copies its options (and so this callback) while the GIL is released:
        // the callable is held through a shared_ptr, whose copies touch no Python refcount.
        auto callback = progress.is_none() ? nullptr : std::make_shared<py::object>(progress);
        if (callback)
          opt.on_progress = [callback](double seconds, double cost, double bound) {
            py::gil_scoped_acquire gil;
            try {
              (*callback)(seconds, cost, bound);
            } catch (py::error_already_set& e) {  // a display must not stop the solve
              e.discard_as_unraisable("torch_localmap plan progress callback");
            }
          };
        std::optional<Plan> plan;
        std::shared_ptr<void> working;
        {
          py::gil_scoped_release release;  // planning is pure C++; let other Python threads run
          plan = plan_graph(g, opt, &working);
          solver::trace("plan: returned");
        }
        opt.on_progress = nullptr;
        callback.reset();  // the last reference to the callable goes while the GIL is held
        json::Value doc = plan_to_json(*plan);
        add_plan_provenance(doc, g, opt);  // what it was made for: saved plans are checked against it
        solver::trace("plan: document built");
        std::string text = doc.dump();
        solver::trace("plan: document written");
        release_in_background(std::make_shared<std::tuple<std::shared_ptr<void>, std::shared_ptr<Graph>,
                                                          json::Value, std::optional<Plan>>>(
            std::move(working), std::move(graph), std::move(doc), std::move(plan)));
        return text;
      },
      py::arg("ir_json"), py::arg("options_json") = "", py::arg("progress") = py::none(),
      py::arg("host_seconds") = 0.0,
      "Plans a whole IR graph in one call; returns the plan as JSON text. `progress(seconds, cost_s, "
      "bound_s)` is called as the solve improves (from the solver's threads, with the GIL). `host_seconds`: "
      "the caller's own time for this plan outside the call (exporting the graph, reading the plan back), "
      "counted against options.time_limit with the call's.");
  m.def(
      "transfer_plan",
      [](const std::string& ir_json, const std::string& options_json, const std::string& previous_json,
         double tolerance) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        const Plan previous = plan_from_json(json::parse(previous_json));
        PlanTransfer t;
        {
          py::gil_scoped_release release;
          t = transfer_plan(g, opt, previous, tolerance);
        }
        json::Value out{json::Value::Object{}};
        if (t.plan) {
          json::Value doc = plan_to_json(*t.plan);
          add_plan_provenance(doc, g, opt);  // what it was made for, as a solved plan records
          out.set("plan", std::move(doc));
        } else {
          out.set("plan", json::Value());
        }
        out.set("reason", json::Value(t.reason));
        out.set("previous_cost_s", json::Value(t.previous_cost_s));
        out.set("best_cost_s", json::Value(t.best_cost_s));
        out.set("bound_s", json::Value(t.bound_s));
        return out.dump();
      },
      py::arg("ir_json"), py::arg("options_json"), py::arg("previous_json"), py::arg("tolerance"),
      "The previous plan of this program carried to new sizes without a full solve (core/planner.h, "
      "transfer_plan), as JSON text: {plan: the plan document or null, reason, previous_cost_s, best_cost_s, bound_s}.");
  m.def("like_plans", &like_plans, "The torch plans parallelize(like=...) can run (core/cost_tables.h).");
  m.def(
      "check_plan_document", [](const std::string& plan_json) { check_plan_document(json::parse(plan_json)); },
      py::arg("plan_json"),
      "Validates a plan document read from a file (core/plan_check.h); raises ValueError naming the node and field.");
  m.def(
      "plan_mismatch",
      [](const std::string& ir_json, const std::string& options_json, const std::string& plan_json) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        return plan_mismatch(g, opt, json::parse(plan_json));
      },
      py::arg("ir_json"), py::arg("options_json"), py::arg("plan_json"),
      "'' when a validated plan document was made for this graph, mesh and options; else what differs "
      "(core/plan_fingerprint.h).");
  m.def(
      "explain",
      [](const std::string& ir_json, const std::string& options_json, const std::string& plan_json, int node) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        Plan plan = plan_from_json(json::parse(plan_json));
        return explanation_to_json(explain_planned_node(g, opt, plan, node)).dump();
      },
      py::arg("ir_json"), py::arg("options_json"), py::arg("plan_json"), py::arg("node"),
      "Every strategy of one node priced with the rest of the plan kept (core/explain.h), as JSON text.");
  m.def(
      "replication_reason",
      [](const std::string& ir_json, const std::string& options_json, const std::string& plan_json) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        const ReplicationReason r = replication_reason_of_plan(g, opt, plan_from_json(json::parse(plan_json)));
        auto specs = [](const std::vector<PlacementSpec>& list) {
          json::Value::Array out;
          for (const PlacementSpec& s : list) out.push_back(json::Value(to_string(s)));
          return json::Value(std::move(out));
        };
        json::Value doc;
        doc.set("all_replicated", r.all_replicated);
        doc.set("node", r.node);
        doc.set("name", r.name);
        doc.set("op", r.op);
        doc.set("inputs", specs(r.alternative.inputs));
        doc.set("outputs", specs(r.alternative.outputs));
        doc.set("compute_saved_s", r.compute_saved_s);
        doc.set("comm_added_s", r.comm_added_s);
        doc.set("ops_priced", r.ops_priced);
        return doc.dump();
      },
      py::arg("ir_json"), py::arg("options_json"), py::arg("plan_json"),
      "Why a plan replicates everything (core/replication_reason.h), as JSON text.");
  m.def(
      "plan_problem",
      [](const std::string& ir_json, const std::string& options_json) {
        Graph g = read_graph(ir_json);
        PlanOptions opt = read_plan_options(options_json.empty() ? json::Value() : json::parse(options_json));
        py::gil_scoped_release release;
        return solver::write_problem(planner_problem(g, opt));
      },
      py::arg("ir_json"), py::arg("options_json") = "",
      "The solver problem that plan() would solve for this graph and these options, as problem JSON "
      "(torch_localmap.load_problem reads it; the solver's types live in the torch-free _solver module).");
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
  m.def(
      "shared_moves",
      [](const std::string& ir_json, const std::string& plan_json) {
        std::vector<std::tuple<int, int, std::string>> out;
        for (const SharedMove& s : shared_moves(read_graph(ir_json), plan_from_json(json::parse(plan_json))))
          out.emplace_back(s.value.node, s.value.output, to_string(s.to));
        return out;
      },
      py::arg("ir_json"), py::arg("plan_json"),
      "(node, output, spec) of each value the rank program moves once for all its readers "
      "(core/shared_moves.h).");
  m.def(
      "overlap_order",
      [](const std::string& kinds, const std::vector<int64_t>& input_offsets, const std::vector<int>& inputs,
         const std::vector<int64_t>& bytes, int64_t inflight_limit, int max_inflight) {
        return overlap_order(schedule_nodes("overlap_order", kinds, input_offsets, inputs, bytes), inflight_limit,
                             max_inflight);
      },
      py::arg("kinds"), py::arg("input_offsets"), py::arg("inputs"), py::arg("bytes"), py::arg("inflight_limit"),
      py::arg("max_inflight") = -1,
      "A rank program's node order that issues collectives early and waits late (core/overlap_schedule.h). "
      "kinds: one letter per node (F fixed, C compute, M move, S collective start, W wait); node i's inputs are "
      "inputs[input_offsets[i]:input_offsets[i+1]]; bytes: per start its buffer; inflight_limit < 0: unbounded; "
      "max_inflight: collectives in flight at once (< 0: unbounded).");
  m.def(
      "collective_buckets",
      [](const std::string& kinds, const std::vector<int64_t>& input_offsets, const std::vector<int>& inputs,
         const std::vector<int64_t>& bytes, const std::vector<int>& keys, int64_t cap_bytes,
         const std::vector<int64_t>& first_cap_bytes) {
        return collective_buckets(schedule_nodes("collective_buckets", kinds, input_offsets, inputs, bytes), keys,
                                  cap_bytes, first_cap_bytes);
      },
      py::arg("kinds"), py::arg("input_offsets"), py::arg("inputs"), py::arg("bytes"), py::arg("keys"),
      py::arg("cap_bytes"), py::arg("first_cap_bytes") = std::vector<int64_t>{},
      "Per node, the bucket its collective shares with others (-1: none), for a graph described as overlap_order's "
      "(core/collective_buckets.h). keys: per start its compatibility class (-1: never bucketed). "
      "first_cap_bytes: per key, the cap of its first bucket (0: cap_bytes).");
  m.attr("SMALL_UNIT_BYTES") = kSmallUnitBytes;
  m.def("gather_unit", &gather_unit, py::arg("fqn"),
        "The unit a parameter is gathered with: its FQN up to the first list index, else its module "
        "(core/gather_units.h).");
  m.def("small_unit_groups", &small_unit_groups, py::arg("unit_bytes"),
        "Units' bytes in first-use order -> per unit the index of the first unit of its bucket: a unit joins the "
        "bucket before it when either is under SMALL_UNIT_BYTES (core/gather_units.h).");
}

}  // namespace tlm::pybind
