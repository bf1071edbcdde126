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

#include <algorithm>
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

// The folded solve's time out of the solver's `seconds`: half, or up to three quarters
// while that is under kFoldEnoughSeconds. The full solve first pays a setup no plan comes
// from (reductions, the start's repair, edge factoring: 2-3 s on a 70B graph of 3 M
// strategies on one core), so under a short limit its half of the time added nothing
// and the folded solve, which finds the plan, stopped before its plan was good (70B at
// a 10 s limit: an 11.55 s step with half, 10.74 s with three quarters). With more time
// the full solve gets half, for the bound that certifies the gap.
constexpr double kFoldShare = 0.5;
constexpr double kFoldShareShortLimit = 0.75;
constexpr double kFoldEnoughSeconds = 7.5;
inline double fold_seconds(double seconds) {
  return std::min(kFoldShareShortLimit * seconds, std::max(kFoldShare * seconds, kFoldEnoughSeconds));
}

// After the folded solve, the full solve needs about this long per strategy of the full
// problem before its first move or bound (reductions, the start's repair, edge factoring:
// 1.5-1.7 s for Llama-3-70B's 3.1 M strategies on one core). With less than twice that
// left it would only overrun the limit and return the folded plan; the time goes instead
// to a bound on the full problem computed block by block (solver/block_bound.h), and the
// plan is the folded one.
constexpr double kFullSolveSetupSecondsPerStrategy = 0.5e-6;
// That bound's time under such a short limit `seconds`, the folded solve getting the rest:
// on 70B building it takes 0.6 s and an iteration 0.05 s, and it starts from the fold's
// memory multipliers, so a longer fold gives it a better start as well as a plan. Half the
// limit instead of 0.3 gave 8.1-8.2% gaps at limit 10 (against 5.3-13%), and at limit 7 a
// 2.1 s fold once stopped at a plan 11% dearer.
inline double block_bound_seconds(double seconds) { return std::max(1.0, 0.3 * seconds); }
// Under a longer limit the full solve runs, and its own bound (message passing over every
// strategy) is far weaker than the block-by-block one within the same time: at 405B and a
// 30 s limit it certified 18-22% for a plan whose block bound is within a few percent. So
// the block bound also runs beside the full solve. With two threads it takes that solve's
// second core in place of its own bound search (SolveOptions::bound_beside) until it rises
// by less than kBlockBoundLevelOff over kLevelOffIterations iterations (solver/block_bound.h);
// the solve's bound search then has what is left of its share. At 5596b79, 405B at limit
// 30: ~250 iterations, gaps 8.08-8.40% (was ~100 iterations in a 2.2 s slice, 8.43-9.00%;
// 5.4-5.8% since dbae460; 370-396 iterations and 4.4-6.5% with 1d5ea47's SIMD passes); 70B
// at limit 30: ~150 iterations, 1.26%. With one thread it takes this slice of the limit first.
inline double block_bound_beside_full_seconds(double seconds) { return std::clamp(0.1 * seconds, 1.0, 3.0); }
constexpr double kBlockBoundLevelOff = 2e-4;

// The folded solve's bound search undoes a step whose Lagrangian falls by more than this
// share of its best (search_options.h, bound_undo_fall; 0.5 elsewhere). On 405B (16x8x8,
// limit 30) the fold's gap was 7.3-7.7% in 6 runs at 0.15 and 0.05, against 6.5-14.1%
// at 0.5; on 70B at limit 10, 0.05 cut the dips its bound search climbs through (gaps
// 3.3-4.7%), 0.15 did not (1.5-1.6%).
constexpr double kFoldBoundUndoFall = 0.15;

// The folded solve's bound search keeps its core to the end (search_options.h,
// bound_share_max; 0.7 elsewhere, the rest for kicks): its multipliers start the block
// bound, whose level they mostly set. 70B at limit 10: folded gaps 1.53-1.67% and final
// gaps 1.29-1.50% (4 runs), against 1.96-2.50% and 1.67-4.09% at 0.7, the plan 0.02%
// dearer without the kicks; 405B at limit 30 within its spread (8.08, 8.13%).
constexpr double kFoldBoundShareMax = 1.0;


// The slice of the fold's time for re-solving its last blocks (fold_tail.h) when the folded
// plan is the plan: a fifth, between 0.3 and 3 s. On 70B (8x8x4) the re-solve sets up in
// ~0.3 s and its kicks find the plan within ~0.2-0.5 s more; at a 10 s limit (a 4.9 s fold)
// a 2-block tail gave 10.688 s in 3 runs against 10.712-10.716 s in 6 before, gaps
// 1.44-1.73% against 1.39-1.65% (fold_tail.h: kTailBlocks, 5 blocks since, 10.672 s). Beside the block bound instead, one thread each, the bound made 11-31
// iterations in place of 24-60 (gaps 2.5-7.6%). Where the full solve follows, its kicks
// from the tied plan find such plans themselves, and a start that already has one did no
// better (70B at limit 30: 10.681-10.686 against 10.670 s).
// A fold of less than kFoldTailMinSeconds keeps its whole time: its solve needs ~3 s on 70B
// (its best price iterate comes ~2 s in). At 10 s end to end (a 3.3-3.5 s fold), with the
// slice, 2 of 11 runs found tied plans of 11.79-11.80e12 (plans of 11.68-11.70 s against
// 10.69-10.74 s in the others); without it 5 of 5 runs gave 10.725 s.
constexpr double kFoldTailMinSeconds = 4.0;
inline double fold_tail_seconds(double seconds) {
  return seconds < kFoldTailMinSeconds ? 0.0 : std::clamp(0.2 * seconds, 0.3, 3.0);
}

// The slice of the fold's time kept for spending the tied plan's unused memory member by
// member (solver/spend_slack.h): 2% of it, between 0.05 and 0.5 s. On Llama-3-70B (80
// blocks, 3.1 M strategies) the pass takes 0.03-0.08 s, on 405B 0.13 s.
inline double spend_slack_seconds(double seconds) { return std::clamp(0.02 * seconds, 0.05, 0.5); }

struct FoldedStart {
  solver::Solution labels;  // a labelling of the full problem (feasible when `fits`)
  bool fits = false;
  __int128 cost = 0;  // its cost on the full problem
  // The folded solve's memory multipliers at the full problem's steps: the full solve's
  // bound search starts from them (solver.h: SolveOptions::start_prices).
  std::vector<std::pair<int64_t, double>> step_prices;
  int blocks = 0;
  // What was folded, for a bound on the full problem (solver/block_bound.h): each repeated
  // block's problem nodes, the memory steps the folded problem kept, each step's block.
  std::vector<std::vector<int>> block_nodes;
  std::vector<char> kept_steps;
  std::vector<int> step_block;  // the repeated block of each IR step (-1: none)
  std::string milp_note;  // the folded solve's (solver.h)
  std::string note;  // one line for the trace and the plan's log: what was folded, what it found
};

// Whether each IR step's memory check survives a folding whose blocks [0, tied) are tied
// (`step_block`: each step's block, -1 outside them): the steps of the first and the last
// tied block, those of every block after them, and those outside every block.
std::vector<char> kept_steps(const std::vector<int>& step_block, int tied);

// Solves the problem of `t` folded over the repeated blocks of `g` within `time_limit_s`
// (solver options otherwise `so`'s). nullopt when there is nothing to fold (fewer than
// kFoldMinBlocks blocks) or the folded problem has no labelling in the time.
// `plan_is_folded`: no full solve follows (the planner's short limit), so the fold re-solves
// its last blocks itself (fold_tail.h) before untying single members.
std::optional<FoldedStart> solve_folded(const Graph& g, const CostTables& t, const solver::SolveOptions& so,
                                        double time_limit_s, bool plan_is_folded = false);

}  // namespace tlm
