// Why a plan replicates everything (issue 29): the reason comes from the cost model,
// and only for a plan that shards nothing.
#include <gtest/gtest.h>

#include "core/explain.h"
#include "core/planner.h"
#include "core/replication_reason.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

TEST(ReplicationReason, ATinyMatmulIsReplicatedBecauseShardingCostsMoreThanItSaves) {
  Graph g = read_graph(training_graph(8, "[4]"));
  Plan plan = plan_graph(g, PlanOptions{});
  const ReplicationReason r = replication_reason_of_plan(g, PlanOptions{}, plan);
  ASSERT_TRUE(r.all_replicated);
  ASSERT_GE(r.node, 0);
  EXPECT_NE(r.op, "placeholder");  // an op, where the compute is
  EXPECT_GT(r.ops_priced, 0);
  EXPECT_GE(r.compute_saved_s, 0);  // a kernel this small costs its launch overhead either way
  EXPECT_GT(r.comm_added_s, r.compute_saved_s);
  // The figures are explain_node's for that alternative, against the replicated choice.
  const Explanation ex = explain_node(g, plan, make_cost_model("H100"), r.node, StrategyOptions{}, 2, true);
  const Alternative& chosen = ex.alternatives.front();
  bool found = false;
  for (const Alternative& a : ex.alternatives) {
    if (a.strategy.inputs != r.alternative.inputs || a.strategy.outputs != r.alternative.outputs) continue;
    found = true;
    EXPECT_DOUBLE_EQ(r.compute_saved_s, chosen.compute_s - a.compute_s);
    EXPECT_DOUBLE_EQ(r.comm_added_s, a.comm_in_s + a.comm_out_s - chosen.comm_in_s - chosen.comm_out_s);
  }
  EXPECT_TRUE(found);
  // No other alternative of this op that divides the work as well comes closer to paying for itself.
  for (const Alternative& a : ex.alternatives)
    if (a.possible && !a.chosen && (chosen.compute_s - a.compute_s > 0) == (r.compute_saved_s > 0))
      EXPECT_GE(a.comm_in_s + a.comm_out_s - chosen.comm_in_s - chosen.comm_out_s - (chosen.compute_s - a.compute_s),
                r.comm_added_s - r.compute_saved_s - 1e-15);
}

TEST(ReplicationReason, APlanThatShardsHasNoReason) {
  Graph g = read_graph(training_graph(8192, "[4]"));
  Plan plan = plan_graph(g, PlanOptions{});
  const ReplicationReason r = replication_reason_of_plan(g, PlanOptions{}, plan);
  EXPECT_FALSE(r.all_replicated);
  EXPECT_EQ(r.node, -1);
  EXPECT_EQ(r.ops_priced, 0);
}
