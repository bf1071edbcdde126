#include "core/explain.h"

#include <algorithm>
#include <cmath>


namespace tlm {
namespace {

// Adds one redistribution to `into`; marks the alternative impossible when DTensor refuses it.
void add_move(const CostModel& cm, const Mesh& mesh, const TensorMeta& t, const PlacementSpec& from,
              const PlacementSpec& to, const std::string& where, Alternative& alt, double& into) {
  if (from == to) return;
  const double s = cm.redistribute_seconds(t, mesh, from, to);
  if (std::isfinite(s)) {
    into += s;
    return;
  }
  alt.possible = false;
  if (alt.why_not.empty()) alt.why_not = where + ": " + to_string(from) + " -> " + to_string(to) + " is refused";
}

}  // namespace

Explanation explain_node(const Graph& g, const Plan& plan, const CostModel& cm, int i,
                         const StrategyOptions& strategy_options, int optimizer_states, bool train) {
  const int n = static_cast<int>(g.nodes.size());
  if (plan.nodes.size() != g.nodes.size())
    throw InvalidArgument("explain: the plan has " + std::to_string(plan.nodes.size()) + " nodes, the graph " +
                          std::to_string(n) + "; expected the plan of this graph");
  if (i < 0 || i + 1 >= n)
    throw InvalidArgument("explain: node " + std::to_string(i) + " is not an op or placeholder of this graph (0.." +
                          std::to_string(n - 2) + ")");
  const IrNode& node = g.nodes[i];
  Explanation ex;
  ex.node = i;
  ex.name = node.name;
  ex.op = node.op;

  // Consumers' chosen specs of this node's outputs: (output index, spec, consumer name).
  struct Use {
    int output;
    PlacementSpec spec;
    std::string consumer;
  };
  std::vector<Use> uses;
  for (int j : node.users) {
    if (j == n - 1) continue;  // the output node: below, by graph output
    const auto& ins = g.nodes[j].tensor_inputs;
    for (size_t k = 0; k < ins.size() && k < plan.nodes[j].strategy.inputs.size(); ++k)
      if (ins[k].node == i) uses.push_back({ins[k].output, plan.nodes[j].strategy.inputs[k], g.nodes[j].name});
  }
  {
    const IrNode& out = g.nodes.back();
    const auto& out_args = out.args.as_array().at(0).as_array("output.args[0]");
    const auto& leave = plan.nodes.back().strategy.inputs;
    for (size_t j = 0; j < out_args.size() && j < leave.size(); ++j) {
      std::vector<TensorRef> refs;
      collect_tensor_refs(out_args[j], refs);
      if (!refs.empty() && refs[0].node == i && !leave[j].empty())
        uses.push_back({refs[0].output, leave[j], "graph output " + std::to_string(j)});
    }
  }

  const OpStrategy& chosen = plan.nodes[i].strategy;
  const int64_t copies = train && is_state(node) && node.role == "param" ? 1 + optimizer_states : 1;
  auto price = [&](const OpStrategy& s) {
    Alternative a;
    a.strategy = s;
    a.chosen = s.inputs == chosen.inputs && s.outputs == chosen.outputs;
    if (node.op != "placeholder") {
      const DType dt = node.outputs.empty() ? DType::Float32 : node.outputs[0].dtype;
      a.compute_s = cm.compute_seconds(op_work(g, i, s), dt);
    }
    for (size_t k = 0; k < node.tensor_inputs.size() && k < s.inputs.size(); ++k) {
      const TensorRef& r = node.tensor_inputs[k];
      add_move(cm, g.mesh, g.meta(r), plan.nodes[r.node].strategy.outputs.at(r.output), s.inputs[k],
               "input " + std::to_string(k) + " from " + g.nodes[r.node].name, a, a.comm_in_s);
    }
    for (const Use& u : uses)
      add_move(cm, g.mesh, node.outputs.at(u.output), s.outputs.at(u.output), u.spec, "output to " + u.consumer, a,
               a.comm_out_s);
    for (size_t k = 0; k < node.outputs.size(); ++k) a.bytes += cm.local_bytes(node.outputs[k], g.mesh, s.outputs[k]);
    a.bytes *= copies;
    return a;
  };
  for (const OpStrategy& s : enumerate_strategies(g, i, strategy_options).strategies) ex.alternatives.push_back(price(s));
  if (std::none_of(ex.alternatives.begin(), ex.alternatives.end(), [](const Alternative& a) { return a.chosen; }))
    ex.alternatives.push_back(price(chosen));  // a plan read back may name a strategy outside this list
  auto total = [](const Alternative& a) { return a.possible ? a.compute_s + a.comm_in_s + a.comm_out_s : INFINITY; };
  std::stable_sort(ex.alternatives.begin(), ex.alternatives.end(), [&](const Alternative& a, const Alternative& b) {
    if (a.chosen != b.chosen) return a.chosen;
    return total(a) < total(b);
  });
  return ex;
}

}  // namespace tlm
