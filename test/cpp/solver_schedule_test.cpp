// The solver's schedule: the greedy first labelling, the separable bound, the
// options table, the per-phase ledger, the gap tolerance and the promise that
// a time-limited solve always returns a feasible labelling with its gap.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <stdexcept>
#include <tuple>

#include "core/solver/greedy_start.h"
#include "core/solver/milp.h"
#include "core/solver/model.h"
#include "core/solver/problem_io.h"
#include "core/solver/search_options.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

// A cyclic core with no chain to fold: each node joins three earlier ones,
// sparse resharding-like edge costs, many strategies (a large model).
Problem cyclic_core(int n, int strategies, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Problem p;
  for (int i = 0; i < n; ++i) {
    std::vector<Strategy> st;
    for (int s = 0; s < strategies; ++s) st.push_back({uni(0, 1000000), uni(1, 100)});
    p.nodes.push_back(node(i, i + 1 + uni(0, 30), st));
  }
  for (int i = 1; i < n; ++i)
    for (int k = 0; k < 3; ++k) {
      const int j = static_cast<int>(uni(std::max(0, i - 40), i - 1));
      std::vector<Cost> costs;
      const int64_t scale = uni(1, 1000000);
      for (int a = 0; a < strategies; ++a)
        for (int b = 0; b < strategies; ++b) costs.push_back(a % 4 == b % 4 ? 0 : scale + uni(0, scale));
      p.edges.emplace_back(j, i, std::move(costs));
    }
  return p;
}

// A model by hand (reductions would solve these small cases away):
// `costs` per node, one edge per (u, v, matrix), no memory.
Model hand_model(const std::vector<std::vector<Cost>>& costs,
                 const std::vector<std::tuple<int, int, std::vector<Cost>>>& edges) {
  Model m;
  m.n = static_cast<int>(costs.size());
  m.off.assign(1, 0);
  for (int i = 0; i < m.n; ++i) {
    m.orig.push_back(i);
    for (size_t s = 0; s < costs[i].size(); ++s) {
      m.strat.push_back(static_cast<int>(s));
      m.cost.push_back(costs[i][s]);
      m.usage.push_back(0);
    }
    m.off.push_back(m.strat.size());
  }
  m.plo.assign(m.n, 0);
  m.phi.assign(m.n, 0);
  std::vector<std::vector<int>> adj(m.n);
  for (const auto& [u, v, mat] : edges) {
    adj[u].push_back(static_cast<int>(m.edges.size()));
    adj[v].push_back(static_cast<int>(m.edges.size()));
    m.edges.push_back({u, v, m.mat.size()});
    m.mat.insert(m.mat.end(), mat.begin(), mat.end());
  }
  m.adj_off.assign(1, 0);
  for (const auto& a : adj) {
    m.adj.insert(m.adj.end(), a.begin(), a.end());
    m.adj_off.push_back(m.adj.size());
  }
  return m;
}

TEST(GreedyStart, AvoidsForbiddenPairsWhenAChoiceAllowsIt) {
  // Node 1's cheap strategy is forbidden next to node 0's only cheap one; node 2
  // sees both. Greedy must pay 100 on node 1 rather than use the forbidden pair.
  Model m = hand_model({{0, 50}, {0, 100}, {0, 0}},
                       {{0, 1, {kInfiniteCost, 0, 0, kInfiniteCost}}, {1, 2, {0, 7, 7, 0}}});
  EXPECT_EQ(greedy_labels(m), (std::vector<int>{0, 1, 1}));
}

TEST(GreedyStart, TakesTheCheapestGivenLabelledNeighbours) {
  Model m = hand_model({{5, 1}, {0, 3}}, {{0, 1, {0, 9, 9, 0}}});
  // Node 0 alone: strategy 1 (cost 1). Node 1 given 1: 0 + 9 vs 3 + 0 -> strategy 1.
  EXPECT_EQ(greedy_labels(m), (std::vector<int>{1, 1}));
  EXPECT_EQ(separable_bound(m), 1 + 0 + 0);
}

TEST(GreedyStart, LeanTakesTheSmallestUsageStillAvoidingForbiddenPairs) {
  // Node 0: cheap and heavy (usage 9) or dear and lean (usage 1). Node 1: its lean strategy
  // is forbidden beside node 0's lean one. The lean start takes node 0 lean, then node 1's
  // heavier strategy rather than the forbidden pair; the cheap start takes both cheap ones.
  Model m = hand_model({{0, 50}, {0, 30}}, {{0, 1, {0, 0, 0, kInfiniteCost}}});
  m.usage = {9, 1, 4, 2};
  EXPECT_EQ(greedy_labels(m), (std::vector<int>{0, 0}));
  EXPECT_EQ(greedy_labels(m, /*lean=*/true), (std::vector<int>{1, 0}));
}

TEST(GreedyStart, FeasibleOnLargeCyclicCoresWithoutMemory) {
  Problem p = cyclic_core(2000, 12, 3);
  Reduction red = reduce(p);
  std::vector<int> x = greedy_labels(red.model);
  ASSERT_EQ(static_cast<int>(x.size()), red.model.n);
  EXPECT_TRUE(evaluate(p, red.expand(x)).feasible);
}

TEST(SeparableBound, CountsAPooledBlockOncePerEdgeThatSharesIt) {
  // Edges 0 and 1 share one pooled block (matrix_pool.h), least entry 2; edge 2 starts at
  // the same offset but spans 1 x 2 entries of it (least 3): each is counted with its own size.
  Model m = hand_model({{5, 1}, {0, 3}, {4, 4}, {7}},
                       {{0, 1, {3, 4, 2, 9}}, {1, 2, {8, 8, 8, 8}}, {3, 0, {8, 8}}});
  m.edges[1].off = m.edges[0].off;
  m.edges[2].off = m.edges[0].off;
  EXPECT_EQ(separable_bound(m), (1 + 0 + 4 + 7) + 2 + 2 + 3);
}

TEST(MilpWithin, AgreesWithTheFullCountAtEveryCap) {
  const Model m = hand_model({{5, 1}, {0, 3}, {4, 4}},
                             {{0, 1, {3, kInfiniteCost, 2, 9}}, {1, 2, {8, 8, 8, 8}}});
  const auto [cols, nz] = milp_size(m);
  for (size_t c = 0; c <= cols + 2; ++c)
    for (size_t z = 0; z <= nz + 2; ++z) EXPECT_EQ(milp_within(m, c, z), cols <= c && nz <= z) << c << " " << z;
}

TEST(SeparableBound, NeverExceedsTheOptimum) {
  std::mt19937_64 rng(99);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = testing::random_problem(rng);
    std::optional<__int128> opt = testing::brute_force(p);
    if (!opt) continue;
    Reduction red;
    try {
      red = reduce(p);
    } catch (const InfeasibleError&) {
      continue;
    }
    const long double bound = static_cast<long double>(red.model.offset) + separable_bound(red.model);
    EXPECT_LE(bound, static_cast<long double>(*opt)) << write_problem(p);
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(SearchOptions, DefaultsAreWithinTheirBounds) {
  EXPECT_NO_THROW(validate(SearchOptions{}));
  EXPECT_GE(search_option_table().size(), 20u);
}

TEST(SearchOptions, SetByNameChecksNameBoundsAndWholeNumbers) {
  SearchOptions o;
  set_search_option(o, "merge_interval_s", 5);
  EXPECT_EQ(o.merge_interval_s, 5);
  try {
    set_search_option(o, "merge_intervall_s", 5);
    FAIL() << "an unknown name must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown solver option 'merge_intervall_s'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("merge_interval_s"), std::string::npos) << "lists the valid names";
  }
  EXPECT_THROW(set_search_option(o, "reduce_share", 1.5), std::invalid_argument);
  EXPECT_THROW(set_search_option(o, "merge_pool", 2.5), std::invalid_argument);
  o.region_columns_min = 5000;
  o.region_columns_max = 4000;
  EXPECT_THROW(validate(o), std::invalid_argument);
}

TEST(PhaseLedger, TotalsOnlyPhasesThatRan) {
  PhaseLedger ledger;
  ledger.add_time(Phase::Price, 0.5);
  ledger.add_time(Phase::Price, 0.25);
  ledger.improved(Phase::Price, 10);
  ledger.improved(Phase::Merge, 3);
  std::vector<PhaseTotal> t = ledger.totals();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "price");
  EXPECT_DOUBLE_EQ(t[0].seconds, 0.75);
  EXPECT_EQ(t[0].runs, 2);
  EXPECT_EQ(t[0].improvements, 1);
  EXPECT_EQ(t[1].name, "merge");
  EXPECT_EQ(t[1].gain, 3);
}

TEST(SolveLimits, TinyLimitStillReturnsAFeasibleLabellingWithAFiniteGap) {
  ASSERT_TRUE(testing::locate_highs());
  Problem p = cyclic_core(6000, 16, 11);
  SolveOptions o;
  o.time_limit_s = 0.05;
  SolveResult r = solve(p, o);
  EXPECT_TRUE(evaluate(p, r.solution).feasible);
  EXPECT_TRUE(std::isfinite(r.bound));
  EXPECT_LE(r.bound, static_cast<double>(r.cost));
  EXPECT_TRUE(std::isfinite(r.gap));
  EXPECT_FALSE(r.phases.empty());
  // The limit stopped it (6,000 nodes are not solved in 50 ms), by the solver's own
  // clock; the test's wall time is a benchmark's business (a loaded machine stretches it).
  EXPECT_EQ(r.status, "time_limit");
  EXPECT_LT(r.seconds, 100 * o.time_limit_s);
}

// The bound search's core turns to kicks once bound_share of the time is
// spent, even while the bound still creeps up (at short limits it never
// stalls, and that core would never search). With bound_share 1 it kicks
// only after the bound stalls, if at all. (Both runs set bound_share_max to
// bound_share: between the two the bound goes on only while it keeps closing the
// gap, which depends on how many iterations the machine gives it.)
TEST(SolveSchedule, BoundShareHandsTheSecondCoreToKicks) {
  ASSERT_TRUE(testing::locate_highs());
  Problem p = cyclic_core(3000, 8, 3);
  auto kick_runs = [&](double bound_share, double bound_share_max) {
    SolveOptions o;
    o.time_limit_s = 1.5;
    o.gap_tolerance = 0;
    o.search.bound_share = bound_share;
    o.search.bound_share_max = bound_share_max;
    SolveResult r = solve(p, o);
    EXPECT_TRUE(evaluate(p, r.solution).feasible);
    int runs = 0;
    for (const PhaseTotal& t : r.phases)
      if (t.name == "kick") runs = t.runs;
    return runs;
  };
  const int handed_over = kick_runs(0.1, 0.1), kept = kick_runs(1.0, 1.0);
  EXPECT_GT(handed_over, 0);
  EXPECT_GT(handed_over, kept);
}

// Past price_share the price phase goes on only while it improves: with
// price_share_max equal to price_share it hands over at the share, with a
// larger one it may run longer but never past price_share_max.
TEST(SolveSchedule, PricePhaseStaysWithinItsShares) {
  ASSERT_TRUE(testing::locate_highs());
  Problem p = cyclic_core(3000, 8, 4);
  // The price phase's share of the solve, both by the solver's own clock (thread-seconds
  // in the phase over the solve's seconds): a loaded machine stretches both alike.
  auto price_share_of_solve = [&](double share, double share_max) {
    SolveOptions o;
    o.time_limit_s = 2.0;
    o.gap_tolerance = 0;
    o.search.price_share = share;
    o.search.price_share_max = share_max;
    SolveResult r = solve(p, o);
    EXPECT_TRUE(evaluate(p, r.solution).feasible);
    EXPECT_GT(r.seconds, 0);
    for (const PhaseTotal& t : r.phases)
      if (t.name == "price") return t.seconds / r.seconds;
    return 0.0;
  };
  // Up to the share, plus the iteration in flight when it ran out (generous: 15% of the solve).
  EXPECT_LT(price_share_of_solve(0.1, 0.1), 0.1 + 0.15);
  EXPECT_LT(price_share_of_solve(0.1, 0.5), 0.5 + 0.15);
}

TEST(SolveLimits, GapToleranceStopsOnceTheCertifiedGapIsSmallEnough) {
  ASSERT_TRUE(testing::locate_highs());
  Problem p = cyclic_core(400, 6, 5);
  SolveOptions o;
  o.time_limit_s = 30;
  o.gap_tolerance = 0.05;
  SolveResult r = solve(p, o);
  EXPECT_TRUE(r.status == "gap_tolerance" || r.status == "optimal") << r.status;
  EXPECT_LE(r.gap, 0.05);
  o.gap_tolerance = 1.5;
  EXPECT_THROW(solve(p, o), std::invalid_argument);
}

}  // namespace
}  // namespace tlm::solver

namespace tlm::solver {
namespace {

// From a caller's start that fills the memory limit (the fold's tied plan of a
// memory-bound model) the first core kicks from it at once: no price phase, whose cold
// prices decode labellings far over the limit and repair them far above such a start
// (405B's full problem: 10 iterations in 9 s at 1.4-7.6 times its cost), and kicks, not the
// region search, where the coarse model is too large for HiGHS whole. From a start with
// memory to spare the price phase runs as in a cold solve. One thread, so that every kick
// comes from that core.
TEST(SolveSchedule, AStartThatFillsMemoryIsKickedFromWithoutAPricePhase) {
  ASSERT_TRUE(testing::locate_highs());
  Problem p = cyclic_core(3000, 8, 5);
  auto run = [&](const Solution* start, Usage limit) {
    p.usage_limit = limit;
    SolveOptions o;
    o.time_limit_s = 1.5;
    o.gap_tolerance = 0;
    o.threads = 1;
    o.search.whole_coarse_milp_columns = 0;
    o.start = start;
    return solve(p, o);
  };
  auto phase = [](const SolveResult& r, const char* name) {
    for (const PhaseTotal& t : r.phases)
      if (t.name == name) return t;
    return PhaseTotal{};
  };
  // A limit that binds: 70% of the cheapest labelling's peak.
  Solution cheapest(p.nodes.size(), 0);
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (size_t s = 0; s < p.nodes[i].strategies.size(); ++s)
      if (p.nodes[i].strategies[s].cost < p.nodes[i].strategies[static_cast<size_t>(cheapest[i])].cost)
        cheapest[i] = static_cast<int>(s);
  const Usage tight = evaluate(p, cheapest).peak_usage * 7 / 10;
  const SolveResult cold = run(nullptr, tight);
  ASSERT_TRUE(evaluate(p, cold.solution).feasible);
  ASSERT_GE(evaluate(p, cold.solution).peak_usage, tight * 95 / 100);  // the start fills the limit
  EXPECT_EQ(phase(cold, "kick").runs, 0);  // a cold solve prices, then searches regions
  EXPECT_GT(phase(cold, "price").seconds, 0.1);
  const SolveResult warm = run(&cold.solution, tight);
  EXPECT_TRUE(evaluate(p, warm.solution).feasible);
  EXPECT_LE(warm.cost, cold.cost);
  EXPECT_GT(phase(warm, "kick").runs, 0);
  EXPECT_LT(phase(warm, "price").seconds, 0.05);
  // The same start under twice the limit: memory to spare, the price phase runs.
  const SolveResult loose = run(&cold.solution, 2 * tight);
  EXPECT_LE(loose.cost, cold.cost);
  EXPECT_EQ(phase(loose, "kick").runs, 0);
  EXPECT_GT(phase(loose, "price").seconds, 0.1);
}

}  // namespace
}  // namespace tlm::solver
