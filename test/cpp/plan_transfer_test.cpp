// transfer_plan (core/planner.h): a plan carried to the same program at other sizes.
#include <gtest/gtest.h>

#include "core/planner.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

namespace {

std::vector<std::string> chosen_outputs(const Plan& p) {
  std::vector<std::string> out;
  for (const PlannedNode& n : p.nodes)
    for (const PlacementSpec& s : n.strategy.outputs) out.push_back(to_string(s));
  return out;
}

}  // namespace

TEST(PlanTransfer, KeepsEveryStrategyAndPricesTheNewSizes) {
  PlanOptions opt;
  const Plan planned = plan_graph(read_graph(training_graph(8192, "[4]")), opt);
  const Graph larger = read_graph(training_graph(8200, "[4]"));
  const PlanTransfer t = transfer_plan(larger, opt, planned, 0.05);
  ASSERT_TRUE(t.plan) << t.reason;
  EXPECT_EQ(t.reason, "");
  EXPECT_EQ(chosen_outputs(*t.plan), chosen_outputs(planned));
  EXPECT_EQ(t.plan->summary.solver.status, "transferred");
  // Priced at the new sizes: the matmuls grow with n^3.
  EXPECT_GT(t.plan->summary.compute_s, planned.summary.compute_s);
  EXPECT_NEAR(t.previous_cost_s, t.plan->summary.estimated_step_s, 1e-9 * t.previous_cost_s);
  EXPECT_LE(t.bound_s, t.previous_cost_s * (1 + 1e-12));
  EXPECT_LE(t.previous_cost_s, 1.05 * t.best_cost_s);
}

TEST(PlanTransfer, RefusesWhenAMateriallyCheaperPlanExistsAtTheNewSizes) {
  PlanOptions opt;
  // 8 x 8 on two ranks: a collective costs more than the whole matmul, so nothing is sharded.
  const Plan tiny = plan_graph(read_graph(training_graph(8, "[4]")), opt);
  for (const std::string& s : chosen_outputs(tiny)) EXPECT_EQ(s, "R");
  // At 8192 dividing the matmuls by four saves far more than the collectives cost.
  const PlanTransfer t = transfer_plan(read_graph(training_graph(8192, "[4]")), opt, tiny, 0.05);
  EXPECT_FALSE(t.plan);
  EXPECT_NE(t.reason.find("cheaper exists at the new sizes"), std::string::npos) << t.reason;
  EXPECT_GT(t.previous_cost_s, 1.05 * t.best_cost_s);
}

TEST(PlanTransfer, RefusesAnotherProgramAndABrokenMemoryLimit) {
  PlanOptions opt;
  const Plan planned = plan_graph(read_graph(training_graph(64, "[4]")), opt);
  const Plan other = plan_graph(read_graph(training_graph(64, "[2, 2]")), opt);  // other specs
  const PlanTransfer wrong = transfer_plan(read_graph(training_graph(64, "[4]")), opt, other, 0.05);
  EXPECT_FALSE(wrong.plan);
  EXPECT_NE(wrong.reason.find("not offered"), std::string::npos) << wrong.reason;
  opt.memory_limit_bytes = 3 * 4096 * 4096 * 4;  // less than the replicated plan's tensors at 4096
  const PlanTransfer over = transfer_plan(read_graph(training_graph(4096, "[4]")), opt, planned, 1e9);
  EXPECT_FALSE(over.plan);
  EXPECT_NE(over.reason.find("breaks a constraint"), std::string::npos) << over.reason;
  EXPECT_THROW(transfer_plan(read_graph(training_graph(64, "[4]")), opt, planned, -1), InvalidArgument);
}
