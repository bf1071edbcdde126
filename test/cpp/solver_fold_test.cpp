// fold_problem (solver/fold.h): a problem whose repeated blocks are tied folds into one
// whose labellings are exactly the tied ones, at the same cost and, where the kept steps
// bound the others, with the same feasibility.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/solver/fold.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

// A model of B repeated blocks, shaped like a transformer's step: a parameter `p` alive the
// whole step, then per block an activation `x` kept from its forward step to its backward
// step and a transient `y`, the loss, and per block (last first) a backward step that frees
// `x` and makes a gradient `g` kept to the end. Blocks share their usages (periodic); node
// costs differ by block. Classes: {x_b}, {y_b}, {g_b}.
struct Blocks {
  Problem p;
  std::vector<std::vector<int>> classes;  // x, y, g
  std::vector<char> ends_and_outside;     // steps of the first and the last block, and the rest
};

Blocks make_blocks(int blocks, uint64_t seed, std::optional<Usage> limit) {
  std::mt19937_64 rng(seed);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Blocks b;
  const int loss = 1 + 2 * blocks, end = loss + 1 + blocks + 1;
  std::vector<Usage> ux = {static_cast<Usage>(rnd(1, 9)), static_cast<Usage>(rnd(1, 9))};
  std::vector<Usage> uy = {static_cast<Usage>(rnd(1, 9)), static_cast<Usage>(rnd(1, 9))};
  std::vector<Usage> ug = {static_cast<Usage>(rnd(1, 9)), static_cast<Usage>(rnd(1, 9))};
  auto strategies = [&](const std::vector<Usage>& u) {
    std::vector<Strategy> s;
    for (Usage x : u) s.push_back({static_cast<Cost>(rnd(0, 20)), x});
    return s;
  };
  b.p.nodes.push_back(node(0, end, strategies({3, 5})));  // the parameter
  b.classes.resize(3);
  std::vector<Cost> link(4), grad(4);
  for (Cost& c : link) c = rnd(0, 15);
  for (Cost& c : grad) c = rnd(0, 15);
  link[1] = kInfiniteCost;  // a forbidden pair, in every copy
  const CostMatrix link_m = make_cost_matrix(link), grad_m = make_cost_matrix(grad);
  for (int k = 0; k < blocks; ++k) {
    const int fwd = 1 + 2 * k, bwd = loss + 1 + (blocks - 1 - k);
    const int x = static_cast<int>(b.p.nodes.size());
    b.p.nodes.push_back(node(fwd, bwd + 1, strategies(ux)));
    b.p.nodes.push_back(node(fwd + 1, fwd + 2, strategies(uy)));
    b.p.nodes.push_back(node(bwd, end, strategies(ug)));
    b.classes[0].push_back(x);
    b.classes[1].push_back(x + 1);
    b.classes[2].push_back(x + 2);
    b.p.edges.emplace_back(x, x + 1, link_m);
    b.p.edges.emplace_back(x + 2, x, grad_m);
    b.p.edges.emplace_back(k == 0 ? 0 : x - 2, x, link_m);  // from the block before (its y), or the parameter
  }
  b.p.nodes.push_back(node(loss, loss + 1, strategies({2, 4})));
  b.p.edges.emplace_back(static_cast<int>(b.p.nodes.size()) - 1, 1 + 3 * (blocks - 1) + 1, link_m);
  b.p.usage_limit = limit;
  b.ends_and_outside.assign(static_cast<size_t>(end), 1);
  for (int k = 1; k + 1 < blocks; ++k) {
    b.ends_and_outside[static_cast<size_t>(1 + 2 * k)] = b.ends_and_outside[static_cast<size_t>(2 + 2 * k)] = 0;
    b.ends_and_outside[static_cast<size_t>(loss + 1 + (blocks - 1 - k))] = 0;
  }
  return b;
}

// Every labelling of the folded problem's class nodes (shadows follow their class).
template <class F>
void for_each_folded(const Folding& f, F visit) {
  const size_t n = f.problem.nodes.size() - static_cast<size_t>(f.shadows);
  Solution x(f.problem.nodes.size(), 0);
  while (true) {
    for (const Coupling& c : f.problem.couplings)  // the shadows' identity couplings
      if (static_cast<size_t>(c.v) >= n) x[static_cast<size_t>(c.v)] = c.map[static_cast<size_t>(x[static_cast<size_t>(c.u)])];
    visit(x);
    size_t i = 0;
    while (i < n && ++x[i] == static_cast<int>(f.problem.nodes[i].strategies.size())) x[i++] = 0;
    if (i == n) return;
  }
}

TEST(SolverFold, EveryTiedLabellingCostsAndFitsTheSameFoldedAndUnfolded) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    Blocks b = make_blocks(6, seed, std::nullopt);
    std::string why;
    std::optional<Folding> f = fold_problem(b.p, b.classes, b.ends_and_outside, &why);
    ASSERT_TRUE(f.has_value()) << why;
    EXPECT_EQ(f->problem.nodes.size() - static_cast<size_t>(f->shadows), 5u);  // p, x, y, g, loss
    EXPECT_LT(f->kept_steps, b.ends_and_outside.size());
    // The limit: the median peak of the tied labellings, so that some fit and some do not.
    std::vector<Usage> peaks;
    for_each_folded(*f, [&](const Solution& x) { peaks.push_back(evaluate(b.p, unfold(*f, x)).peak_usage); });
    std::sort(peaks.begin(), peaks.end());
    b.p.usage_limit = peaks[peaks.size() / 2];
    f = fold_problem(b.p, b.classes, b.ends_and_outside, &why);
    ASSERT_TRUE(f.has_value()) << why;
    int fits = 0, over = 0;
    for_each_folded(*f, [&](const Solution& x) {
      const Evaluation folded = evaluate(f->problem, x);
      const Evaluation full = evaluate(b.p, unfold(*f, x));
      ASSERT_EQ(folded.feasible, full.feasible) << "seed " << seed;
      if (!full.feasible) return void(++over);
      ++fits;
      EXPECT_EQ(to_string(folded.cost), to_string(full.cost)) << "seed " << seed;
    });
    EXPECT_GT(fits, 0) << "seed " << seed;
    EXPECT_GT(over, 0) << "seed " << seed;
  }
}

TEST(SolverFold, SolvingTheFoldedProblemFindsTheBestTiedLabelling) {
  ASSERT_TRUE(testing::locate_highs());
  int solved = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const Blocks b = make_blocks(8, 100 + seed, static_cast<Usage>(50 + 5 * seed));
    const std::optional<Folding> f = fold_problem(b.p, b.classes, b.ends_and_outside, nullptr);
    ASSERT_TRUE(f.has_value());
    const std::optional<__int128> best = testing::brute_force(f->problem);
    if (!best) continue;
    ++solved;
    SolveOptions o;
    o.time_limit_s = 5;
    o.gap_tolerance = 0;
    const SolveResult r = solve(f->problem, o);
    EXPECT_EQ(to_string(r.cost), to_string(*best)) << "seed " << seed;
    const Evaluation full = evaluate(b.p, unfold(*f, r.solution));
    EXPECT_TRUE(full.feasible) << "seed " << seed;
    EXPECT_EQ(to_string(full.cost), to_string(*best)) << "seed " << seed;
  }
  EXPECT_GE(solved, 3);
}

TEST(SolverFold, AMembersUsageBoundsForbidItsClassTheStrategiesTheyRuleOut) {
  Blocks b = make_blocks(5, 3, std::nullopt);
  Node& y3 = b.p.nodes[static_cast<size_t>(b.classes[1][3])];
  ASSERT_NE(y3.strategies[0].usage, y3.strategies[1].usage);  // this seed's blocks differ there
  y3.usage_upper = std::min(y3.strategies[0].usage, y3.strategies[1].usage);  // one strategy left
  const std::optional<Folding> f = fold_problem(b.p, b.classes, b.ends_and_outside, nullptr);
  ASSERT_TRUE(f.has_value());
  int compared = 0;
  for_each_folded(*f, [&](const Solution& x) {
    const Evaluation full = evaluate(b.p, unfold(*f, x));
    ASSERT_EQ(evaluate(f->problem, x).feasible, full.feasible);
    const int chosen = x[static_cast<size_t>(f->node_of[static_cast<size_t>(b.classes[1][3])])];
    if (full.feasible) EXPECT_LE(y3.strategies[static_cast<size_t>(chosen)].usage, *y3.usage_upper);
    compared += full.feasible;
  });
  EXPECT_GT(compared, 0);
}

TEST(SolverFold, ClassesThatCannotBeTiedAreRefusedWithTheReason) {
  Blocks b = make_blocks(4, 7, std::nullopt);
  b.p.nodes[static_cast<size_t>(b.classes[1][2])].strategies.push_back({1, 1});
  for (Edge& e : b.p.edges)  // keep the edge matrices the size of their nodes
    if (e.u == b.classes[1][2] || e.v == b.classes[1][2]) e.costs = make_cost_matrix(std::vector<Cost>(6, 0));
  std::string why;
  EXPECT_FALSE(fold_problem(b.p, b.classes, b.ends_and_outside, &why).has_value());
  EXPECT_NE(why.find("strategies"), std::string::npos) << why;
  Blocks huge = make_blocks(4, 7, std::nullopt);
  for (int x : huge.classes[0]) huge.p.nodes[static_cast<size_t>(x)].strategies[0].cost = kInfiniteCost / 3;
  EXPECT_FALSE(fold_problem(huge.p, huge.classes, huge.ends_and_outside, &why).has_value());
  EXPECT_NE(why.find("64-bit"), std::string::npos) << why;
  Blocks twice = make_blocks(4, 7, std::nullopt);
  twice.classes[1].push_back(twice.classes[0][0]);
  EXPECT_FALSE(fold_problem(twice.p, twice.classes, twice.ends_and_outside, &why).has_value());
  EXPECT_NE(why.find("two classes"), std::string::npos) << why;
}

}  // namespace
}  // namespace tlm::solver
