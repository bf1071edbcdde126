// Views: shape factoring, exactness on uneven shards, per-rank shape arguments.
#include <gtest/gtest.h>

#include "core/strategy.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::test;

namespace {

Graph view_graph(std::vector<int64_t> mesh, std::vector<int64_t> in, std::vector<int64_t> out) {
  return one_op_graph(mesh, {{in}}, "aten.view.default", "[$0," + shape_json(out) + "]", {{out}});
}

}  // namespace

TEST(StrategyView, MergeKeepsLeadingShardWhenExact) {
  // (4, 6) -> (24): S(0) -> S(0) is exact on 2 ranks (rows 0-1 = elements 0-11).
  auto all = render_all(enumerate_strategies(view_graph({2}, {4, 6}, {24}), 1));
  EXPECT_TRUE(has(all, "S(0)->S(0)"));
  EXPECT_FALSE(has(all, "S(1)->S(0)"));  // a trailing dim of a merge cannot stay sharded
  EXPECT_TRUE(has(all, "P(sum)->P(sum)"));
}

TEST(StrategyView, UnevenMergeIsRejected) {
  // (3, 2) -> (6) on 2 ranks: rows split 2|1 = elements 4|2, but (6) splits 3|3.
  auto all = render_all(enumerate_strategies(view_graph({2}, {3, 2}, {6}), 1));
  EXPECT_FALSE(has(all, "S(0)->S(0)"));
  EXPECT_TRUE(has(all, "R->R"));
}

TEST(StrategyView, SplitAndRegroupFactoring) {
  // (4, 6) -> (2, 12): one group; leading dims 4 and 2 split alike on 2 ranks.
  auto all = render_all(enumerate_strategies(view_graph({2}, {4, 6}, {2, 12}), 1));
  EXPECT_TRUE(has(all, "S(0)->S(0)"));
  // (8, 3) -> (2, 4, 3): the trailing 3 is its own group and stays sharded.
  auto all3 = render_all(enumerate_strategies(view_graph({3}, {8, 3}, {2, 4, 3}), 1));
  EXPECT_TRUE(has(all3, "S(1)->S(2)"));
  EXPECT_FALSE(has(all3, "S(0)->S(0)"));  // 2 rows cannot split over 3 ranks
}

TEST(StrategyView, NestedShardingOfAMergedDim) {
  // (8, 3) -> (24) on 2x2: rows nested 2|2|2|2 = elements 6 each, same as (24) nested.
  auto all = render_all(enumerate_strategies(view_graph({2, 2}, {8, 3}, {24}), 1));
  EXPECT_TRUE(has(all, "S(0)S(0)->S(0)S(0)"));
  // (6, 4) -> (24) on 2x2: rows 2|1|2|1 (nested uneven) vs elements 6 each.
  auto bad = render_all(enumerate_strategies(view_graph({2, 2}, {6, 4}, {24}), 1));
  EXPECT_FALSE(has(bad, "S(0)S(0)->S(0)S(0)"));
  EXPECT_TRUE(has(bad, "S(0)R->S(0)R"));
}

TEST(StrategyView, LocalCallArgsUseEachRanksLocalShape) {
  // (5, 4) -> (5, 2, 2) with S(0) on 2 ranks: rank 0 holds 3 rows, rank 1 holds 2.
  Graph g = view_graph({2}, {5, 4}, {5, 2, 2});
  OpStrategy s = strategy({"S(0)"}, {"S(0)"});
  auto a0 = local_call_args(g, 1, s, {0});
  auto a1 = local_call_args(g, 1, s, {1});
  EXPECT_EQ(a0.at("args").as_array()[1].dump(), "[3,2,2]");
  EXPECT_EQ(a1.at("args").as_array()[1].dump(), "[2,2,2]");
  // The tensor reference stays as it is.
  EXPECT_EQ(a0.at("args").as_array()[0].dump(), R"({"t":[0,0]})");
}

TEST(StrategyView, ExpandShardsBroadcastDimsOfAReplicatedInput) {
  Graph g = one_op_graph({2}, {{{}}}, "aten.expand.default", "[$0,[6,4]]", {{{6, 4}}});
  auto all = render_all(enumerate_strategies(g, 1));
  EXPECT_TRUE(has(all, "R->S(0)"));
  EXPECT_TRUE(has(all, "R->S(1)"));
  auto a = local_call_args(g, 1, strategy({"R"}, {"S(1)"}), {1});
  EXPECT_EQ(a.at("args").as_array()[1].dump(), "[6,2]");
}

TEST(StrategyView, SqueezeNeverDropsALocalSizeOneDim) {
  // (2, 1, 4) squeezed on 2 ranks: S(0) leaves local size 1 in dim 0, which a
  // local squeeze() would drop; S(2) leaves 2 | 2.
  Graph g = one_op_graph({2}, {{{2, 1, 4}}}, "aten.squeeze.default", "[$0]", {{{2, 4}}});
  auto all = render_all(enumerate_strategies(g, 1));
  EXPECT_FALSE(has(all, "S(0)->S(0)"));
  EXPECT_TRUE(has(all, "S(2)->S(1)"));
  // (2, 1, 3): S(2) splits 2 | 1, so rank 1 would lose dim 2 too.
  Graph g3 = one_op_graph({2}, {{{2, 1, 3}}}, "aten.squeeze.default", "[$0]", {{{2, 3}}});
  EXPECT_FALSE(has(render_all(enumerate_strategies(g3, 1)), "S(2)->S(1)"));
}
