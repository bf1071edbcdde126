// The last repeated blocks of a tied plan re-solved with the others held.
//
// A tied plan (fold_blocks.h) gives every block one labelling, and spend_slack.h then
// switches single members into the memory it leaves unused. Neither reaches a plan where
// the last blocks keep, together, values every other block recomputes: backward reaches
// them first, so what they recompute would be back in memory almost at once, and one
// value's recompute reads the others (a norm, the products after it, the activation), so
// the move is the block's rather than a member's (spend_slack found none of it). On
// Llama-3-70B (8x8x4, limit 10) the last two blocks keep 8 values the tied plan recomputes
// (the residual add, the attention output, the wo, w1 and w3 products, both norms'
// products): 26 ms less recompute in a 10.72 s step.
//
// Here the head's blocks keep their tied labelling (pinned) and the nodes of the last
// kTailBlocks blocks, each free, and those outside the blocks are searched by kicks from the
// tied plan, on the problem folded over the head (memory checked at the head's first and
// last block and at every other step). Their labelling is then copied to the blocks before
// them, the latest first, for as long as each copy fits the limit and lowers the cost. The
// fold runs it where the folded plan is the plan (fold_blocks.h: fold_tail_seconds); where
// the full solve follows, that solve's kicks from the tied plan find such plans themselves.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/solver/problem.h"
#include "core/solver/solver.h"

namespace tlm {

// How many of the last blocks are re-solved (fewer where the head would keep less than two).
// More free blocks give the kicks more to find, fewer let them find it within the slice
// (0.9 s on 70B). Llama-3-70B at a 10 s limit, plan step by tail size (2 / 3 / 4 / 5 / 6 / 8
// blocks): 8x8x4 at local batch 4 10.688 / 10.675-10.676 / 10.675-10.685 / 10.672-10.673 /
// 10.679-10.680 / 10.701-10.702 s; at local batch 2 6.529 / - / 6.524 / 6.509 / - / 6.503 s;
// 4x4x8 at local batch 8 10.522 / - / 10.521 / 10.467 / - / 10.471 s.
constexpr int kTailBlocks = 5;

struct TailResult {
  bool improved = false;
  int copied = 0;  // blocks before the tail given its labelling
  std::string note;  // for the trace and the fold's note
};

// `blocks`: each repeated block's problem nodes, position by position, in forward order;
// `step_block`: the block of each IR step (-1: none); `step_prices`: memory multipliers by
// step (the fold's) for the kicks. `x` (cost `cost`) must be feasible; its head is read
// from its first block. Both are replaced when the result is cheaper and fits. Ends by
// `until`; `so.threads` threads.
TailResult untie_tail(const solver::Problem& full, const std::vector<std::vector<int>>& blocks,
                      const std::vector<int>& step_block, const solver::SolveOptions& so, solver::Solution& x,
                      __int128& cost, const std::vector<std::pair<int64_t, double>>& step_prices,
                      std::chrono::steady_clock::time_point until);

}  // namespace tlm
