// Member-by-member moves that spend the memory a tied labelling leaves unused.
//
// A labelling where every repeated block takes the same strategies (fold.h) moves memory in
// steps of one value times the number of blocks: keeping an activation instead of
// recomputing it costs its bytes 80 times over on Llama-3-70B. The best tied plan therefore
// leaves a slack below the limit that no tied move can use (63.3 of 67.1 GiB on 70B at
// 8x8x4), while the untied optimum keeps that activation in as many blocks as fit. This pass
// takes those moves: for each class of tied nodes and each other strategy, the saving per
// byte of switching one member (with the nodes its couplings force), best first; then the
// members one at a time, each kept when it lowers the exact cost and fits the limit at every
// step it is alive. A member that does not fit may buy room from moves that free memory at
// a cost (least per byte first), kept only when the pair of them saves.
#pragma once

#include <vector>

#include "core/solver/model.h"
#include "core/solver/problem.h"

namespace tlm::solver {

struct SlackResult {
  int moves = 0;       // members switched
  int candidates = 0;  // (class, strategy) pairs tried
  __int128 saved = 0;  // cost removed
};

// `classes`: groups of tied nodes, each in block order (fold.h's classes). `x` must satisfy
// every constraint of `problem`; it stays feasible and its cost falls by `saved`. Stops at
// `deadline`.
SlackResult spend_slack(const Problem& problem, const std::vector<std::vector<int>>& classes, Solution& x,
                        Clock::time_point deadline);

}  // namespace tlm::solver
