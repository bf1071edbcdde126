// untie_tail (core/fold_tail.h): from a tied plan that leaves memory unused, the last
// blocks re-solved with the others held take a labelling no single member can move to alone, and it is
// copied to the blocks before them as far as it fits.
#include <gtest/gtest.h>

#include "core/fold_tail.h"
#include "core/solver/spend_slack.h"
#include "solver_test_util.h"

namespace tlm {
namespace {

using solver::Cost;
using solver::Problem;
using solver::Solution;
using solver::Usage;

// `blocks` blocks of two nodes, each lean (cost 10, no bytes) or heavy (free, 10 bytes), a
// block's values alive from its forward step b to its backward step 2 blocks - 1 - b. The
// two nodes of a block pay 100 when they differ, so a block turns heavy whole or not at
// all: no member alone, and no tied move while all blocks heavy do not fit.
Problem lean_or_heavy(int blocks, Usage limit, std::vector<std::vector<int>>& members, std::vector<int>& step_block) {
  Problem p;
  members.assign(static_cast<size_t>(blocks), {});
  for (int b = 0; b < blocks; ++b) {
    for (int k = 0; k < 2; ++k) {
      members[static_cast<size_t>(b)].push_back(static_cast<int>(p.nodes.size()));
      p.nodes.push_back(solver::testing::node(b, 2 * blocks - b, {{10, 0}, {0, 10}}));
    }
    const int a = members[static_cast<size_t>(b)][0];
    p.edges.emplace_back(a, a + 1, std::vector<Cost>{0, 100, 100, 0});
  }
  step_block.assign(static_cast<size_t>(2 * blocks), -1);
  for (int b = 0; b < blocks; ++b)
    step_block[static_cast<size_t>(b)] = step_block[static_cast<size_t>(2 * blocks - 1 - b)] = b;
  p.usage_limit = limit;
  return p;
}

solver::SolveOptions options() {
  solver::SolveOptions o;
  o.time_limit_s = 1;
  o.threads = 1;
  return o;
}

TEST(FoldTail, TheLastBlocksTakeWhatNoMemberAloneCanAndItIsCopiedWhileItFits) {
  ASSERT_TRUE(solver::testing::locate_highs());
  std::vector<std::vector<int>> members;
  std::vector<int> step_block;
  // The tail and seven blocks before it, room for the tail and two more heavy (20 bytes a
  // heavy block).
  const int n = kTailBlocks + 7, heavy = kTailBlocks + 2;
  const Problem p = lean_or_heavy(n, 20 * heavy + 5, members, step_block);
  Solution x(p.nodes.size(), 0);  // the best tied plan: every block lean
  __int128 cost = solver::evaluate(p, x).cost;
  ASSERT_EQ(solver::to_string(cost), std::to_string(20 * n));
  // No member alone pays: the single-member pass leaves the tied plan as it is.
  std::vector<std::vector<int>> classes(2);
  for (const std::vector<int>& block : members)
    for (size_t k = 0; k < 2; ++k) classes[k].push_back(block[k]);
  Solution single = x;
  EXPECT_EQ(solver::spend_slack(p, classes, single, solver::Clock::time_point::max()).moves, 0);
  const TailResult r = untie_tail(p, members, step_block, options(), x, cost, {},
                                  std::chrono::steady_clock::now() + std::chrono::seconds(1));
  const solver::Evaluation ev = solver::evaluate(p, x);
  ASSERT_TRUE(ev.feasible);
  EXPECT_TRUE(r.improved);
  EXPECT_EQ(solver::to_string(ev.cost), solver::to_string(cost));
  // The tail re-solved heavy, then two copies: the last `heavy` blocks heavy, the optimum.
  EXPECT_EQ(r.copied, 2);
  EXPECT_EQ(solver::to_string(cost), std::to_string(20 * (n - heavy)));
  for (int b = 0; b < n; ++b)
    for (int v : members[static_cast<size_t>(b)]) EXPECT_EQ(x[static_cast<size_t>(v)], b >= n - heavy ? 1 : 0) << b;
}

TEST(FoldTail, NoRoomLeavesTheTiedPlan) {
  ASSERT_TRUE(solver::testing::locate_highs());
  std::vector<std::vector<int>> members;
  std::vector<int> step_block;
  const Problem p = lean_or_heavy(8, 15, members, step_block);  // not even one heavy block fits
  Solution x(p.nodes.size(), 0);
  __int128 cost = solver::evaluate(p, x).cost;
  const TailResult r = untie_tail(p, members, step_block, options(), x, cost, {},
                                  std::chrono::steady_clock::now() + std::chrono::seconds(1));
  EXPECT_FALSE(r.improved);
  EXPECT_EQ(solver::to_string(cost), "160");
  EXPECT_EQ(x, Solution(p.nodes.size(), 0));
}

}  // namespace
}  // namespace tlm
