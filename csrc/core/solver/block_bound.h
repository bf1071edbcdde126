// A lower bound on a problem of repeated blocks, computed one distinct block at a time.
//
// The full problem's own bound (search.h) passes messages over every strategy: on a
// Llama-3-70B graph that is 3 M strategies and 400 M matrix entries, 0.6-0.9 s an
// iteration after 1.5 s of setup, so under a 10 s limit it certifies a 20-40% gap for a
// plan within 0.1% of the best found at 30 s. The folded problem (fold.h) is 18 times
// smaller, but its bound holds for tied labellings only. This one holds for every
// labelling and costs about what the fold's does, because it bounds a relaxation (a
// Lagrangian decomposition) that splits into the blocks:
// - memory is priced (multipliers >= 0) at the kept steps; at a block's own other steps
//   only its own nodes are priced, against the limit less the least the rest can use there
//   (those rows of every block share multipliers by position); a strategy that breaks the
//   limit on its own at any step is forbidden;
// - an edge between two pieces (a block with the parts outside that link to it alone, or
//   the rest of the problem) is read in the consuming node's piece from a copy of its
//   source, and each copy is tied to its source by multipliers (+mu on the copy, -mu on
//   the source: zero for any labelling where they agree); copies of one kind (the same
//   block position one block later, the same reader of the rest) share their multipliers,
//   so blocks alike stay alike. A coupling between pieces keeps only the strategies it
//   forbids.
// No edge then joins two pieces: the relaxation's minimum is the sum of the pieces'
// minima, each bounded by message passing (dual.h). Identical pieces (the middle layers:
// the same nodes, costs, edges, copies and priced steps) are one piece counted as often as
// it occurs, so an iteration passes over a handful of blocks instead of eighty. The bound
// is valid for any multipliers. Projected subgradient steps improve the memory ones, starting
// from the folded solve's (small steps from there: the start is most of the bound); the
// agreement ones balance the copies' reduced costs against their sources' every fourth pass
// (dual decomposition's block-coordinate step).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/solver/model.h"
#include "core/solver/problem.h"

namespace tlm::solver {

struct BlockBound {
  // A lower bound on the problem's optimum in its cost units (-inf when none was computed:
  // no time, or a piece with no allowed labelling).
  long double bound = -std::numeric_limits<long double>::infinity();
  int pieces = 0;    // blocks plus the rest of the problem (when it has nodes)
  int distinct = 0;  // pieces whose messages are passed (the others repeat one of these)
  int iterations = 0;
  std::string note;  // one line for the trace
};

// `blocks[b]`: the problem nodes of repeated block b (disjoint; a node in none belongs to
// the rest). `keep_step[t]`: whether memory is priced at step t (steps past its end are
// priced, as fold_problem keeps them). `step_block[t]`: the block whose step t is (-1:
// none); each block's own steps that are not kept are then priced too, a block at a time,
// against the limit less the least load of everything else alive there (empty: not
// priced). `start_prices`: (problem step, multiplier) to start
// from; prices at steps not kept are dropped. `upper`: a labelling's cost (the step size
// aims at it), or -1. Runs until `deadline` or `max_iterations`, at least one iteration,
// the distinct pieces spread over `threads` threads (the bound does not depend on how many).
// With `level_off` > 0 it also stops once its bound rose by less than that share over the
// last kLevelOffIterations iterations. `on_bound` (when set) gets each better bound as it is
// proven and stops the bound by returning false.
constexpr int kLevelOffIterations = 80;
BlockBound block_bound(const Problem& problem, const std::vector<std::vector<int>>& blocks,
                       const std::vector<char>& keep_step, const std::vector<int>& step_block,
                       const std::vector<std::pair<int64_t, double>>& start_prices, __int128 upper,
                       Clock::time_point deadline, int max_iterations = 1 << 30, int threads = 1,
                       double level_off = 0, const std::function<bool(long double)>& on_bound = {});

}  // namespace tlm::solver
