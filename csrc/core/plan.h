// Stage 4 of the planner: the plan, a typed value. Input: the graph, its
// strategies (stage 1), cost tables (stage 2) and the solver's labelling
// (stage 3). Output: per node the chosen strategy and what it costs, per graph
// output the spec it leaves in, and a summary. JSON appears only at the edges
// (plan_json.h: the bindings and the plan file).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cost_tables.h"
#include "core/graph.h"
#include "core/memory_estimate.h"
#include "core/solver/solver.h"
#include "core/strategy.h"

namespace tlm {

// One input of a node that the plan moves: what it was made in, what the node
// takes, what that costs and the collectives that do it (redistribute.h).
struct PlannedRedistribution {
  int input = 0;     // position among the node's tensor inputs
  int producer = 0;  // IR node that makes the tensor
  PlacementSpec from, to;
  double seconds = 0;
  std::vector<std::string> collectives;  // e.g. "all_gather over mesh dim 1"
};

struct PlannedNode {
  std::string name;
  std::string op;
  // Inputs: the spec each tensor input is redistributed to; outputs: the spec
  // each output is produced in. For the graph's output node, `inputs` holds the
  // spec each graph output leaves in (an empty spec: not a tensor) and
  // `outputs` is empty.
  OpStrategy strategy;
  double compute_s = 0;  // this node's compute under its strategy
  double comm_s = 0;     // redistribution of its inputs into the strategy's input specs
  int64_t bytes = 0;     // its outputs per rank (parameters: with their optimizer state)
  std::string family;
  int64_t num_strategies = 0;
  bool fell_back = false;  // no sharding rule: replicate-only
  // Backward recomputes this value instead of keeping it from forward (recompute.h),
  // for recompute_s more compute.
  bool recompute = false;
  double recompute_s = 0;
  std::vector<PlannedRedistribution> redistributions;  // inputs whose spec changes, for reports
};

// The solver's progress: its best cost and its bound at a time since the solve began.
struct ProgressPoint {
  double seconds = 0, cost = 0, bound = 0;
};

struct SolverSummary {
  __int128 cost = 0;
  double bound = 0, gap = 0, seconds = 0;
  std::string status;
  std::string note;  // e.g. HiGHS unavailable (solver.h: milp_note)
};

struct FamilyCount {
  int64_t nodes = 0;
  int64_t strategies = 0;
};

struct PlanSummary {
  double estimated_step_s = 0, compute_s = 0, comm_s = 0;
  double recompute_s = 0;  // backward's recompute of values not kept (in estimated_step_s, not in compute_s)
  // Repeated blocks (symmetry.h): how many, whether placed alike, and when not, how much
  // cheaper the plan is than the best alike labelling (-1: no alike labelling fits).
  int repeated_blocks = 0;
  bool blocks_alike = true;
  double asymmetry_gain_s = 0;
  std::string folded;       // the tied first solve over the repeated blocks, when one ran (fold_blocks.h)
  __int128 folded_cost = 0;  // its plan's cost, where the full solve started
  int64_t peak_bytes = 0;  // the solver's memory model (what memory_limit bounds)
  int64_t memory_limit = 0;         // per rank, bytes; 0: planned without one
  std::string memory_limit_source;  // e.g. "device H100: 74.5 GiB minus 10% headroom"
  double build_seconds = 0;         // strategies and cost tables, before the solve
  MemoryEstimate memory;   // per rank, by kind (core/memory_estimate.h)
  SolverSummary solver;
  std::vector<std::string> fallback_ops;  // ops that had no rule, in graph order
  std::map<std::string, FamilyCount> strategy_counts;
  std::string device, mode;
  std::vector<ProgressPoint> solver_progress;  // as the solve went (plan_graph records it)
};

struct Plan {
  Mesh mesh;
  std::vector<PlannedNode> nodes;  // one per IR node, the output node last
  PlanSummary summary;
};

// Assembles the plan from the solver's choice (one strategy per problem node).
Plan make_plan(const Graph& g, const std::vector<NodeStrategies>& strategies, CostTables& tables,
               const solver::SolveResult& result, const std::string& device, const std::string& mode,
               int optimizer_states = 2);

}  // namespace tlm
