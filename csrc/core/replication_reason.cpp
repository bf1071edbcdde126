#include "core/replication_reason.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/explain.h"

namespace tlm {
namespace {

bool replicated(const std::vector<PlacementSpec>& specs) {
  for (const PlacementSpec& s : specs)
    for (const Placement& p : s)
      if (!p.is_replicate()) return false;
  return true;
}

bool sharded(const OpStrategy& s) { return !replicated(s.inputs) || !replicated(s.outputs); }

}  // namespace

ReplicationReason replication_reason(const Graph& g, const Plan& plan, const CostModel& cm,
                                     const StrategyOptions& strategy_options, int optimizer_states, bool train,
                                     int max_ops) {
  ReplicationReason r;
  r.all_replicated = std::all_of(plan.nodes.begin(), plan.nodes.end(), [](const PlannedNode& n) {
    return replicated(n.strategy.inputs) && replicated(n.strategy.outputs);
  });
  if (!r.all_replicated || plan.nodes.size() != g.nodes.size()) return r;

  // The ops where sharding could save the most: largest compute first, graph order on ties.
  // (Priced here: a plan read back from its document carries strategies, not costs.)
  std::vector<int> ops;
  std::vector<double> compute(g.nodes.size(), 0.0);
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) {
    const IrNode& node = g.nodes[i];
    if (node.op == "placeholder") continue;
    const DType dt = node.outputs.empty() ? DType::Float32 : node.outputs[0].dtype;
    compute[i] = cm.compute_seconds(op_work(g, i, plan.nodes[i].strategy), dt);
    if (compute[i] > 0) ops.push_back(i);
  }
  std::stable_sort(ops.begin(), ops.end(), [&](int a, int b) { return compute[a] > compute[b]; });
  if (static_cast<int>(ops.size()) > max_ops) ops.resize(max_ops);

  double best_net = INFINITY;
  bool best_divides = false;
  for (int i : ops) {
    const Explanation ex = explain_node(g, plan, cm, i, strategy_options, optimizer_states, train);
    ++r.ops_priced;
    const Alternative& chosen = ex.alternatives.front();  // explain_node lists the chosen one first
    for (const Alternative& a : ex.alternatives) {
      if (a.chosen || !a.possible || !sharded(a.strategy)) continue;
      const double saved = chosen.compute_s - a.compute_s;
      const double added = a.comm_in_s + a.comm_out_s - chosen.comm_in_s - chosen.comm_out_s;
      const double net = added - saved;
      // Alternatives that divide the work come first (one that saves nothing, e.g. a pending
      // sum passed on, says less about why); then the least net cost; on equal net the one
      // saving more compute; then the first (the op with most compute).
      const bool divides = saved > 0;
      if (divides != best_divides ? divides
                                  : (net < best_net || (net == best_net && saved > r.compute_saved_s))) {
        best_divides = divides;
        best_net = net;
        r.node = i;
        r.name = ex.name;
        r.op = ex.op;
        r.alternative = a.strategy;
        r.compute_saved_s = saved;
        r.comm_added_s = added;
      }
    }
  }
  return r;
}

}  // namespace tlm
