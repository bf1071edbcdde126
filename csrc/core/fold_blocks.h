// The first plan of a model with many repeated blocks, from one block's choices.
//
// A transformer's layers are one block repeated (symmetry.h). With every layer tied to
// the same labelling, the solver's problem folds to one layer's choices (solver/fold.h):
// 80 times fewer strategies on Llama-3-70B, so a short solve of the folded problem finds
// a plan that the full problem's search, in the same time, is still far from. Memory is
// checked at the steps outside the repeated blocks and those of the first and the last
// block (tied, a block's load is linear in its index). The unfolded labelling is then
// evaluated on the full problem; where a step the folding left out is over the limit,
// that step is kept and the folded problem solved again. The planner hands the result to
// the full solve as its start: that search and its bound are the plan's, so an
// asymmetric plan that pays is still found and the gap is certified on the full problem.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cost_tables.h"
#include "core/graph.h"
#include "core/solver/solver.h"

namespace tlm {

// Fewer repeated blocks than this: the full problem is solved directly.
constexpr int kFoldMinBlocks = 4;

// The share of the solver's time the folded solve may take.
constexpr double kFoldShare = 0.5;

struct FoldedStart {
  solver::Solution labels;  // a labelling of the full problem (feasible when `fits`)
  bool fits = false;
  __int128 cost = 0;  // its cost on the full problem
  // The folded solve's memory multipliers at the full problem's steps: the full solve's
  // bound search starts from them (solver.h: SolveOptions::start_prices).
  std::vector<std::pair<int64_t, double>> step_prices;
  int blocks = 0;
  std::string note;  // one line for the trace and the plan's log: what was folded, what it found
};

// Solves the problem of `t` folded over the repeated blocks of `g` within `time_limit_s`
// (solver options otherwise `so`'s). nullopt when there is nothing to fold (fewer than
// kFoldMinBlocks blocks) or the folded problem has no labelling in the time.
std::optional<FoldedStart> solve_folded(const Graph& g, const CostTables& t, const solver::SolveOptions& so,
                                        double time_limit_s);

}  // namespace tlm
