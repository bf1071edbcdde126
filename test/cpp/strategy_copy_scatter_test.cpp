// Rules of the ops that shift labels into decoder inputs (copy, fill.Tensor,
// slice_scatter, select_scatter), DropPath's bernoulli.p, and the strided views
// that stay replicated or Partial (as_strided, as_strided_scatter).
#include <gtest/gtest.h>

#include "core/strategy.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::test;

TEST(StrategyCopy, BroadcastSourceIsReplicatedWhereItHasNoDim) {
  Graph g = one_op_graph({2}, {{{4, 6}}, {{6}}}, "aten.copy.default", "[$0,$1]", {{{4, 6}}});
  auto all = op_strategies(g);
  EXPECT_TRUE(has(all, "S(0),R->S(0)"));     // src broadcast along dim 0
  EXPECT_TRUE(has(all, "S(1),S(0)->S(1)"));
  EXPECT_TRUE(has(all, "R,P(sum)->P(sum)"));  // the output is src: linear in it
  EXPECT_FALSE(has(all, "P(sum),R->P(sum)"));  // self's values are never read
  EXPECT_FALSE(has(all, "P(sum),P(sum)->P(sum)"));
}

TEST(StrategyCopy, NarrowingAndIntegerCopiesKeepOnlyMaxMin) {
  Graph n = one_op_graph({2}, {{{4}, "bfloat16"}, {{4}, "float32"}}, "aten.copy.default", "[$0,$1]",
                         {{{4}, "bfloat16"}});
  auto all = op_strategies(n);
  EXPECT_FALSE(has(all, "R,P(sum)->P(sum)"));
  EXPECT_TRUE(has(all, "R,P(max)->P(max)"));
  Graph b = one_op_graph({2}, {{{4}, "bool"}, {{4}, "bool"}}, "aten.copy.default", "[$0,$1]", {{{4}, "bool"}});
  EXPECT_EQ(op_strategies(b), (std::vector<std::string>{"R,R->R", "S(0),S(0)->S(0)"}));
}

TEST(StrategyFill, TensorValueIsReplicatedOrPartial) {
  Graph g = one_op_graph({2}, {{{3, 5}}, {{}}}, "aten.fill.Tensor", "[$0,$1]", {{{3, 5}}});
  auto all = op_strategies(g);
  EXPECT_TRUE(has(all, "S(0),R->S(0)"));
  EXPECT_TRUE(has(all, "S(1),R->S(1)"));
  EXPECT_TRUE(has(all, "R,P(avg)->P(avg)"));
  EXPECT_FALSE(has(all, "P(sum),R->P(sum)"));
}

TEST(StrategySliceScatter, ScatteredDimStaysWhole) {
  Graph g = one_op_graph({2}, {{{4, 6}}, {{4, 5}}}, "aten.slice_scatter.default", "[$0,$1,1,1]", {{{4, 6}}});
  auto all = op_strategies(g);
  EXPECT_TRUE(has(all, "S(0),S(0)->S(0)"));
  EXPECT_FALSE(has(all, "S(1),S(1)->S(1)"));
  EXPECT_TRUE(has(all, "P(sum),P(sum)->P(sum)"));
  EXPECT_TRUE(has(all, "P(max),P(max)->P(max)"));
  EXPECT_FALSE(has(all, "P(sum),R->P(sum)"));  // self and src must be Partial together
  // A slice of dim 0 that keeps dim 1 whole: dim 1 shards.
  Graph d0 = one_op_graph({2}, {{{5, 3}}, {{3, 3}}}, "aten.slice_scatter.default", "[$0,$1,0,0,null,2]",
                          {{{5, 3}}});
  auto all0 = op_strategies(d0);
  EXPECT_TRUE(has(all0, "S(1),S(1)->S(1)"));
  EXPECT_FALSE(has(all0, "S(0),S(0)->S(0)"));
}

TEST(StrategySelectScatter, SourceDimsShiftPastTheSelectedDim) {
  Graph g = one_op_graph({2}, {{{4, 6, 8}}, {{4, 8}}}, "aten.select_scatter.default", "[$0,$1,1,0]",
                         {{{4, 6, 8}}});
  auto all = op_strategies(g);
  EXPECT_TRUE(has(all, "S(0),S(0)->S(0)"));
  EXPECT_TRUE(has(all, "S(2),S(1)->S(2)"));
  EXPECT_FALSE(has(all, "S(1),S(1)->S(1)"));
  EXPECT_TRUE(has(all, "P(min),P(min)->P(min)"));
  Graph b = one_op_graph({2}, {{{4, 6}, "bool"}, {{4}, "bool"}}, "aten.select_scatter.default", "[$0,$1,1,0]",
                         {{{4, 6}, "bool"}});
  EXPECT_EQ(op_strategies(b), (std::vector<std::string>{"R,R->R", "S(0),S(0)->S(0)"}));
}

TEST(StrategyRandom, BernoulliShardsEveryDimWithoutPartial) {
  Graph g = one_op_graph({2}, {{{4, 1, 1}}}, "aten.bernoulli.p", "[$0,0.9]", {{{4, 1, 1}}});
  auto all = op_strategies(g);
  EXPECT_TRUE(has(all, "S(0)->S(0)"));
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));  // a draw is not linear in self
}

TEST(StrategyAsStrided, ArbitraryStridesNeverShard) {
  Graph g = one_op_graph({2}, {{{4, 6}}}, "aten.as_strided.default", "[$0,[4,3],[6,2],0]", {{{4, 3}}});
  auto all = op_strategies(g);
  EXPECT_FALSE(has(all, "S(0)->S(0)"));
  EXPECT_TRUE(has(all, "R->R"));
  EXPECT_TRUE(has(all, "P(max)->P(max)"));
  Graph s = one_op_graph({2}, {{{4, 6}}, {{4, 3}}}, "aten.as_strided_scatter.default", "[$0,$1,[4,3],[6,2],0]",
                         {{{4, 6}}});
  auto alls = op_strategies(s);
  EXPECT_TRUE(has(alls, "P(sum),P(sum)->P(sum)"));
  EXPECT_FALSE(has(alls, "S(0),S(0)->S(0)"));
  EXPECT_FALSE(has(alls, "R,P(sum)->P(sum)"));
}

TEST(StrategyAsStrided, AContiguousViewOfAContiguousInputShardsAsAReshape) {
  const std::string flags = R"(,"extra":{"contiguous_inputs":[true]})";
  auto graph = [](const std::string& extra) {
    std::string doc = R"J({"mesh":{"shape":[2]},"nodes":[
      {"name":"in0","op":"placeholder","role":"input","outputs":[{"shape":[16],"dtype":"float32"}]},
      {"name":"a","op":"aten.as_strided.default","args":[{"t":[0,0]},[4,4],[4,1],0],"outputs":[{"shape":[4,4],"dtype":"float32"}])J" +
                      extra + R"J(},
      {"name":"output","op":"output","args":[[{"t":[1,0]}]]}]})J";
    return read_graph(doc);
  };
  Graph g = graph(flags);
  auto all = render_all(enumerate_strategies(g, 1));
  EXPECT_TRUE(std::find(all.begin(), all.end(), "S(0)->S(0)") != all.end());
  // rank 1 holds rows 2..3 (elements 8..15 of the flat input): its own piece, from its own offset
  auto a1 = local_call_args(g, 1, strategy({"S(0)"}, {"S(0)"}), {1});
  EXPECT_EQ(a1.at("args").dump(), R"([{"t":[0,0]},[2,4],[4,1],null])");

  // unsharded calls keep their arguments
  EXPECT_EQ(local_call_args(g, 1, strategy({"R"}, {"R"}), {1}).at("args").dump(), R"([{"t":[0,0]},[4,4],[4,1],0])");
  // traced on a non-contiguous input (or without the exporter's flag): never sharded
  for (const std::string& extra : {std::string(R"(,"extra":{"contiguous_inputs":[false]})"), std::string()}) {
    auto none = render_all(enumerate_strategies(graph(extra), 1));
    EXPECT_TRUE(std::find(none.begin(), none.end(), "S(0)->S(0)") == none.end());
  }
}
