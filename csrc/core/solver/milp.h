// The model as a MILP for HiGHS (built here in bulk, handed over in one call):
//   x[i,s] binary, sum_s x[i,s] = 1                        (one strategy per node)
//   y[e,s,t] in [0,1] for allowed pairs, sum_t y = x[u,s], sum_s y = x[v,t]   (edge choice)
//   sum over live nodes of usage * x <= capacity at each memory check point
//   minimise sum cost * x + sum edge cost * y
// The marginal constraints make y integral once x is, so only x is integer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

// A memory row given explicitly: sum of coef * x[strategy] <= cap (used for
// coarse models, whose memory is not one interval per node).
struct MemoryRow {
  double cap = 0;
  std::vector<std::pair<size_t, double>> terms;  // (model strategy index, usage)
};

struct MilpOptions {
  double time_limit_s = 60.0;
  int threads = 1;
  uint64_t seed = 0;
  const std::vector<int>* start = nullptr;  // feasible labelling to start from
  const std::vector<MemoryRow>* rows = nullptr;  // extra memory rows
  bool has_cutoff = false;                  // prune anything costing more (model units, offset included)
  double cutoff = 0.0;
  bool has_target = false;                  // stop once a solution costs <= target (benchmarks)
  double target = 0.0;                      // in model cost units (offset included)
  double rel_gap = 0.0;                     // HiGHS stops once its gap is at most this
  // Larger models are not built (the memory rows alone can reach billions of
  // entries on contest files; HiGHS would not get past loading them).
  size_t max_columns = 20000000;
  size_t max_nonzeros = 40000000;
};

struct MilpResult {
  bool ran = false;
  std::string why;          // when it did not run
  bool optimal = false;
  bool infeasible = false;  // proven
  std::vector<int> labels;  // best labelling found (empty: none)
  double dual_bound = 0.0;  // HiGHS' proven bound in model cost units (offset included)
  double seconds = 0.0;
  std::vector<std::pair<double, double>> improvements;  // (seconds, objective) of improving solutions
};

// When HiGHS phases that run to the end of a solve must stop: the last
// `tail_share` of the budget (from `start` to `deadline`; the option
// milp_tail_share) is left to the heuristics, which check the clock often,
// because one HiGHS call can overrun its own limit by seconds inside a root
// cut round (milp.cpp). That keeps the whole solve inside its time limit.
inline Clock::time_point milp_phase_end(Clock::time_point start, Clock::time_point deadline, double tail_share) {
  return deadline - std::chrono::duration_cast<Clock::duration>((deadline - start) * tail_share);
}

// Columns and nonzeros the MILP of `m` would have.
std::pair<size_t, size_t> milp_size(const Model& m);
// Whether the MILP of `m` has at most `max_cols` columns and `max_nz` nonzeros. Stops
// counting once over: milp_size reads every edge matrix entry (0.4 s on a 70B model,
// whose strategies alone are twenty times the columns a whole-model MILP may have).
bool milp_within(const Model& m, size_t max_cols, size_t max_nz);
MilpResult solve_milp(const Model& m, const MilpOptions& options);

// The straightforward model of a problem with no reductions (a baseline for
// benchmarks): every node and strategy, one check point per distinct start.
Model plain_model(const Problem& problem);

}  // namespace tlm::solver
