// FactoredCosts (edge matrices as distinct rows x distinct columns), min_plus,
// and the message passing built on them (DualSolver): its bound must never
// exceed the optimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "core/solver/dual.h"
#include "core/solver/factored_costs.h"
#include "core/solver/model.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A model of two nodes (3 and 4 strategies) whose one edge is `mat`.
Model two_nodes(std::vector<Cost> mat, int su = 3, int sv = 4) {
  Model m;
  m.n = 2;
  m.off = {0, static_cast<size_t>(su), static_cast<size_t>(su + sv)};
  m.cost.assign(static_cast<size_t>(su + sv), 0);
  m.usage.assign(static_cast<size_t>(su + sv), 0);
  m.strat.resize(static_cast<size_t>(su + sv));
  m.plo.assign(2, 0);
  m.phi.assign(2, 0);
  m.edges.push_back({0, 1, 0});
  m.mat = std::move(mat);
  m.adj_off = {0, 1, 2};
  m.adj = {0, 0};
  return m;
}

TEST(FactoredCosts, EqualRowsAndColumnsShareAClass) {
  const Cost X = kInfiniteCost;
  // Rows 0 and 2 are equal; columns 1 and 3 are equal.
  const Model m = two_nodes({5, 7, 1, 7,  //
                             2, X, 3, X,  //
                             5, 7, 1, 7});
  const auto f = factor_edge_costs(m);
  const FactoredBlock& b = f->of(0);
  EXPECT_EQ(b.rows, 2);
  EXPECT_EQ(b.cols, 3);
  EXPECT_EQ(b.row[0], b.row[2]);
  EXPECT_NE(b.row[0], b.row[1]);
  EXPECT_EQ(b.col[1], b.col[3]);
  for (int s = 0; s < 3; ++s)
    for (int t = 0; t < 4; ++t) {
      const Cost x = m.mat[static_cast<size_t>(s) * 4 + t];
      EXPECT_EQ(b.at(s, t), x == X ? kInf : static_cast<double>(x)) << s << "," << t;
    }
}

TEST(FactoredCosts, EdgesOnOneBlockShareItsFactoringOnlyWithTheSameShape) {
  // Three edges on the same 12 entries: two as 3 x 4, one as 4 x 3 (the
  // pool shares blocks by content, so shapes may differ).
  Model m;
  m.n = 4;
  m.off = {0, 3, 7, 10, 14};
  m.mat = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  m.edges = {{0, 1, 0}, {2, 3, 0}, {1, 2, 0}};
  const auto f = factor_edge_costs(m);
  EXPECT_EQ(f->blocks.size(), 2u);
  EXPECT_EQ(f->block_of_edge[0], f->block_of_edge[1]);
  EXPECT_NE(f->block_of_edge[0], f->block_of_edge[2]);
  EXPECT_EQ(f->of(2).at(3, 2), 12.0);  // 4 x 3: row 3, column 2
  EXPECT_EQ(f->of(0).at(2, 3), 12.0);  // 3 x 4: row 2, column 3
}

TEST(FactoredCosts, MinPlusEqualsTheNaiveMinimum) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 14; ++n)
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<double> row(static_cast<size_t>(n)), add(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        row[c] = rng() % 5 == 0 ? kInf : static_cast<double>(rng() % 1000) - 500;
        add[c] = static_cast<double>(rng() % 1000) - 500;
      }
      double want = kInf;
      for (int c = 0; c < n; ++c) want = std::min(want, row[c] + add[c]);
      EXPECT_EQ(min_plus(row.data(), add.data(), n), want) << "n=" << n;
    }
}

TEST(DualSolver, BoundNeverExceedsTheOptimumOfRandomModels) {
  // Message passing on the reduced model of random problems: the certified
  // bound (model offset included) stays at or below the brute-force optimum
  // after every pass.
  std::mt19937_64 rng(99);
  int checked = 0, tight = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Problem p = testing::random_problem(rng);
    p.usage_limit.reset();  // the bound below has no memory prices: compare with the unconstrained optimum
    const std::optional<__int128> opt = testing::brute_force(p);
    if (!opt) continue;
    Reduction red;
    try {
      red = reduce(p, /*eliminate=*/false);  // keep nodes for the messages to pass between
    } catch (const InfeasibleError&) {
      continue;
    }
    const Model& m = red.model;
    if (m.n == 0) continue;
    DualSolver dual(m);
    std::vector<int> labels;
    long double b = 0;
    for (int it = 0; it < 8; ++it) {
      dual.forward(labels);
      dual.backward();
      b = dual.exact_bound() + static_cast<long double>(m.offset);
      ASSERT_LE(b, static_cast<long double>(*opt) + 1e-6L) << "trial " << trial << " pass " << it;
    }
    ++checked;
    tight += b > static_cast<long double>(*opt) - 0.5L;
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(tight, checked / 4) << tight << " of " << checked;  // and it is not trivially low
}

}  // namespace
}  // namespace tlm::solver
