// State held plain (plain_state.h): a plan that replicates every parameter runs its
// optimizer on plain tensors, without DTensor's per-kernel dispatch, and the planner
// prices and chooses plans so when parallelize holds such state plain.
#include <gtest/gtest.h>

#include "core/cost_model.h"
#include "core/plain_state.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

namespace {

// A dispatch of `seconds` per optimizer kernel on parameters held as DTensors.
std::string dispatch_calibration(double seconds) {
  return R"({"device": {"optimizer_kernel_overhead_s": )" + std::to_string(seconds) + "}}";
}

std::string param_spec(const Plan& plan) { return to_string(plan.nodes[0].strategy.outputs[0]); }

}  // namespace

TEST(PlainState, APlanReplicatingAllStateIsPricedWithoutTheOptimizersDispatch) {
  Graph g = read_graph(training_graph(512, "[4]"));
  PlanOptions opt;
  opt.calibration_json = dispatch_calibration(1e-6);  // small beside the step: the relative gap stays small
  opt.fixed_params["w"] = parse_spec("R");
  const Plan as_dtensors = plan_graph(g, opt);
  opt.plain_replicated_state = true;
  const Plan plain = plan_graph(g, opt);
  const double dispatch = make_cost_model(opt.device, opt.calibration_json).optimizer_dispatch_seconds(2);
  EXPECT_NEAR(dispatch, 7e-6, 1e-15);  // AdamW: 7 kernels a parameter
  ASSERT_TRUE(replicates_all_state(g, plain));
  EXPECT_NEAR(as_dtensors.nodes[0].compute_s - plain.nodes[0].compute_s, dispatch, 1e-12);
  EXPECT_NEAR(as_dtensors.summary.estimated_step_s - plain.summary.estimated_step_s, dispatch, 1e-12);
  EXPECT_NEAR(as_dtensors.summary.compute_s - plain.summary.compute_s, dispatch, 1e-12);
  // The solver's cost follows, and its bound still certifies the plan.
  EXPECT_NEAR(to_seconds(as_dtensors.summary.solver.cost) - to_seconds(plain.summary.solver.cost), dispatch, 1e-11);
  EXPECT_GE(plain.summary.solver.gap, 0);
  EXPECT_LE(plain.summary.solver.gap, 1e-3);
}

TEST(PlainState, ThePlannerKeepsThePlanReplicatingAllStateWhereHoldingItPlainMakesItCheapest) {
  // Large products: the free solve shards w (Planner.LargeMatmulIsShardedOnFourRanks). A
  // dispatch of a second a kernel is paid by the sharded plan's DTensors and spared by a
  // replicated plan held plain: with plain state the planner replicates w.
  Graph g = read_graph(training_graph(8192, "[4]"));
  PlanOptions opt;
  opt.calibration_json = dispatch_calibration(1.0);
  const Plan free = plan_graph(g, opt);
  EXPECT_NE(param_spec(free), "R");
  opt.plain_replicated_state = true;
  const Plan plain = plan_graph(g, opt);
  EXPECT_EQ(param_spec(plain), "R");
  EXPECT_TRUE(replicates_all_state(g, plain));
  EXPECT_LT(plain.summary.estimated_step_s, free.summary.estimated_step_s - 6.0);
  EXPECT_LE(plain.summary.solver.gap, 1e-3);
  EXPECT_NEAR(to_seconds(plain.summary.solver.cost), plain.summary.estimated_step_s, 1e-6);

  // Without dispatch to spare, the sharded plan stays the cheaper one.
  opt.calibration_json = dispatch_calibration(0.0);
  EXPECT_NE(param_spec(plan_graph(g, opt)), "R");
  // A parameter the caller shards is never weighed against replicating it.
  opt.calibration_json = dispatch_calibration(1.0);
  opt.fixed_params["w"] = parse_spec("S(0)");
  EXPECT_EQ(param_spec(plan_graph(g, opt)), "S(0)");
}

TEST(PlainState, ReplicatedStateBytesCountEachParametersGradientAndOptimizerStates) {
  Graph g = read_graph(training_graph(64, "[4]"));
  EXPECT_EQ(replicated_state_bytes(g, 2), 4 * 64 * 64 * 4);  // w, its gradient, AdamW's 2 states
  EXPECT_EQ(replicated_state_bytes(g, 0), 2 * 64 * 64 * 4);
  const CostModel cm = make_cost_model("H100", dispatch_calibration(1e-3));
  EXPECT_NEAR(state_dispatch_seconds(g, cm, 2), 7e-3, 1e-12);  // one parameter
}
