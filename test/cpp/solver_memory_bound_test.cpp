// solve() on memory-bound problems (issue 33): keep-or-recompute choices
// under a limit close to the least possible peak, coupled only through memory
// (a knapsack over time). A worked example, and small instances shaped like
// benchmarks/iopddl_generate.py's "bound" class checked against brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/solver/problem_io.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

class SolverMemoryBound : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::locate_highs()) << "HiGHS (pip package highspy) is needed: the solver proves small "
                                            "optima through it";
  }
  static SolveResult run(const Problem& p) {
    SolveOptions o;
    o.time_limit_s = 20;
    o.gap_tolerance = 0;  // these tests compare with proven optima
    return solve(p, o);
  }
};

// Largest summed usage over the points where some node starts.
Usage peak(const Problem& p, const Solution& x) {
  Usage top = 0;
  for (const Node& at : p.nodes) {
    Usage load = 0;
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.nodes[i].start <= at.start && at.start < p.nodes[i].end) load += p.nodes[i].strategies[x[i]].usage;
    top = std::max(top, load);
  }
  return top;
}

TEST_F(SolverMemoryBound, KeepTheDearActivationRecomputeTheCheapOnes) {
  // Strategy 0 keeps an activation (cost 0), strategy 1 recomputes it (no memory).
  // A [0,4) 6 bytes or 50; B [0,2) 5 bytes or 20; C [2,4) 5 bytes or 25; D [1,3) 4 bytes or 12.
  // Limit 10. Keeping A forces B and C out (points 0 and 3 hold A and one of them):
  // 20 + 25 = 45, and D fits beside A (6 + 4). Recomputing A instead costs 50. The
  // cheapest bytes first (D at 3 per byte, the most overfilled points) would pay 57.
  Problem p;
  p.nodes = {node(0, 4, {{0, 6}, {50, 0}}), node(0, 2, {{0, 5}, {20, 0}}), node(2, 4, {{0, 5}, {25, 0}}),
             node(1, 3, {{0, 4}, {12, 0}})};
  p.usage_limit = 10;
  SolveResult r = run(p);
  EXPECT_EQ(to_string(r.cost), "45");
  EXPECT_EQ(r.solution, (Solution{0, 1, 1, 0}));
  EXPECT_TRUE(r.optimal);
  EXPECT_EQ(peak(p, r.solution), 10);
}

// A small instance of the generator's "bound" class: node i lives from i for
// a long time; strategy 0 keeps base + act at cost 0, the others recompute a
// growing share of act at a growing cost, the last all of it; the limit is
// 1.08x the least peak, and keeping everything needs about twice the limit.
Problem recompute_problem(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int> life(3, n), count(2, 3), act(20, 400), base(1, 60), intensity(1, 10);
  std::vector<Usage> acts(n), bases(n);
  Problem p;
  for (int i = 0; i < n; ++i) {
    acts[i] = act(rng);
    bases[i] = base(rng);
    const int k = count(rng);
    const Cost full = acts[i] * intensity(rng);
    std::vector<Strategy> s;
    for (int q = 0; q < k; ++q)  // recompute share q / (k - 1): cost rises, memory falls
      s.push_back({full * q / (k - 1), bases[i] + acts[i] * (k - 1 - q) / (k - 1)});
    p.nodes.push_back(node(i, std::min(n, i + life(rng)), std::move(s)));
  }
  Solution lean(n), keep(n, 0);
  for (int i = 0; i < n; ++i) lean[i] = static_cast<int>(p.nodes[i].strategies.size()) - 1;
  p.usage_limit = peak(p, lean) * 108 / 100;
  // Scale the activations so that keeping everything needs about twice the limit.
  const Usage least = peak(p, lean), want = 2 * *p.usage_limit - least, have = peak(p, keep) - least;
  for (int i = 0; i < n; ++i)
    for (Strategy& s : p.nodes[i].strategies) s.usage = bases[i] + (s.usage - bases[i]) * want / std::max<Usage>(have, 1);
  // One edge, as in the generator's "islands": free where the two agree (say, both recompute in one pass).
  const size_t a = p.nodes[0].strategies.size(), b = p.nodes[1].strategies.size();
  std::vector<Cost> mat(a * b);
  for (size_t s = 0; s < a; ++s)
    for (size_t t = 0; t < b; ++t) mat[s * b + t] = s == t ? 0 : 3;
  p.edges = {Edge(0, 1, std::move(mat))};
  return p;
}

TEST_F(SolverMemoryBound, RecomputeChoicesMatchBruteForce) {
  std::mt19937_64 rng(33);
  int traded = 0;  // optima that keep some activations and recompute others
  for (int trial = 0; trial < 40; ++trial) {
    Problem p = recompute_problem(rng, 9);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + write_problem(p));
    Solution keep(p.nodes.size(), 0);
    ASSERT_GT(peak(p, keep), *p.usage_limit * 3 / 2);  // memory-bound: keeping everything is far over
    Solution best;
    std::optional<__int128> opt = testing::brute_force(p, &best);
    ASSERT_TRUE(opt.has_value());  // the leanest labelling always fits
    SolveResult r = run(p);
    ASSERT_TRUE(evaluate(p, r.solution).feasible);
    EXPECT_EQ(to_string(r.cost), to_string(*opt));
    EXPECT_TRUE(r.optimal);
    traded += std::count(best.begin(), best.end(), 0) > 0 && std::count(best.begin(), best.end(), 0) < 9;
  }
  EXPECT_GT(traded, 30);  // the instances are knapsacks, not all-keep or all-recompute
}

}  // namespace
}  // namespace tlm::solver

namespace tlm::solver {
namespace {

TEST_F(SolverMemoryBound, SearchesFromAGivenLabelling) {
  std::mt19937_64 rng(7);
  const Problem p = recompute_problem(rng, 400);
  SolveOptions quick;
  quick.time_limit_s = 1e-3;  // the first labellings only
  const SolveResult cold = solve(p, quick);
  SolveOptions longer;
  longer.time_limit_s = 5;
  const SolveResult good = solve(p, longer);
  ASSERT_LT(good.cost, cold.cost) << "the instance must reward search";
  quick.start = &good.solution;
  const SolveResult warm = solve(p, quick);
  EXPECT_LE(warm.cost, good.cost);
  // A labelling over the limit is repaired into one that fits.
  Solution keep(p.nodes.size(), 0);
  quick.start = &keep;
  EXPECT_TRUE(evaluate(p, solve(p, quick).solution).feasible);
  Solution short_start(3, 0);
  quick.start = &short_start;
  EXPECT_THROW(solve(p, quick), std::invalid_argument);
}

}  // namespace
}  // namespace tlm::solver
