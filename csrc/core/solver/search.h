// The search on a reduced model: Lagrangian message passing for the bound,
// decoded labellings repaired and improved for the primal.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "model.h"
#include "solver.h"

namespace tlm::solver {

using Clock = std::chrono::steady_clock;

struct SearchResult {
  std::vector<int> labels;  // best feasible model labelling (empty if none)
  __int128 cost = 0;        // its model cost (without the model offset)
  long double bound = 0;    // proven lower bound on the model optimum (without offset)
  int iterations = 0;
};

// `progress(best_cost, bound)` is called about once per second (model units).
SearchResult lagrangian_search(const Model& m, const SolveOptions& options, Clock::time_point deadline,
                               const std::function<void(const SearchResult&)>& progress);

// Smallest integer >= b minus a safety margin for floating-point rounding.
long double safe_integer_bound(long double b, long double magnitude);

}  // namespace tlm::solver
