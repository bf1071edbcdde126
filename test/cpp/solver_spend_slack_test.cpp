// spend_slack (solver/spend_slack.h): untying members of a tied labelling keeps it feasible,
// lowers its cost by exactly what it reports, fills memory a tied move cannot, and trades a
// cheap free for a dearer keep.
#include <gtest/gtest.h>

#include <random>

#include "core/solver/spend_slack.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

constexpr auto kForever = Clock::time_point::max();

// B blocks, one value each kept (cost 0) or recomputed (cost `recompute`), all alive at one
// step; consecutive blocks pay `boundary` when they choose differently.
Problem keep_or_recompute(int blocks, Usage bytes, Cost recompute, Cost boundary, Usage limit,
                          std::vector<std::vector<int>>& classes) {
  Problem p;
  classes.assign(1, {});
  for (int b = 0; b < blocks; ++b) {
    p.nodes.push_back(node(b, 2 * blocks - b, {{0, bytes}, {recompute, 0}}));
    classes[0].push_back(b);
    if (b > 0) p.edges.emplace_back(b - 1, b, std::vector<Cost>{0, boundary, boundary, 0});
  }
  p.usage_limit = limit;
  return p;
}

TEST(SolverSpendSlack, KeepsWhatFitsWhereTheTiedPlanRecomputesEverything) {
  std::vector<std::vector<int>> classes;
  // Keeping all 6 needs 60 bytes, the limit is 25: the best tied plan recomputes all 6 (cost 60).
  Problem p = keep_or_recompute(6, 10, 10, 1, 25, classes);
  Solution x(6, 1);
  ASSERT_TRUE(evaluate(p, x).feasible);
  const SlackResult r = spend_slack(p, classes, x, kForever);
  const Evaluation ev = evaluate(p, x);
  ASSERT_TRUE(ev.feasible);
  EXPECT_EQ(r.moves, 2);
  EXPECT_EQ(to_string(ev.cost), to_string(static_cast<__int128>(60) - r.saved));
  // Two kept, together at one end (one boundary): 4 x 10 + 1. The brute-force optimum is the same.
  EXPECT_EQ(to_string(ev.cost), "41");
  EXPECT_EQ(to_string(*testing::brute_force(p)), "41");
}

TEST(SolverSpendSlack, BuysRoomFromACheaperFree) {
  // Two classes over 4 blocks, all alive at step 0: `a` costs 1 to recompute, `b` costs 5.
  // The tied labelling keeps every `a` and recomputes every `b` (limit 40, exactly full):
  // each member of `b` kept in place of one of `a` saves 4.
  Problem p;
  std::vector<std::vector<int>> classes(2);
  for (int k = 0; k < 4; ++k) {
    classes[0].push_back(static_cast<int>(p.nodes.size()));
    p.nodes.push_back(node(0, 1, {{0, 10}, {1, 0}}));
    classes[1].push_back(static_cast<int>(p.nodes.size()));
    p.nodes.push_back(node(0, 1, {{0, 10}, {5, 0}}));
  }
  p.usage_limit = 40;
  Solution x(8, 0);
  for (size_t k = 1; k < x.size(); k += 2) x[k] = 1;
  ASSERT_TRUE(evaluate(p, x).feasible);
  const SlackResult r = spend_slack(p, classes, x, kForever);
  const Evaluation ev = evaluate(p, x);
  ASSERT_TRUE(ev.feasible);
  EXPECT_EQ(to_string(ev.cost), to_string(static_cast<__int128>(20) - r.saved));
  EXPECT_EQ(to_string(ev.cost), "4");  // every b kept, every a recomputed
}

TEST(SolverSpendSlack, RandomTiedLabellingsStayFeasibleAndNeverCostMore) {
  std::mt19937_64 rng(7);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int improved = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int blocks = rnd(2, 5), width = rnd(1, 3);
    Problem p;
    std::vector<std::vector<int>> classes(static_cast<size_t>(width));
    std::vector<std::vector<Strategy>> kinds(static_cast<size_t>(width));
    for (auto& k : kinds)
      for (int s = 0; s < 2 + rnd(0, 1); ++s) k.push_back({static_cast<Cost>(rnd(0, 9)), static_cast<Usage>(rnd(0, 9))});
    for (int b = 0; b < blocks; ++b)
      for (int w = 0; w < width; ++w) {
        const int id = static_cast<int>(p.nodes.size());
        p.nodes.push_back(node(b + rnd(0, 2), 2 * blocks + 3 - b, kinds[static_cast<size_t>(w)]));
        classes[static_cast<size_t>(w)].push_back(id);
        if (id > 0 && rnd(0, 1)) {
          const int u = rnd(0, id - 1);
          std::vector<Cost> m(p.nodes[static_cast<size_t>(u)].strategies.size() * p.nodes.back().strategies.size());
          for (Cost& c : m) c = rnd(0, 6) == 0 ? kInfiniteCost : rnd(0, 5);
          p.edges.emplace_back(u, id, m);
        }
      }
    // Every tied labelling that fits some limit: start from each and check the pass.
    Solution tied(p.nodes.size(), 0);
    std::vector<int> pick(static_cast<size_t>(width), 0);
    for (int w = 0; w < width; ++w) pick[static_cast<size_t>(w)] = rnd(0, static_cast<int>(kinds[static_cast<size_t>(w)].size()) - 1);
    for (int w = 0; w < width; ++w)
      for (int n : classes[static_cast<size_t>(w)]) tied[static_cast<size_t>(n)] = pick[static_cast<size_t>(w)];
    p.usage_limit = 0;
    const Evaluation start = evaluate(p, tied);
    if (start.cost < 0) continue;
    p.usage_limit = start.peak_usage + rnd(0, 12);
    const Evaluation before = evaluate(p, tied);
    if (!before.feasible) continue;  // a forbidden pair
    Solution x = tied;
    const SlackResult r = spend_slack(p, classes, x, kForever);
    const Evaluation after = evaluate(p, x);
    ASSERT_TRUE(after.feasible) << "trial " << trial;
    ASSERT_EQ(to_string(after.cost), to_string(before.cost - r.saved)) << "trial " << trial;
    ASSERT_GE(r.saved, 0) << "trial " << trial;
    improved += r.saved > 0;
  }
  EXPECT_GT(improved, 10);
}

}  // namespace
}  // namespace tlm::solver
