// Why a node got its strategy: each of its strategies priced with every other
// node kept as the plan has it. The deltas against the chosen strategy say what
// a different choice here would cost in compute, in communication on the way in
// (its inputs from their producers' specs) and out (its outputs into its
// consumers' chosen specs), and in memory. A local view: the solver weighs the
// whole graph at once, so an alternative that looks cheaper here can force more
// expensive choices elsewhere (a parameter's gradient must come out in its spec,
// memory limits hold over the whole step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/plan.h"
#include "core/strategy.h"

namespace tlm {

struct Alternative {
  OpStrategy strategy;
  double compute_s = 0;
  double comm_in_s = 0;   // its inputs, from their producers' chosen specs
  double comm_out_s = 0;  // its outputs, into the specs its consumers chose
  int64_t bytes = 0;      // its outputs per rank (state: with optimizer copies, for the whole step)
  bool chosen = false;
  bool possible = true;   // false: DTensor refuses a redistribution it needs
  std::string why_not;    // when not possible: which
};

struct Explanation {
  int node = 0;
  std::string name, op;
  std::vector<Alternative> alternatives;  // the chosen one first, then by total time
};

// `plan` must be the plan of `g` (one planned node per IR node). Throws
// InvalidArgument for a node index out of range or a plan of another graph.
Explanation explain_node(const Graph& g, const Plan& plan, const CostModel& cm, int node,
                         const StrategyOptions& strategy_options, int optimizer_states, bool train);

}  // namespace tlm
