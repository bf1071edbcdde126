#include "core/plain_state.h"

#include <algorithm>

namespace tlm {

namespace {

bool replicated(const PlacementSpec& spec) {
  return std::all_of(spec.begin(), spec.end(), [](const Placement& p) { return p.is_replicate(); });
}

// A parameter the cost tables charge an optimizer step (cost_tables.cpp: train-mode
// parameter placeholders with an output).
bool has_optimizer_step(const IrNode& node) {
  return node.op == "placeholder" && node.role == "param" && !node.outputs.empty();
}

}  // namespace

bool replicates_all_state(const Graph& g, const Plan& plan) {
  for (size_t i = 0; i < g.nodes.size() && i < plan.nodes.size(); ++i) {
    if (!is_state(g.nodes[i])) continue;
    for (const PlacementSpec& spec : plan.nodes[i].strategy.outputs)
      if (!replicated(spec)) return false;
  }
  return true;
}

int64_t replicated_state_bytes(const Graph& g, int optimizer_states) {
  int64_t bytes = 0;
  for (const IrNode& node : g.nodes) {
    if (!is_state(node)) continue;
    const int64_t copies = node.role == "param" ? 2 + optimizer_states : 1;
    for (const TensorMeta& t : node.outputs) bytes += copies * t.nbytes();
  }
  return bytes;
}

double state_dispatch_seconds(const Graph& g, const CostModel& cm, int optimizer_states) {
  double seconds = 0;
  for (const IrNode& node : g.nodes)
    if (has_optimizer_step(node) && node.outputs[0].numel() > 0) seconds += cm.optimizer_dispatch_seconds(optimizer_states);
  return seconds;
}

double price_state_plain(const Graph& g, const CostModel& cm, int optimizer_states, Plan& plan) {
  if (plan.summary.mode != "train" || !replicates_all_state(g, plan)) return 0;
  const double per_parameter = cm.optimizer_dispatch_seconds(optimizer_states);
  double saved = 0;
  for (size_t i = 0; i < g.nodes.size() && i < plan.nodes.size(); ++i) {
    PlannedNode& pn = plan.nodes[i];
    if (!has_optimizer_step(g.nodes[i]) || !(pn.compute_s > 0)) continue;
    const double less = std::min(per_parameter, pn.compute_s);
    pn.compute_s -= less;
    saved += less;
  }
  plan.summary.compute_s -= saved;
  plan.summary.estimated_step_s -= saved;
  return saved;
}

}  // namespace tlm
