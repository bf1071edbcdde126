// Primal's memory repair on coupled nodes: a choice that saves memory only together
// with its neighbours' (a recompute candidate, its hold node, its tail node).
#include <gtest/gtest.h>

#include "core/solver/model.h"
#include "core/solver/primal.h"

namespace tlm::solver {
namespace {

// Identity coupling as an edge: equal strategy indices only.
std::vector<Cost> same_index(int s) {
  std::vector<Cost> c(static_cast<size_t>(s * s), kInfiniteCost);
  for (int k = 0; k < s; ++k) c[static_cast<size_t>(k * s + k)] = 0;
  return c;
}

// A chain a - b - c of nodes that must agree; only a's strategy 1 is small, and it
// costs more everywhere, so the cheapest labelling (all 0) is over the limit.
Problem coupled_chain() {
  Problem p;
  auto node = [](int64_t start, int64_t end, std::vector<Strategy> s) {
    Node n;
    n.start = start, n.end = end, n.strategies = std::move(s);
    return n;
  };
  p.nodes.push_back(node(0, 3, {{0, 40}, {5, 10}}));
  p.nodes.push_back(node(1, 3, {{0, 20}, {1, 15}}));
  p.nodes.push_back(node(2, 3, {{0, 5}, {1, 5}}));
  p.edges.emplace_back(0, 1, same_index(2));
  p.edges.emplace_back(1, 2, same_index(2));
  p.usage_limit = 60;
  return p;
}

TEST(SolverPrimal, RepairMovesCoupledNeighboursTogether) {
  const Model m = reduce(coupled_chain(), /*eliminate=*/false).model;
  ASSERT_EQ(m.n, 3);  // nothing fixed or merged: the repair has the whole chain to move
  for (int i = 0; i < m.n; ++i) ASSERT_EQ(m.num_strategies(i), 2);
  Primal p(m);
  p.set({0, 0, 0});
  ASSERT_FALSE(p.memory_ok());
  ASSERT_TRUE(p.repair());
  EXPECT_EQ(p.conflicts(), 0);  // a lone move of a would leave both of its pairs forbidden
  EXPECT_TRUE(p.feasible());
  EXPECT_EQ(p.labels(), (std::vector<int>{1, 1, 1}));
}

TEST(SolverPrimal, ChainMoveIsUndoneExactly) {
  const Model m = reduce(coupled_chain(), /*eliminate=*/false).model;
  ASSERT_EQ(m.n, 3);
  Primal p(m);
  p.set({0, 0, 0});
  const __int128 before = p.cost();
  const __int128 slack = p.slack_min(0, static_cast<int>(m.cap.size()));
  std::vector<std::pair<int, int>> moved;
  __int128 change = 0;
  ASSERT_TRUE(p.chain_move(0, 1, moved, change));
  EXPECT_EQ(p.cost(), before + change);
  EXPECT_EQ(moved.size(), 3u);
  p.undo(moved);
  EXPECT_EQ(p.labels(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(p.cost(), before);
  EXPECT_EQ(p.slack_min(0, static_cast<int>(m.cap.size())), slack);
}

TEST(SolverPrimal, ClearConflictsMovesWholeChainsOffForbiddenEntries) {
  // a - b - c - d must agree; a and b are cheaper in strategy 1, c and d in 0. {1, 1, 0, 0}
  // sits on one forbidden entry (b, c), and every single move costs 1 and trades it for
  // another one, so best-improvement moves stay put.
  Problem p;
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.start = 0, n.end = 1;
    n.strategies = i < 2 ? std::vector<Strategy>{{1, 1}, {0, 1}} : std::vector<Strategy>{{0, 1}, {1, 1}};
    p.nodes.push_back(n);
  }
  for (int i = 0; i + 1 < 4; ++i) p.edges.emplace_back(i, i + 1, same_index(2));
  p.usage_limit = 4;
  const Model m = reduce(p, /*eliminate=*/false).model;
  ASSERT_EQ(m.n, 4);
  Primal x(m);
  x.set({1, 1, 0, 0});
  ASSERT_EQ(x.conflicts(), 1);
  x.improve();
  ASSERT_EQ(x.conflicts(), 1);  // what the chain moves are for
  const __int128 before = x.cost() - Primal::kConflict;
  EXPECT_TRUE(x.clear_conflicts());
  EXPECT_TRUE(x.feasible());
  EXPECT_EQ(x.cost(), before + 2);  // two nodes moved, one cost unit each
  const std::vector<int> all0{0, 0, 0, 0}, all1{1, 1, 1, 1};
  EXPECT_TRUE(x.labels() == all0 || x.labels() == all1);
}

}  // namespace
}  // namespace tlm::solver
