// The Lagrangian bound search (search.h) on a knapsack over time: keep-or-recompute
// choices whose intervals are staggered, so that each node spans many memory points
// and every point's constraint is implied by the one where all nodes are live. The
// Lagrangian dual then equals the fractional knapsack at that point, which a greedy
// pass computes exactly: the bound may never exceed it, and should reach it quickly.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/solver/model.h"
#include "core/solver/search.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

struct Knapsack {
  Problem problem;
  long double lp = 0;  // the LP relaxation's optimum (= the Lagrangian dual's)
};

// Node i keeps its activation (cost 0, usage u_i) or recomputes it (cost c_i, usage 0),
// live over [i, n + i): every node is live at point n - 1, each spans about n / 2 points.
// `base`: a cost every node pays whatever it chooses (so the Lagrangian starts above zero).
Knapsack staggered_knapsack(int n, uint64_t seed, Cost base = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Cost> cost(100, 10000);
  std::uniform_int_distribution<Usage> usage(1000, 5000);
  Knapsack k;
  std::vector<std::pair<Cost, Usage>> items;
  Usage total = 0;
  for (int i = 0; i < n; ++i) {
    const Cost c = cost(rng);
    const Usage u = usage(rng);
    items.emplace_back(c, u);
    total += u;
    k.problem.nodes.push_back(testing::node(i, n + i, {{base, u}, {base + c, 0}}));
  }
  const Usage cap = total / 2;
  k.problem.usage_limit = cap;
  // Fractional knapsack: keep the dearest recomputes per byte first.
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return static_cast<long double>(items[a].first) * items[b].second >
           static_cast<long double>(items[b].first) * items[a].second;
  });
  long double room = static_cast<long double>(cap), kept = 0, all = 0;
  for (const auto& [c, u] : items) all += c;
  for (int i : order) {
    const long double share = std::min<long double>(1, room / items[i].second);
    if (share <= 0) break;
    kept += share * items[i].first;
    room -= share * items[i].second;
  }
  k.lp = all - kept + static_cast<long double>(base) * n;
  return k;
}

TEST(SolverBoundSearch, ReachesTheFractionalKnapsackAcrossLongSpans) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Knapsack k = staggered_knapsack(120, seed);
    const Reduction r = reduce(k.problem, /*eliminate=*/false);
    const Model& m = r.model;
    ASSERT_GT(m.cap.size(), 50u) << "the instance should keep many memory points";
    // Aimed at a labelling 5% above the optimum, as the primal side would offer. (The
    // step rule before 2026-11-27, scale x1.1 up to 2, ended 2-20% below at 40-70
    // iterations here; the present one is within 0.05% at 70.)
    const __int128 upper = static_cast<__int128>(k.lp * 1.05L) - m.offset;
    const long double bound = lagrangian_bound(m, 70, upper) + static_cast<long double>(m.offset);
    EXPECT_LE(bound, k.lp + 1) << "seed " << seed << ": a bound above the LP relaxation is not valid";
    EXPECT_GE(bound, k.lp * 0.995L) << "seed " << seed << ": 70 iterations end " << 100 * (1 - bound / k.lp)
                                    << "% below the LP relaxation";
  }
}

TEST(SolverBoundSearch, AnUpperBoundFarAboveDoesNotThrowTheMultipliersAway) {
  // Early in a solve the only labelling may be a greedy start through "practically
  // forbidden" entries, 1e9 times the optimum (IOPDDL's A, L and S: their bounds ended at a
  // tenth of the cost, the first step having thrown the multipliers far). Aimed at such a
  // labelling, 100 iterations end within 5% of the fractional knapsack (0.1-3.1% on these
  // seeds; before the target's cap, 49-54% below it).
  for (uint64_t seed : {1u, 2u, 3u}) {
    const Knapsack k = staggered_knapsack(120, seed, /*base=*/1000);
    const Reduction r = reduce(k.problem, /*eliminate=*/false);
    const Model& m = r.model;
    const __int128 upper = static_cast<__int128>(k.lp * 1e9L) - m.offset;
    const long double bound = lagrangian_bound(m, 100, upper) + static_cast<long double>(m.offset);
    EXPECT_LE(bound, k.lp + 1) << "seed " << seed;
    EXPECT_GE(bound, k.lp * 0.95L) << "seed " << seed << ": 100 iterations end " << 100 * (1 - bound / k.lp)
                                   << "% below the LP relaxation";
  }
}

}  // namespace
}  // namespace tlm::solver
