// Strategy enumeration, per-rank call arguments and op work, in bulk JSON.
#include <map>

#include <pybind11/stl.h>

#include "python/bindings.h"
#include "core/graph.h"
#include "core/json.h"
#include "core/strategy.h"
#include "core/strategies/rule.h"

namespace py = pybind11;

namespace tlm::pybind {

namespace {

OpStrategy strategy_from_json(const std::string& text) {
  json::Value v = json::parse(text);
  OpStrategy s;
  for (const auto& x : v.at("inputs", "strategy").as_array("strategy.inputs"))
    s.inputs.push_back(parse_spec(x.as_string("strategy.inputs[]")));
  for (const auto& x : v.at("outputs", "strategy").as_array("strategy.outputs"))
    s.outputs.push_back(parse_spec(x.as_string("strategy.outputs[]")));
  return s;
}

void check_node(const Graph& g, int node) {
  if (node < 0 || node >= static_cast<int>(g.nodes.size()))
    throw InvalidArgument("node " + std::to_string(node) + " is outside the graph (0.." +
                          std::to_string(static_cast<int>(g.nodes.size()) - 1) + ")");
}

// Appends one node's strategies as JSON text directly: the result for a large
// graph has millions of placements, so we skip building a json::Value tree.
void append_strategies(std::string& out, const NodeStrategies& ns) {
  out += "{\"family\":\"";
  out += ns.family;
  out += "\",\"fell_back\":";
  out += ns.fell_back ? "true" : "false";
  out += ",\"strategies\":[";
  bool first = true;
  for (const auto& s : ns.strategies) {
    if (!first) out += ',';
    first = false;
    out += "{\"inputs\":[";
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (i) out += ',';
      out += '"';
      out += to_string(s.inputs[i]);
      out += '"';
    }
    out += "],\"outputs\":[";
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      if (i) out += ',';
      out += '"';
      out += to_string(s.outputs[i]);
      out += '"';
    }
    out += "]}";
  }
  out += "]}";
}

}  // namespace

void bind_strategy(py::module_& m) {
  m.def("ops_with_rules", &ops_with_rules, "Every op with a C++ sharding rule, sorted.");
  m.def("set_arg_audit", &strategies::set_arg_audit, py::arg("on"),
        "Record which (op, schema position, argument name) the rules read; switching on clears the record.");
  m.def(
      "arg_audit_records",
      [] {
        std::vector<std::tuple<std::string, size_t, std::string>> out;
        for (const auto& a : strategies::arg_audit_records()) out.emplace_back(a.op, a.pos, a.name);
        return out;
      },
      "The recorded (op, position, name) triples, sorted.");
  m.def(
      "enumerate_strategies",
      [](const std::string& ir_json, bool fallback_replicate, bool prune_partials) {
        Graph g = read_graph(ir_json);
        StrategyOptions opt;
        opt.fallback_replicate = fallback_replicate;
        std::vector<NodeStrategies> all;
        if (prune_partials) {
          all = enumerate_graph_strategies(g, opt);
        } else {
          all.resize(g.nodes.size());
          for (size_t i = 0; i < g.nodes.size(); ++i)
            if (g.nodes[i].op != "output") all[i] = enumerate_strategies(g, static_cast<int>(i), opt);
        }
        std::string out = "[";
        for (size_t i = 0; i < g.nodes.size(); ++i) {
          if (i) out += ',';
          if (g.nodes[i].op == "output") {
            out += "null";
            continue;
          }
          append_strategies(out, all[i]);
        }
        out += "]";
        return out;
      },
      py::arg("ir_json"), py::arg("fallback_replicate") = true, py::arg("prune_partials") = true,
      "Strategies of every IR node as a JSON list (null for the output node): "
      "{family, fell_back, strategies: [{inputs: [spec], outputs: [spec]}]}. "
      "Raises ValueError (NoStrategyError) for an op without a rule when fallback_replicate is False. "
      "prune_partials drops strategies needing a Partial kind no producer emits (the planner's view); "
      "False gives every rule's full set (what a per-op verifier should check).");
  m.def(
      "local_call_args",
      [](const std::string& ir_json, int node, const std::string& strategy_json, std::vector<int64_t> coord) {
        Graph g = read_graph(ir_json);
        check_node(g, node);
        return local_call_args(g, node, strategy_from_json(strategy_json), coord).dump();
      },
      py::arg("ir_json"), py::arg("node"), py::arg("strategy_json"), py::arg("coord"),
      "The node's {args, kwargs} for the rank at mesh coordinate `coord` under a strategy "
      "({inputs, outputs} JSON): shape arguments rewritten to that rank's local sizes.");
  m.def(
      "op_work",
      [](const std::string& ir_json, int node, const std::string& strategy_json) {
        Graph g = read_graph(ir_json);
        check_node(g, node);
        OpWork w = op_work(g, node, strategy_from_json(strategy_json));
        return py::make_tuple(w.flops, w.bytes);
      },
      py::arg("ir_json"), py::arg("node"), py::arg("strategy_json"),
      "(flops, bytes) of the node under a strategy, on the largest local shard.");
  m.def(
      "strategy_counts",
      [](const std::string& ir_json) {
        Graph g = read_graph(ir_json);
        std::map<std::string, std::pair<int64_t, int64_t>> counts;
        const auto all = enumerate_graph_strategies(g);
        for (size_t i = 0; i < g.nodes.size(); ++i) {
          if (g.nodes[i].op == "output") continue;
          const auto& ns = all[i];
          auto& c = counts[ns.family];
          c.first += 1;
          c.second += static_cast<int64_t>(ns.strategies.size());
        }
        json::Value out = json::Value::Object{};
        for (const auto& kv : counts) {
          json::Value e = json::Value::Object{};
          e.set("nodes", json::Value(kv.second.first));
          e.set("strategies", json::Value(kv.second.second));
          out.set(kv.first, std::move(e));
        }
        return out.dump();
      },
      py::arg("ir_json"), "Per op family: {family: {nodes, strategies}} (JSON), for reporting.");
}

}  // namespace tlm::pybind
