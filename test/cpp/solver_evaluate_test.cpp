// Evaluator: exact totals and every violated constraint, each named.
#include <gtest/gtest.h>

#include "core/solver/problem.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

bool mentions(const Evaluation& ev, const std::string& text) {
  for (const auto& v : ev.violations)
    if (v.find(text) != std::string::npos) return true;
  return false;
}

TEST(SolverEvaluate, SumsBeyondInt64Exactly) {
  const Cost big = static_cast<Cost>(1) << 62;
  Problem p;
  p.nodes = {node(0, 1, {{big, 0}}), node(0, 1, {{big, 0}})};
  p.edges = {{0, 1, {big}}};
  Evaluation ev = evaluate(p, {0, 0});
  EXPECT_TRUE(ev.feasible);
  EXPECT_EQ(to_string(ev.cost), "13835058055282163712");  // 3 * 2^62
}

TEST(SolverEvaluate, WorkedExampleCost) {
  // 10 + 0 (node costs) + 7 (resharding between strategy 1 and 0).
  Problem p;
  p.nodes = {node(0, 1, {{10, 0}, {0, 0}}), node(0, 1, {{0, 0}, {10, 0}})};
  p.edges = {{0, 1, {0, 7, 7, 0}}};
  EXPECT_EQ(to_string(evaluate(p, {1, 0}).cost), "7");
  EXPECT_EQ(to_string(evaluate(p, {0, 1}).cost), "27");
}

TEST(SolverEvaluate, ReportsEveryViolation) {
  Problem p;
  p.nodes = {node(0, 10, {{1, 6}, {2, 3}}), node(5, 20, {{1, 6}, {kInfiniteCost, 1}}), node(0, 3, {{0, 1}})};
  p.nodes[0].pinned = 1;
  p.nodes[2].usage_upper = 0;
  p.edges = {{0, 1, {0, kInfiniteCost, 0, 0}}};
  p.couplings = {{0, 1, {1, -1}}};
  p.usage_limit = 10;
  Evaluation ev = evaluate(p, {0, 1});
  EXPECT_FALSE(ev.feasible);
  EXPECT_EQ(ev.violations.size(), 1u) << "wrong length stops early";
  ev = evaluate(p, {0, 1, 0});
  EXPECT_FALSE(ev.feasible);
  EXPECT_TRUE(mentions(ev, "node 1 picks forbidden strategy 1"));
  EXPECT_TRUE(mentions(ev, "node 0 is pinned to strategy 1 but picks 0"));
  EXPECT_TRUE(mentions(ev, "node 2 usage 1 is above its upper bound 0"));
  EXPECT_TRUE(mentions(ev, "edge 0 (0, 1) forbids strategies (0, 1)"));
  EXPECT_TRUE(mentions(ev, "coupling 0: node 0 strategy 0 requires strategy 1 of node 1, got 1") == false);
  ev = evaluate(p, {0, 0, 0});
  // usage: node0 6 on [0,10), node1 6 on [5,20), node2 1 on [0,3): 12 > 10 during [5,10)
  EXPECT_TRUE(mentions(ev, "usage 12 exceeds usage_limit 10 during [5, 10)"));
  EXPECT_TRUE(mentions(ev, "coupling 0: node 0 strategy 0 requires strategy 1 of node 1, got 0"));
  EXPECT_EQ(ev.peak_usage, 12);
  EXPECT_EQ(ev.peak_time, 5);
}

TEST(SolverEvaluate, OutOfRangeStrategyIsAViolationNotACrash) {
  Problem p;
  p.nodes = {node(0, 1, {{1, 1}})};
  Evaluation ev = evaluate(p, {3});
  EXPECT_FALSE(ev.feasible);
  EXPECT_TRUE(mentions(ev, "node 0 picks strategy 3 of 1"));
}

TEST(SolverEvaluate, EmptyIntervalsNeverCountTowardsMemory) {
  Problem p;
  p.nodes = {node(4, 4, {{0, 100}}), node(0, 2, {{0, 5}})};
  p.usage_limit = 5;
  EXPECT_TRUE(evaluate(p, {0, 0}).feasible);
}

TEST(SolverValidate, NamesTheInconsistency) {
  Problem p;
  p.nodes = {node(0, 1, {{1, 1}, {2, 2}}), node(0, 1, {{1, 1}})};
  p.edges = {{0, 1, {1, 2, 3}}};
  try {
    validate(p);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("edge 0 (0, 1) has 3 costs; expected |S_u| x |S_v| = 2"), std::string::npos)
        << e.what();
  }
  p.edges.clear();
  p.nodes[1].pinned = 4;
  EXPECT_THROW(validate(p), std::invalid_argument);
}

}  // namespace
}  // namespace tlm::solver
