// Rules of the Fourier transforms (_fft_c2c / _fft_r2c / _fft_c2r) and scatter_reduce.
#include <gtest/gtest.h>

#include "core/strategy.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::test;

TEST(StrategyFft, TransformedDimsStayWholeAndTheBatchShards) {
  // FNet's mixing: fftn over (sequence, hidden) of a (batch, sequence, hidden) tensor.
  Graph g = one_op_graph({2}, {{{4, 6, 8}, "complex64"}}, "aten._fft_c2c.default", "[$0,[1,2],0,true]",
                         {{{4, 6, 8}, "complex64"}});
  auto all = op_strategies(g);
  EXPECT_EQ(all, (std::vector<std::string>{"R->R", "S(0)->S(0)"}));
  // rfft of the last dim: it shrinks to 8 / 2 + 1 and stays whole; the others shard.
  Graph r = one_op_graph({2}, {{{4, 6, 8}}}, "aten._fft_r2c.default", "[$0,[2],0,true]", {{{4, 6, 5}, "complex64"}});
  auto rall = op_strategies(r);
  EXPECT_TRUE(has(rall, "S(0)->S(0)"));
  EXPECT_TRUE(has(rall, "S(1)->S(1)"));
  EXPECT_FALSE(has(rall, "S(2)->S(2)"));
  EXPECT_FALSE(has(rall, "P(sum)->P(sum)"));  // no complex Partial values
}

TEST(StrategyFft, NoRankHoldsAnEmptyBatch) {
  // 4 rows over 3 ranks split 2 + 2 + 0, and torch's CPU transforms fail on an empty batch.
  Graph g = one_op_graph({3}, {{{4, 6}, "complex64"}}, "aten._fft_c2c.default", "[$0,[1],0,true]",
                         {{{4, 6}, "complex64"}});
  EXPECT_EQ(op_strategies(g), (std::vector<std::string>{"R->R"}));
}

TEST(StrategyScatterReduce, OtherDimsShardAndOnlyASumIsLinear) {
  Graph s = one_op_graph({2}, {{{4, 6}}, {{4, 3}, "int64"}, {{4, 3}}}, "aten.scatter_reduce.two",
                         R"([$0,1,$1,$2,"sum"])", {{{4, 6}}});
  auto sum = op_strategies(s);
  EXPECT_TRUE(has(sum, "S(0),S(0),S(0)->S(0)"));
  EXPECT_FALSE(has(sum, "S(1),S(1),S(1)->S(1)"));  // the reduced dim stays whole
  EXPECT_TRUE(has(sum, "P(sum),R,P(sum)->P(sum)"));
  Graph m = one_op_graph({2}, {{{4, 6}}, {{4, 3}, "int64"}, {{4, 3}}}, "aten.scatter_reduce.two",
                         R"([$0,1,$1,$2,"amax"])", {{{4, 6}}});
  auto amax = op_strategies(m);
  EXPECT_TRUE(has(amax, "S(0),S(0),S(0)->S(0)"));
  EXPECT_FALSE(has(amax, "P(sum),R,P(sum)->P(sum)"));
}
