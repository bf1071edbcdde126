// The search on a reduced model: Lagrangian message passing for the bound,
// decoded labellings repaired and improved for the primal.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "core/solver/model.h"
#include "core/solver/search_options.h"
#include "core/solver/solver.h"

namespace tlm::solver {

struct SearchResult {
  std::vector<int> labels;  // best feasible model labelling (empty if none)
  __int128 cost = 0;        // its model cost (without the model offset)
  long double bound = 0;    // proven lower bound on the model optimum (without offset)
  int iterations = 0;
  // Reduced costs at the best bound: any feasible labelling x costs at least
  // rc_bound + sum_i reduced_cost[x_i] (empty when no bound was computed).
  std::vector<double> reduced_cost;  // per model strategy
  long double rc_bound = 0;
  std::vector<double> point_price;  // memory multiplier per model check point at the best bound
};

// `progress` is called about once per second (model units). With
// `allow_lns` (and HiGHS loaded) the second part of the time goes to
// large-neighbourhood search (lns.h).
SearchResult lagrangian_search(const Model& m, const SolveOptions& options, Clock::time_point deadline,
                               const std::function<void(const SearchResult&)>& progress, bool allow_lns,
                               PhaseLedger* ledger = nullptr);

// The bound search alone, for `iterations` iterations, its steps aimed at `upper` (a
// labelling's model cost, or -1 when none is known): the Lagrangian bound it proves (model
// units, offset excluded). For tests and tools; lagrangian_search runs it beside the primal.
long double lagrangian_bound(const Model& m, int iterations, __int128 upper = -1);

// The certified gap test every stopping rule uses: a labelling of model cost
// `cost` (offset excluded) is close enough to the bound when the difference is
// at most `tolerance` of the full cost.
inline bool within_gap(__int128 cost, long double bound, long double offset, double tolerance) {
  const long double c = static_cast<long double>(cost);
  return c - bound <= tolerance * std::fabs(offset + c);
}

// The other stopping rule: a labelling whose full cost (offset included) is at most the
// caller's good-enough cost (SolveOptions::good_enough_cost; negative: none).
inline bool good_enough(long double full_cost, long double good_enough_cost) {
  return good_enough_cost >= 0 && full_cost <= good_enough_cost;
}

// The price phase's next step rate (a multiple of its price unit), from the decoded
// labelling's overflow now (`over`) and at the last iteration (`was_over`; none on the
// first): it grows by 1.2 while the labelling stays over the limit and shrinks by 0.7 while
// it fits, within [0.01, 4]; a flip either way halves it. Without the halving, a problem
// whose nodes flip together (a folded model's 80 layers tied as one) swung between a
// labelling far over the limit and one far under it, and every repaired iterate cost
// 15-20e12 against plans near 10.7e12: Llama-3-70B (8x8x4) at an 80 GiB limit planned
// 10.829 s (gap 5.0%), above its 10.72 s at the tighter 67.1 GiB; with it 10.526 s (2.1%).
// At 67.1 and 60 GiB, on 16x16 and on 405B the plans stayed within the run-to-run spread;
// IOPDDL at a 10 s limit K -3.8%, T -1.7%, L -0.6%, no file worse by more than 0.1%.
double next_price_rate(double rate, bool over, std::optional<bool> was_over);

// Smallest integer >= b minus a safety margin for floating-point rounding.
long double safe_integer_bound(long double b, long double magnitude);

}  // namespace tlm::solver
