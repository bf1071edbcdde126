#include "core/plan.h"

#include <algorithm>

#include "core/recompute.h"
#include "core/redistribute.h"

namespace tlm {
namespace {

// "all_gather over mesh dim 1", one entry per step that communicates (local chunks and
// rewrites are left out: they move nothing between ranks).
std::vector<std::string> collectives_of(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& from,
                                        const PlacementSpec& to) {
  std::vector<std::string> out;
  RedistributePlan rp;
  try {
    rp = plan_redistribute(t.shape, mesh, from, to);
  } catch (const InvalidArgument&) {
    return {"refused by DTensor"};  // the solver never picks such a pair; kept readable if it did
  }
  auto dim_name = [&](int d) {
    return mesh.dim_names.size() > static_cast<size_t>(d) && !mesh.dim_names[d].empty() ? "'" + mesh.dim_names[d] + "'"
                                                                                       : std::to_string(d);
  };
  for (const StepRun& run : merged_step_runs(rp.steps, t.shape, mesh)) {  // a merged run is one collective
    const CollectiveStep& s = rp.steps[run.begin];
    if (s.kind == CollectiveKind::LocalChunk || s.kind == CollectiveKind::LocalPartition) continue;
    if (run.lo_dim == run.hi_dim) {
      out.push_back(std::string(to_string(s.kind)) + " over mesh dim " + dim_name(s.mesh_dim));
      continue;
    }
    std::string dims;
    for (int d = run.lo_dim; d <= run.hi_dim; ++d) dims += (d > run.lo_dim ? "+" : "") + dim_name(d);
    out.push_back(std::string(to_string(s.kind)) + " over mesh dims " + dims);
  }
  return out;
}

}  // namespace

Plan make_plan(const Graph& g, const std::vector<NodeStrategies>& strat, CostTables& t,
               const solver::SolveResult& res, const std::string& device, const std::string& mode,
               int optimizer_states) {
  const int n = static_cast<int>(g.nodes.size());
  const std::vector<int>& sol = res.solution;
  auto chosen = [&](int i) -> const OpStrategy& { return strat[i].strategies.at(sol[i]); };
  Plan plan;
  plan.mesh = g.mesh;
  PlanSummary& sum = plan.summary;
  const std::vector<char> recomputed = recomputed_nodes(t, g.nodes.size(), sol);
  const std::vector<solver::Cost> recompute_cost = recompute_costs(t, g.nodes.size(), sol);
  for (int i = 0; i + 1 < n; ++i) {
    PlannedNode pn;
    pn.name = g.nodes[i].name;
    pn.op = g.nodes[i].op;
    pn.strategy = chosen(i);
    pn.compute_s = to_seconds(t.problem.nodes[i].strategies[sol[i]].cost);
    pn.bytes = t.problem.nodes[i].strategies[sol[i]].usage;
    for (size_t k = 0; k < g.nodes[i].tensor_inputs.size(); ++k) {
      const TensorRef& r = g.nodes[i].tensor_inputs[k];
      const PlacementSpec& from = chosen(r.node).outputs[r.output];
      const double seconds = to_seconds(t.redist.get(g.meta(r), from, pn.strategy.inputs[k], input_bucket(g, t, i, r)));
      pn.comm_s += seconds;
      if (from != pn.strategy.inputs[k])
        pn.redistributions.push_back(PlannedRedistribution{static_cast<int>(k), r.node, from, pn.strategy.inputs[k],
                                                           seconds,
                                                           collectives_of(g.meta(r), g.mesh, from, pn.strategy.inputs[k])});
    }
    pn.family = strat[i].family;
    pn.num_strategies = static_cast<int64_t>(strat[i].strategies.size());
    pn.fell_back = strat[i].fell_back;
    pn.recompute = recomputed[static_cast<size_t>(i)] != 0;
    if (pn.recompute) pn.recompute_s = to_seconds(recompute_cost[static_cast<size_t>(i)]);
    sum.compute_s += pn.compute_s;
    sum.recompute_s += pn.recompute_s;
    sum.comm_s += pn.comm_s;
    FamilyCount& fc = sum.strategy_counts[pn.family.empty() ? std::string("other") : pn.family];
    fc.nodes += 1;
    fc.strategies += pn.num_strategies;
    if (pn.fell_back && std::find(sum.fallback_ops.begin(), sum.fallback_ops.end(), pn.op) == sum.fallback_ops.end())
      sum.fallback_ops.push_back(pn.op);
    plan.nodes.push_back(std::move(pn));
  }
  // The output node: the spec each graph output leaves in, and what getting there costs.
  PlannedNode out;
  out.name = g.nodes.back().name;
  out.op = "output";
  for (int s : t.sink_of_output) {
    if (s < 0) {
      out.strategy.inputs.emplace_back();  // not a tensor
      continue;
    }
    const OutputSink& sink = t.sinks[s];
    const PlacementSpec& dst = sink.specs.at(sol[sink.problem_node]);
    const PlacementSpec& from = chosen(sink.ref.node).outputs[sink.ref.output];
    const double seconds = to_seconds(t.redist.get(g.meta(sink.ref), from, dst, sink_bucket(t, sink)));
    out.comm_s += seconds;
    if (from != dst)
      out.redistributions.push_back(PlannedRedistribution{static_cast<int>(out.strategy.inputs.size()), sink.ref.node,
                                                          from, dst, seconds,
                                                          collectives_of(g.meta(sink.ref), g.mesh, from, dst)});
    out.strategy.inputs.push_back(dst);
  }
  sum.comm_s += out.comm_s;
  plan.nodes.push_back(std::move(out));

  sum.estimated_step_s = sum.compute_s + sum.comm_s + sum.recompute_s;
  sum.peak_bytes = solver::evaluate(t.problem, sol).peak_usage;
  std::vector<OpStrategy> strategies;
  for (const PlannedNode& pn : plan.nodes) strategies.push_back(pn.strategy);
  sum.memory = estimate_memory(g, strategies, optimizer_states, recomputed);
  sum.solver = SolverSummary{res.cost, res.bound, res.gap, res.seconds, res.status, res.milp_note};
  sum.device = device;
  sum.mode = mode;
  return plan;
}

}  // namespace tlm
