// sweep_labels (solver/sweep_labels.h): one sweep of iterated conditional modes mends a
// decode's dead ends and never makes a labelling dearer at the prices it is given.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/solver/cost_math.h"
#include "core/solver/milp.h"
#include "core/solver/sweep_labels.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

// The labelling's cost at `unary` plus the edges' costs (+inf with a forbidden pair).
double priced_cost(const Model& m, const std::vector<double>& unary, const std::vector<int>& x) {
  double total = 0;
  for (int i = 0; i < m.n; ++i) {
    const size_t k = m.off[i] + static_cast<size_t>(x[i]);
    if (m.cost[k] >= kHugeCost) return std::numeric_limits<double>::infinity();
    total += unary[k];
  }
  for (const Model::ModelEdge& e : m.edges) {
    const Cost c = m.mat[e.off + static_cast<size_t>(x[e.u]) * m.num_strategies(e.v) + x[e.v]];
    if (c >= kHugeCost) return std::numeric_limits<double>::infinity();
    total += static_cast<double>(c);
  }
  return total;
}

std::vector<double> model_costs(const Model& m) { return std::vector<double>(m.cost.begin(), m.cost.end()); }

TEST(SweepLabels, MendsADeadEndOfAGreedyDecode) {
  // b - a and b - c, b labelled first: b's strategy 0 is forbidden with a's 0 and the decode
  // took both (a dead end); b's strategy 1 goes with both neighbours at a little more cost.
  Problem p;
  p.nodes = {node(0, 0, {{0, 0}, {1, 0}}), node(0, 0, {{0, 0}, {5, 0}}), node(0, 0, {{0, 0}, {5, 0}})};
  p.edges.push_back({1, 0, {kInfiniteCost, 0, 0, 0}});
  p.edges.push_back({0, 2, {0, 0, 0, 0}});
  const Model m = plain_model(p);
  ASSERT_EQ(m.n, 3);
  const std::vector<double> unary = model_costs(m);
  std::vector<int> x = {0, 0, 0};
  ASSERT_TRUE(std::isinf(priced_cost(m, unary, x)));
  sweep_labels(m, unary, x);
  EXPECT_EQ(x, (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(priced_cost(m, unary, x), 1.0);
}

TEST(SweepLabels, NeverMakesALabellingDearer) {
  std::mt19937_64 rng(42);
  int mended = 0, improved = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Problem p = testing::random_problem(rng);
    p.usage_limit.reset();
    Model m;
    try {
      m = plain_model(p);
    } catch (const std::exception&) {  // a node with no allowed strategy: no labelling to sweep
      continue;
    }
    if (m.n == 0) continue;
    std::vector<double> unary = model_costs(m);
    for (size_t k = 0; k < unary.size(); ++k)  // priced as the block bound prices: cost + a multiplier's term
      unary[k] += 0.5 * static_cast<double>(m.usage[k]) + std::uniform_real_distribution<double>(-3, 3)(rng);
    std::vector<int> x(static_cast<size_t>(m.n));
    for (int i = 0; i < m.n; ++i) x[i] = std::uniform_int_distribution<int>(0, m.num_strategies(i) - 1)(rng);
    const double before = priced_cost(m, unary, x);
    sweep_labels(m, unary, x);
    for (int i = 0; i < m.n; ++i) ASSERT_TRUE(x[i] >= 0 && x[i] < m.num_strategies(i));
    const double after = priced_cost(m, unary, x);
    ASSERT_LE(after, before) << "trial " << trial;
    mended += std::isinf(before) && !std::isinf(after);
    improved += after < before;
  }
  EXPECT_GT(mended, 0);
  EXPECT_GT(improved, 100);
}

}  // namespace
}  // namespace tlm::solver
