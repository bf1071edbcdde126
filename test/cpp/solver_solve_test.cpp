// solve(): worked examples with known optima, infeasibility messages, and
// 1,000 random small problems checked against brute force.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "core/solver/model.h"
#include "core/solver/problem_io.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

class SolverSolve : public ::testing::Test {
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

TEST_F(SolverSolve, ReshardingVersusCompute) {
  // a: 10 or 0; b: 0 or 10; switching placement between them costs 7.
  // Options: (0,0)=10, (0,1)=27, (1,0)=0+0+7=7, (1,1)=10.
  Problem p;
  p.nodes = {node(0, 1, {{10, 0}, {0, 0}}), node(0, 1, {{0, 0}, {10, 0}})};
  p.edges = {{0, 1, {0, 7, 7, 0}}};
  SolveResult r = run(p);
  EXPECT_EQ(to_string(r.cost), "7");
  EXPECT_EQ(r.solution, (Solution{1, 0}));
  EXPECT_TRUE(r.optimal);
  EXPECT_EQ(r.bound, 7.0);
  p.nodes[1].pinned = 1;  // now (1,1) = 10 is the best allowed
  r = run(p);
  EXPECT_EQ(to_string(r.cost), "10");
  EXPECT_EQ(r.solution, (Solution{1, 1}));
}

TEST_F(SolverSolve, MemoryLimitForcesOneShard) {
  // Two tensors live together; replicated: cost 0, 8 bytes; sharded: cost 5, 2 bytes.
  // Limit 10 admits one replica and one shard: 5 (both replicated would need 16).
  Problem p;
  p.nodes = {node(0, 2, {{0, 8}, {5, 2}}), node(1, 3, {{0, 8}, {5, 2}})};
  p.usage_limit = 10;
  SolveResult r = run(p);
  EXPECT_EQ(to_string(r.cost), "5");
  EXPECT_TRUE(evaluate(p, r.solution).feasible);
  p.usage_limit = 4;  // both must shard
  EXPECT_EQ(to_string(run(p).cost), "10");
}

TEST_F(SolverSolve, CouplingMakesGradientFollowParameter) {
  // parameter: 0 or 3; gradient: 4 or 0; coupled one-to-one: (0,0)=4, (1,1)=3.
  Problem p;
  p.nodes = {node(0, 1, {{0, 0}, {3, 0}}), node(0, 1, {{4, 0}, {0, 0}})};
  p.couplings = {{0, 1, {0, 1}}};
  SolveResult r = run(p);
  EXPECT_EQ(to_string(r.cost), "3");
  EXPECT_EQ(r.solution, (Solution{1, 1}));
}

TEST_F(SolverSolve, ContestExampleOptimum) {
  Problem p = read_problem(R"({"problem": {"name": "example",
    "nodes": {"intervals": [[30, 70], [40, 70], [50, 120], [110, 140], [110, 150]],
              "costs": [[15], [55, 65], [25, 45, 35], [85, 75], [95]],
              "usages": [[10], [25, 25], [15, 20, 15], [10, 10], [15]]},
    "edges": {"nodes": [[0, 1], [0, 2], [1, 3], [2, 4], [3, 4]],
              "costs": [[30, 40], [50, 10, 40], [90, 10, 20, 80], [60, 20, 30], [70, 60]]},
    "usage_limit": 50}})");
  SolveResult r = run(p);
  EXPECT_EQ(to_string(r.cost), "445");  // brute force over all 12 solutions agrees:
  EXPECT_EQ(to_string(*testing::brute_force(p)), "445");
  EXPECT_EQ(r.bound, 445.0);
}

TEST_F(SolverSolve, InfeasibleMemoryNamesTimeLimitAndLeastUsage) {
  Problem p;
  p.nodes = {node(0, 5, {{0, 7}, {1, 5}}), node(3, 6, {{0, 2}})};
  p.usage_limit = 6;
  try {
    run(p);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("usage_limit 6 at time 3"), std::string::npos) << what;
    EXPECT_NE(what.find("smallest possible usage there, 7"), std::string::npos) << what;
  }
}

TEST_F(SolverSolve, InfeasiblePinsNameTheNode) {
  Problem p;
  p.nodes = {node(0, 1, {{0, 0}, {1, 0}}), node(0, 1, {{0, 0}, {1, 0}})};
  p.nodes[0].pinned = 0;
  p.nodes[1].pinned = 1;
  p.couplings = {{0, 1, {0, 0}}};
  try {
    run(p);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("has no strategy satisfying"), std::string::npos) << what;
    EXPECT_NE(what.find("pinned to strategy"), std::string::npos) << what;
  }
}

TEST_F(SolverSolve, DeterministicForSeedAndThreads) {
  std::mt19937_64 rng(7);
  Problem p = testing::random_problem(rng);
  while (!testing::brute_force(p)) p = testing::random_problem(rng);
  SolveResult a = run(p), b = run(p);
  EXPECT_EQ(a.solution, b.solution);
  EXPECT_EQ(to_string(a.cost), to_string(b.cost));
}

TEST_F(SolverSolve, ReductionExpandsToTheSameCost) {
  // Reductions alone (no search) must reproduce costs exactly: a chain of
  // degree-2 nodes is eliminated and its choices rebuilt.
  Problem p;
  for (int i = 0; i < 6; ++i) p.nodes.push_back(node(0, 0, {{i, 0}, {6 - i, 0}, {3, 0}}));
  for (int i = 0; i + 1 < 6; ++i) p.edges.push_back({i, i + 1, {0, 4, 9, 4, 0, 9, 9, 9, 1}});
  Reduction red = reduce(p);
  EXPECT_EQ(red.model.n, 0) << red.summary;
  Solution x = red.expand({});
  EXPECT_EQ(to_string(evaluate(p, x).cost), to_string(red.model.offset));
  EXPECT_EQ(to_string(red.model.offset), to_string(*testing::brute_force(p)));
}

TEST_F(SolverSolve, SharedEdgeMatricesAreReadOnly) {
  // One matrix object on three edges, two of them parallel (the reduction
  // sums those): the solve must leave it as it was and give the same
  // result as separate copies.
  const std::vector<Cost> values{0, 9, 9, 0};
  Problem shared;
  for (int i = 0; i < 3; ++i) shared.nodes.push_back(node(0, 1, {{1, 0}, {4, 0}}));
  const CostMatrix m = make_cost_matrix(values);
  shared.edges = {Edge(0, 1, m), Edge(0, 1, m), Edge(1, 2, m)};
  Problem copies = shared;
  for (auto& e : copies.edges) e.costs = make_cost_matrix(values);
  const SolveResult a = run(shared), b = run(copies);
  EXPECT_EQ(*m, values);
  EXPECT_EQ(to_string(a.cost), to_string(b.cost));
  EXPECT_EQ(to_string(a.cost), "3");  // all on strategy 0
  EXPECT_EQ(a.solution, b.solution);
}

TEST_F(SolverSolve, AGoodEnoughCostStopsAtTheFirstLabellingWithinIt) {
  // A re-solve that only repairs a plan (planner.cpp) stops at its first labelling costing at
  // most good_enough_cost: here any labelling (the cost is far above every one), so some
  // problems end on a labelling dearer than their optimum, reported as such; a cost below the
  // optimum never stops the search early.
  std::mt19937_64 rng(20261204);
  int stopped_above_optimum = 0, solved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = testing::random_problem(rng);
    std::optional<__int128> opt = testing::brute_force(p);
    if (!opt) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + write_problem(p));
    ++solved;
    SolveOptions o;
    o.time_limit_s = 20;
    o.gap_tolerance = 0;
    o.good_enough_cost = 1e9;
    const SolveResult loose = solve(p, o);
    ASSERT_TRUE(evaluate(p, loose.solution).feasible);
    EXPECT_LE(static_cast<double>(loose.cost), o.good_enough_cost);
    if (loose.cost > *opt) {
      EXPECT_EQ(loose.status, "good_enough");
      EXPECT_FALSE(loose.optimal);
      ++stopped_above_optimum;
    }
    o.good_enough_cost = static_cast<double>(*opt) - 1;
    EXPECT_EQ(to_string(solve(p, o).cost), to_string(*opt));
  }
  EXPECT_GT(solved, 100);
  EXPECT_GT(stopped_above_optimum, 0) << "no problem's first labelling was dearer than its optimum";
}

TEST_F(SolverSolve, ACallersBoundBesideIsTheSolvesBound) {
  // SolveOptions::bound_beside runs on the second thread before the bound search, and each
  // bound it passes to `raise` (problem units, offset included) is the solve's: the solver
  // cannot check it, so a caller that claims too much is believed. Claiming far above every
  // labelling's cost shows it: every search is reported optimal with its bound at its cost,
  // HiGHS kept out (without the caller's bound, 42 of these searches end unproven). `raise`
  // answers false once the search is over, and the caller then returns. (A caller's valid
  // bound: the planner's block bound, planner.cpp.)
  std::mt19937_64 rng(20261205);
  int called = 0, stopped = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = testing::random_problem(rng);
    const std::optional<__int128> opt = testing::brute_force(p);
    if (!opt) continue;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + write_problem(p));
    SolveOptions o;
    o.time_limit_s = 5;
    o.gap_tolerance = 0;
    o.search.whole_milp_columns = 0;  // HiGHS would prove the true optimum after the search
    o.search.whole_coarse_milp_columns = 0;
    int calls = 0;
    bool told_to_stop = false;
    o.bound_beside = [&](Clock::time_point until, const SolveOptions::RaiseBound& raise) {
      ++calls;
      const long double claimed = 1e15L;
      while (Clock::now() < until) {
        if (!raise(claimed)) {
          told_to_stop = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return claimed;
    };
    const SolveResult r = solve(p, o);
    EXPECT_LE(calls, 1);  // none when the reductions or the start settle the problem first
    EXPECT_EQ(told_to_stop, calls == 1);
    if (calls == 0) continue;
    ++called;
    EXPECT_TRUE(r.optimal);
    EXPECT_EQ(r.status, "optimal");
    EXPECT_EQ(r.bound, static_cast<double>(r.cost));
    stopped += told_to_stop;
  }
  EXPECT_GT(called, 30) << "the search rarely reached its second thread";
  EXPECT_EQ(stopped, called);
}

TEST_F(SolverSolve, ACallersBoundBesideThatThrowsFailsTheSolve) {
  // It runs on the search's second thread, where an exception would end the process: it
  // reaches the caller of solve() instead, as any of the solve's own errors.
  std::mt19937_64 rng(7);
  int thrown = 0;
  for (int trial = 0; trial < 100 && thrown < 5; ++trial) {
    Problem p = testing::random_problem(rng);
    if (!testing::brute_force(p)) continue;
    SolveOptions o;
    o.time_limit_s = 5;
    o.gap_tolerance = 0;
    bool called = false;
    o.bound_beside = [&](Clock::time_point, const SolveOptions::RaiseBound&) -> long double {
      called = true;
      throw std::invalid_argument("block_bound: node 3 is not a node or in two blocks");
    };
    try {
      solve(p, o);
      EXPECT_FALSE(called) << "the caller's bound threw and the solve returned";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(called);
      EXPECT_STREQ(e.what(), "block_bound: node 3 is not a node or in two blocks");
      ++thrown;
    }
  }
  EXPECT_EQ(thrown, 5);
}

TEST_F(SolverSolve, ThousandRandomProblemsMatchBruteForce) {
  std::mt19937_64 rng(20250101);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    Problem p = testing::random_problem(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + write_problem(p));
    std::optional<__int128> opt = testing::brute_force(p);
    if (!opt) {
      EXPECT_THROW(run(p), InfeasibleError);
      ++infeasible;
      continue;
    }
    ++feasible;
    SolveResult r = run(p);
    Evaluation ev = evaluate(p, r.solution);
    ASSERT_TRUE(ev.feasible) << ev.violations.front();
    ASSERT_EQ(to_string(ev.cost), to_string(r.cost));
    ASSERT_EQ(to_string(r.cost), to_string(*opt));
    ASSERT_LE(r.bound, static_cast<double>(*opt));
  }
  EXPECT_GT(feasible, 500);
  EXPECT_GT(infeasible, 20);  // the generator must exercise infeasibility too
}

}  // namespace
}  // namespace tlm::solver
