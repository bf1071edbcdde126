// Solves a Problem: a feasible solution with its cost, a lower bound and the gap.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/solver/problem.h"
#include "core/solver/search_options.h"
#include <vector>

namespace tlm::solver {

struct SolveOptions {
  double time_limit_s = 60.0;
  int threads = 2;
  uint64_t seed = 0;
  bool exact = false;  // prove optimality through the MILP engine (HiGHS) when available
  // Stop as soon as the certified gap (cost - bound) / |cost| is at most this
  // (0: search to optimality or the time limit).
  double gap_tolerance = 1e-3;
  SearchOptions search;  // the schedule's tunables (search_options.h)
  // A labelling of the problem to search from besides the greedy start (a previous plan):
  // repaired first where it breaks the memory limit; nodes whose strategy the reductions
  // dropped take the greedy start's. Not owned; must outlive the call.
  const Solution* start = nullptr;
  // Memory multipliers to start the bound search from, as (problem time step, multiplier in
  // cost per usage unit): a folded solve's (fold_blocks.h). Any multipliers >= 0 give a valid
  // bound, so these only decide how strong the first ones are. Not owned.
  const std::vector<std::pair<int64_t, double>>* start_prices = nullptr;
  // Stop as soon as a labelling costs at most this, in the problem's cost units (offset
  // included); negative: never. A re-solve that repairs a plan (planner.cpp) needs no more.
  double good_enough_cost = -1;
  // A lower bound the caller knows how to compute better than message passing over every
  // strategy (planner.cpp: the block bound, solver/block_bound.h), run on the search's second
  // thread before its own bound search. It runs until `until` or until it levels off; each
  // bound it proves, in the problem's cost units (offset included), goes to `raise`, which
  // says whether to go on (false once the search is over). It returns its best bound. The
  // search's own bound search then runs, from start_prices, in what is left of its share.
  // Unused with one thread.
  using RaiseBound = std::function<bool(long double bound)>;
  std::function<long double(std::chrono::steady_clock::time_point until, const RaiseBound& raise)> bound_beside;
  // Progress callback for long solves (CLI); called from the solving thread.
  std::function<void(double elapsed_s, __int128 best_cost, double bound)> on_progress;
};

struct SolveResult {
  Solution solution;
  __int128 cost = 0;
  double bound = 0.0;  // proven lower bound on the optimum
  double gap = 0.0;    // (cost - bound) / max(|cost|, 1)
  double seconds = 0.0;
  bool optimal = false;
  std::string status;  // "optimal" | "gap_tolerance" | "good_enough" | "time_limit" | "stalled"
  // Empty when HiGHS is loaded; else kHighsUnavailable plus the reason (the
  // search then ran without its MILP phases, and every report must say so).
  std::string milp_note;
  std::vector<PhaseTotal> phases;  // time and improvements per phase that ran
  // The memory multipliers of the best bound, by problem time step (empty: none computed).
  std::vector<std::pair<int64_t, double>> step_prices;
};

// Throws InfeasibleError (a std::invalid_argument) naming conflicting constraints.
struct InfeasibleError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// exact=true without a loadable HiGHS library: nothing could prove optimality.
struct MilpUnavailableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

SolveResult solve(const Problem& problem, const SolveOptions& options = {});

}  // namespace tlm::solver
