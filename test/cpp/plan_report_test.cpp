// What the plan carries for reports (issue 18): per-node redistributions with their
// collectives, the memory timeline, the solver's progress, and explain_node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/explain.h"
#include "core/planner.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

TEST(PlanReport, RedistributionsSumToEachNodesCommunication) {
  Graph g = read_graph(training_graph(8192, "[4]"));
  Plan plan = plan_graph(g, PlanOptions{});
  bool any = false;
  for (const PlannedNode& n : plan.nodes) {
    double sum = 0;
    for (const PlannedRedistribution& r : n.redistributions) {
      EXPECT_NE(r.from, r.to);
      sum += r.seconds;
      any = any || !r.collectives.empty();
      for (const std::string& c : r.collectives) EXPECT_NE(c.find(" over mesh dim "), std::string::npos) << c;
    }
    EXPECT_NEAR(sum, n.comm_s, 1e-12) << n.name;  // unchanged inputs cost nothing
  }
  EXPECT_TRUE(any);  // a sharded matmul's loss and gradient need collectives
}

TEST(PlanReport, MemoryTimelinePeaksAtTheEstimatedPeak) {
  Graph g = read_graph(training_graph(1024, "[2, 2]"));
  Plan plan = plan_graph(g, PlanOptions{});
  const MemoryEstimate& m = plan.summary.memory;
  ASSERT_EQ(m.timeline_nodes.size(), m.timeline_bytes.size());
  ASSERT_EQ(m.timeline_nodes.size(), 5u);  // every node but the parameter and the output
  EXPECT_EQ(m.parameters + m.optimizer_state + *std::max_element(m.timeline_bytes.begin(), m.timeline_bytes.end()),
            m.peak);
  EXPECT_TRUE(std::is_sorted(m.timeline_nodes.begin(), m.timeline_nodes.end()));
}

TEST(PlanReport, SolverProgressEndsAtTheResult) {
  Graph g = read_graph(training_graph(1024, "[2, 2]"));
  int calls = 0;
  PlanOptions opt;
  opt.on_progress = [&](double, double cost, double bound) {
    ++calls;
    EXPECT_LE(bound, cost * (1 + 1e-9));
  };
  Plan plan = plan_graph(g, opt);
  const auto& p = plan.summary.solver_progress;
  ASSERT_FALSE(p.empty());
  EXPECT_NEAR(p.back().cost, plan.summary.estimated_step_s, 1e-9 * plan.summary.estimated_step_s + 1e-12);
  EXPECT_EQ(static_cast<int>(p.size()), calls);  // every recorded point reached the callback, the end point too
}

TEST(PlanReport, ExplainPricesTheChosenStrategyAsThePlanDoes) {
  Graph g = read_graph(training_graph(8192, "[4]"));
  Plan plan = plan_graph(g, PlanOptions{});
  const CostModel cm = make_cost_model("H100");
  Explanation ex = explain_node(g, plan, cm, 2, StrategyOptions{}, 2, true);  // y = x @ w
  ASSERT_FALSE(ex.alternatives.empty());
  const Alternative& chosen = ex.alternatives.front();
  EXPECT_TRUE(chosen.chosen);
  EXPECT_EQ(chosen.strategy.outputs, plan.nodes[2].strategy.outputs);
  EXPECT_NEAR(chosen.compute_s, plan.nodes[2].compute_s, 1e-11);
  EXPECT_NEAR(chosen.comm_in_s, plan.nodes[2].comm_s, 1e-11);
  EXPECT_EQ(std::count_if(ex.alternatives.begin(), ex.alternatives.end(), [](const Alternative& a) { return a.chosen; }),
            1);
  // The replicated matmul does the whole product on every rank: 4x the chosen sharded one's compute.
  auto replicated = std::find_if(ex.alternatives.begin(), ex.alternatives.end(), [](const Alternative& a) {
    return a.strategy.outputs[0] == parse_spec("R") && a.strategy.inputs[0] == parse_spec("R");
  });
  ASSERT_NE(replicated, ex.alternatives.end());
  EXPECT_GT(replicated->compute_s, 3.5 * chosen.compute_s);
  // A parameter's alternatives hold it and its optimizer state for the whole step.
  Explanation w = explain_node(g, plan, cm, 0, StrategyOptions{}, 2, true);
  for (const Alternative& a : w.alternatives) EXPECT_EQ(a.bytes % 3, 0);
  EXPECT_THROW(explain_node(g, plan, cm, 6, StrategyOptions{}, 2, true), InvalidArgument);  // the output node
  EXPECT_THROW(explain_node(g, plan, cm, -1, StrategyOptions{}, 2, true), InvalidArgument);
}

TEST(PlanReport, TheSummaryPricesEveryEdgeAsTheSolverDid) {
  // FSDP2's plan: the parameter is sharded and gathered for each read, in its unit's bucket
  // (gather_units.h), and the loss is one element: the summary must price those edges with
  // the solver's bucket shares, or it reports a cost of a plan the solver did not choose.
  Graph g = read_graph(training_graph(1024, "[4]"));
  PlanOptions opt;
  opt.like = "fsdp2";
  Plan plan = plan_graph(g, opt);
  bool gathered = false;
  for (const PlannedNode& n : plan.nodes)
    for (const PlannedRedistribution& r : n.redistributions)
      gathered = gathered || (r.producer == 0 && !r.collectives.empty());
  EXPECT_TRUE(gathered);
  const auto& p = plan.summary.solver_progress;
  ASSERT_FALSE(p.empty());
  EXPECT_NEAR(p.back().cost, plan.summary.estimated_step_s, 1e-9 * plan.summary.estimated_step_s + 1e-12);
}
