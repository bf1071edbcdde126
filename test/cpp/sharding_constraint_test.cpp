// localmap.sharding_constraint nodes pin themselves (core/sharding_constraint.h), and
// the per-rank steps of a redistribution (core/rank_steps.h) that the op's kernel runs.
#include <gtest/gtest.h>

#include "core/plan_json.h"
#include "core/planner.h"
#include "core/rank_steps.h"
#include "core/sharding_constraint.h"

using namespace tlm;

namespace {

// x (input) -> relu -> sharding_constraint(spec) -> sum
std::string constrained_graph(const std::string& spec, const char* mesh = "[2, 2]") {
  std::string t = R"({"shape": [64, 32], "dtype": "float32"})";
  return std::string(R"({"mesh": {"shape": )") + mesh + R"(}, "nodes": [
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + t + R"(]},
    {"name": "h", "op": "aten.relu.default", "args": [{"t": [0, 0]}], "outputs": [)" + t + R"(]},
    {"name": "c", "op": "localmap.sharding_constraint.default", "args": [{"t": [1, 0]}, ")" + spec +
         R"(", null], "outputs": [)" + t + R"(]},
    {"name": "loss", "op": "aten.sum.default", "args": [{"t": [2, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]},
    {"name": "output", "op": "output", "args": [[{"t": [3, 0]}]], "extra": {"roles": ["output"], "targets": ["0"]}}]})";
}

}  // namespace

TEST(ShardingConstraint, NodeIsPinnedToItsPlacements) {
  for (const char* spec : {"S(0)S(1)", "RS(0)", "S(1)R"}) {
    Graph g = read_graph(constrained_graph(spec));
    ASSERT_TRUE(g.nodes[2].has_fixed);
    EXPECT_EQ(to_string(g.nodes[2].fixed.inputs.at(0)), spec);
    json::Value plan = plan_to_json(plan_graph(g, PlanOptions{}));
    const auto& s = plan.at("nodes").as_array().at(2).at("strategy");
    EXPECT_EQ(s.at("inputs").as_array().at(0).as_string(), spec);
    EXPECT_EQ(s.at("outputs").as_array().at(0).as_string(), spec);
    EXPECT_EQ(plan.at("nodes").as_array().at(2).at("family").as_string(), "sharding_constraint");
  }
}

TEST(ShardingConstraint, BadPlacementsAreInvalidArguments) {
  EXPECT_THROW(read_graph(constrained_graph("S(0)")), InvalidArgument);       // 1 placement, 2 mesh dims
  EXPECT_THROW(read_graph(constrained_graph("S(2)R")), InvalidArgument);      // tensor has 2 dims
  EXPECT_THROW(read_graph(constrained_graph("X(0)R")), InvalidArgument);      // does not parse
  try {
    read_graph(constrained_graph("S(0)RR"));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("one placement per mesh dim"), std::string::npos) << e.what();
  }
}

TEST(RankSteps, UnevenAllGatherPadsToTheLargestPiece) {
  // 5 rows over 2 ranks: pieces 3 and 2; the gather pads both to 3 and the result is cut to 5.
  Mesh mesh = make_mesh({2});
  for (int64_t r : {0, 1}) {
    auto steps = rank_redistribute_steps({5, 4}, mesh, parse_spec("S(0)"), parse_spec("R"), {r});
    ASSERT_EQ(steps.size(), 1u);
    EXPECT_EQ(steps[0].step.kind, CollectiveKind::AllGather);
    EXPECT_EQ(steps[0].group_size, 2);
    EXPECT_EQ(steps[0].src_full, 3);
    EXPECT_EQ(steps[0].logical_shape, (std::vector<int64_t>{5, 4}));
  }
}

TEST(RankSteps, ReduceScatterGivesEachRankItsChunk) {
  Mesh mesh = make_mesh({2, 2});
  // the second mesh dim splits what the first left: rows 0-2 at dp 0 -> 2 + 1 over tp
  auto steps = rank_redistribute_steps({5, 4}, mesh, parse_spec("S(0)P(sum)"), parse_spec("S(0)S(0)"), {0, 1});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step.kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(steps[0].step.mesh_dim, 1);
  EXPECT_EQ(steps[0].logical_shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(steps[0].dst_full, 2);
  EXPECT_EQ(steps[0].chunk_start, 2);
  EXPECT_EQ(steps[0].chunk_size, 1);
}

TEST(RankSteps, CoordinateOutsideTheMeshIsRefused) {
  Mesh mesh = make_mesh({2, 2});
  EXPECT_THROW(rank_redistribute_steps({4, 4}, mesh, parse_spec("RR"), parse_spec("S(0)R"), {2, 0}), InvalidArgument);
  EXPECT_THROW(rank_redistribute_steps({4, 4}, mesh, parse_spec("RR"), parse_spec("S(0)R"), {0}), InvalidArgument);
  EXPECT_THROW(rank_redistribute_steps({4, 4}, mesh, parse_spec("S(0)R"), parse_spec("P(sum)R"), {0, 0}),
               InvalidArgument);  // Shard -> Partial: DTensor refuses it
}
