// Per-family rules: exact strategy lists and the shape-dependent pruning
// (uneven means, empty shards, causal attention, loss reductions, groups).
#include <gtest/gtest.h>

#include "core/strategy.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::test;

TEST(StrategyPointwise, BroadcastAddHasExactlyTheseStrategies) {
  Graph g = one_op_graph({2}, {{{4, 6}}, {{6}}}, "aten.add.Tensor", "[$0,$1]", {{{4, 6}}});
  const std::vector<std::string> expected = {"R,R->R",          "S(0),R->S(0)",          "S(1),S(0)->S(1)",
                                             "P(sum),P(sum)->P(sum)", "P(avg),P(avg)->P(avg)", "P(max),R->P(max)",
                                             "P(min),R->P(min)",      "R,P(max)->P(max)",      "R,P(min)->P(min)"};
  EXPECT_EQ(op_strategies(g), expected);
}

TEST(StrategyPointwise, AddingAPythonScalarKeepsOnlyAveragePartials) {
  Graph g = one_op_graph({2}, {{{4, 6}}}, "aten.add.Tensor", "[$0,1e-05]", {{{4, 6}}});
  auto all = op_strategies(g);
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));  // x_i + c summed over ranks adds c twice
  EXPECT_TRUE(has(all, "P(avg)->P(avg)"));
  Graph m = one_op_graph({2}, {{{4, 6}}}, "aten.mul.Tensor", "[$0,2.0]", {{{4, 6}}});
  EXPECT_TRUE(has(op_strategies(m), "P(sum)->P(sum)"));
}

TEST(StrategyPointwise, NarrowingCastsKeepOnlyMaxMinPartials) {
  Graph g = one_op_graph({2}, {{{4}, "float32"}}, "aten._to_copy.default", "[$0]", {{{4}, "bfloat16"}},
                         R"({"dtype":{"dtype":"bfloat16"}})");
  auto all = op_strategies(g);
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));
  EXPECT_TRUE(has(all, "P(max)->P(max)"));
  Graph w = one_op_graph({2}, {{{4}, "bfloat16"}}, "aten._to_copy.default", "[$0]", {{{4}, "float32"}},
                         R"({"dtype":{"dtype":"float32"}})");
  EXPECT_TRUE(has(op_strategies(w), "P(sum)->P(sum)"));
}

TEST(StrategyPointwise, MonotoneOpsPassMaxMinPartials) {
  Graph relu = one_op_graph({2}, {{{4, 6}}}, "aten.relu.default", "[$0]", {{{4, 6}}});
  auto all = op_strategies(relu);
  EXPECT_TRUE(has(all, "P(max)->P(max)"));
  EXPECT_TRUE(has(all, "P(min)->P(min)"));
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));  // relu is not linear
  // non-increasing ops swap the kinds
  Graph neg = one_op_graph({2}, {{{4, 6}}}, "aten.neg.default", "[$0]", {{{4, 6}}});
  all = op_strategies(neg);
  EXPECT_TRUE(has(all, "P(max)->P(min)"));
  EXPECT_TRUE(has(all, "P(min)->P(max)"));
  EXPECT_FALSE(has(all, "P(max)->P(max)"));
  EXPECT_TRUE(has(all, "P(sum)->P(sum)"));
  Graph scale = one_op_graph({2}, {{{4, 6}}}, "aten.mul.Scalar", "[$0,-2.0]", {{{4, 6}}});
  EXPECT_TRUE(has(op_strategies(scale), "P(max)->P(min)"));
  Graph zero = one_op_graph({2}, {{{4, 6}}}, "aten.mul.Scalar", "[$0,0.0]", {{{4, 6}}});
  EXPECT_FALSE(has(op_strategies(zero), "P(max)->P(min)"));
  EXPECT_FALSE(has(op_strategies(zero), "P(max)->P(max)"));
  // the other ranks' pieces of a P(max) value are lower and may leave log's domain
  Graph log = one_op_graph({2}, {{{4, 6}}}, "aten.log.default", "[$0]", {{{4, 6}}});
  EXPECT_FALSE(has(op_strategies(log), "P(max)->P(max)"));
  Graph gelu = one_op_graph({2}, {{{4, 6}}}, "aten.gelu.default", "[$0]", {{{4, 6}}});
  EXPECT_FALSE(has(op_strategies(gelu), "P(max)->P(max)"));  // gelu dips below zero: not monotone
  Graph leaky = one_op_graph({2}, {{{4, 6}}}, "aten.leaky_relu.default", "[$0,-0.5]", {{{4, 6}}});
  EXPECT_FALSE(has(op_strategies(leaky), "P(max)->P(max)"));  // a negative slope is not monotone
}

TEST(StrategyPointwise, AddingAReplicatedOperandKeepsMaxMinPartials) {
  Graph add = one_op_graph({2}, {{{4, 6}}, {{6}}}, "aten.add.Tensor", "[$0,$1]", {{{4, 6}}});
  auto all = op_strategies(add);
  EXPECT_TRUE(has(all, "P(max),R->P(max)"));
  EXPECT_TRUE(has(all, "R,P(min)->P(min)"));
  EXPECT_FALSE(has(all, "P(max),P(max)->P(max)"));  // max(a_i + b_i) is not max(a) + max(b)
  Graph sub = one_op_graph({2}, {{{4, 6}}, {{6}}}, "aten.sub.Tensor", "[$0,$1]", {{{4, 6}}});
  all = op_strategies(sub);
  EXPECT_TRUE(has(all, "P(max),R->P(max)"));
  EXPECT_TRUE(has(all, "R,P(max)->P(min)"));
  EXPECT_FALSE(has(all, "R,P(max)->P(max)"));
  Graph neg_alpha = one_op_graph({2}, {{{4, 6}}, {{6}}}, "aten.add.Tensor", "[$0,$1]", {{{4, 6}}},
                                 R"({"alpha":-1.5})");
  EXPECT_TRUE(has(op_strategies(neg_alpha), "R,P(max)->P(min)"));
  Graph scalar = one_op_graph({2}, {{{4, 6}}}, "aten.add.Tensor", "[$0,1e-05]", {{{4, 6}}});
  EXPECT_TRUE(has(op_strategies(scalar), "P(max)->P(max)"));
  Graph rsub = one_op_graph({2}, {{{4, 6}}}, "aten.rsub.Scalar", "[$0,1.0]", {{{4, 6}}});
  EXPECT_TRUE(has(op_strategies(rsub), "P(max)->P(min)"));
}

TEST(StrategyPointwise, FloatIntegerCastsKeepOnlyMaxMinPartials) {
  Graph to_int = one_op_graph({2}, {{{4}, "float64"}}, "aten._to_copy.default", "[$0]", {{{4}, "int64"}},
                              R"({"dtype":{"dtype":"int64"}})");
  auto all = op_strategies(to_int);
  EXPECT_TRUE(has(all, "P(max)->P(max)"));  // truncation is monotone
  EXPECT_TRUE(has(all, "P(min)->P(min)"));
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));
  Graph to_bool = one_op_graph({2}, {{{4}, "float64"}}, "aten._to_copy.default", "[$0]", {{{4}, "bool"}},
                               R"({"dtype":{"dtype":"bool"}})");
  EXPECT_FALSE(has(op_strategies(to_bool), "P(max)->P(max)"));  // x != 0 is not monotone
  Graph narrow = one_op_graph({2}, {{{4}, "int64"}}, "aten._to_copy.default", "[$0]", {{{4}, "int8"}},
                              R"({"dtype":{"dtype":"int8"}})");
  EXPECT_FALSE(has(op_strategies(narrow), "P(max)->P(max)"));  // wraps around
}

TEST(StrategyReduction, MeanOverAnUnevenShardIsRejectedSumIsNot) {
  Graph mean = one_op_graph({4}, {{{4, 6}}}, "aten.mean.dim", "[$0,[1],false]", {{{4}}});
  auto all = op_strategies(mean);
  EXPECT_TRUE(has(all, "S(0)->S(0)"));
  EXPECT_FALSE(has(all, "S(1)->P(avg)"));  // 6 over 4 ranks: 2,2,2,0
  Graph even = one_op_graph({2}, {{{4, 6}}}, "aten.mean.dim", "[$0,[1],false]", {{{4}}});
  EXPECT_TRUE(has(op_strategies(even), "S(1)->P(avg)"));
  Graph sum = one_op_graph({4}, {{{4, 6}}}, "aten.sum.dim_IntList", "[$0,[1],true]", {{{4, 1}}});
  EXPECT_TRUE(has(op_strategies(sum), "S(1)->P(sum)"));
}

TEST(StrategyReduction, AmaxNeedsEveryShardNonEmpty) {
  Graph uneven = one_op_graph({4}, {{{4, 5}}}, "aten.amax.default", "[$0,[1]]", {{{4}}});
  EXPECT_FALSE(has(op_strategies(uneven), "S(1)->P(max)"));  // 5 over 4: 2,2,1,0
  Graph ok = one_op_graph({2}, {{{4, 5}}}, "aten.amax.default", "[$0,[1]]", {{{4}}});
  auto all = op_strategies(ok);
  EXPECT_TRUE(has(all, "S(1)->P(max)"));
  EXPECT_TRUE(has(all, "P(max)->P(max)"));
  EXPECT_FALSE(has(all, "P(sum)->P(sum)"));
}

TEST(StrategySoftmax, NormalizedDimIsNeverSharded) {
  Graph g = one_op_graph({2}, {{{4, 6}}}, "aten._softmax.default", "[$0,-1,false]", {{{4, 6}}});
  EXPECT_EQ(op_strategies(g), (std::vector<std::string>{"R->R", "S(0)->S(0)"}));
}

TEST(StrategyAttention, QuerySequenceShardingOnlyWithoutCausalMask) {
  const std::vector<Input> qkv = {{{2, 4, 8, 16}}, {{2, 4, 8, 16}}, {{2, 4, 8, 16}}};
  const std::vector<Input> outs = {{{2, 4, 8, 16}}, {{2, 4, 8}}};
  const char* op = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  auto causal = op_strategies(one_op_graph({2}, qkv, op, "[$0,$1,$2,0.0,true]", outs));
  EXPECT_EQ(causal, (std::vector<std::string>{"R,R,R->R,R", "S(0),S(0),S(0)->S(0),S(0)", "S(1),S(1),S(1)->S(1),S(1)"}));
  auto full = op_strategies(one_op_graph({2}, qkv, op, "[$0,$1,$2,0.0,false]", outs));
  EXPECT_TRUE(has(full, "S(2),R,R->S(2),S(2)"));
  // Dropout: every rank would draw its own mask, so nothing is sharded.
  auto dropout = op_strategies(one_op_graph({2}, qkv, op, "[$0,$1,$2,0.1,false]", outs));
  EXPECT_EQ(dropout, std::vector<std::string>{"R,R,R->R,R"});
  // 3 heads over a 2x2 mesh would leave a rank with no head: pruned.
  const std::vector<Input> q3 = {{{1, 3, 8, 16}}, {{1, 3, 8, 16}}, {{1, 3, 8, 16}}};
  auto small = op_strategies(one_op_graph({2, 2}, q3, op, "[$0,$1,$2,0.0,true]", {{{1, 3, 8, 16}}, {{1, 3, 8}}}));
  for (const auto& s : small) EXPECT_EQ(s.find("S(1)S(1)"), std::string::npos) << s;
  // 4 heads over 3 ranks split 2,2,0: the CPU kernel faults on zero heads.
  auto empty = op_strategies(one_op_graph({3}, qkv, op, "[$0,$1,$2,0.0,true]", outs));
  EXPECT_FALSE(has(empty, "S(1),S(1),S(1)->S(1),S(1)"));
  EXPECT_FALSE(has(empty, "S(0),S(0),S(0)->S(0),S(0)"));  // batch 2 < 3 ranks
}

TEST(StrategyAttention, WorkNamesTheHeadWidthAndTheKeysACausalQuerySees) {
  // (B, H, L, E) = (2, 4, 8, 16): forward 2 x B H L S (E + Ev) flops, causal the half of them.
  const std::vector<Input> qkv = {{{2, 4, 8, 16}}, {{2, 4, 8, 16}}, {{2, 4, 8, 16}}};
  const std::vector<Input> outs = {{{2, 4, 8, 16}}, {{2, 4, 8}}};
  const char* op = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  const Graph causal = one_op_graph({2}, qkv, op, "[$0,$1,$2,0.0,true]", outs);
  const NodeStrategies ns = enumerate_strategies(causal, 3);
  const OpStrategy* heads = nullptr;
  for (const auto& st : ns.strategies)
    if (render(st) == "S(1),S(1),S(1)->S(1),S(1)") heads = &st;
  ASSERT_NE(heads, nullptr);
  const OpWork w = op_work(causal, 3, *heads);
  EXPECT_DOUBLE_EQ(w.flops, 0.5 * 2 * 2 * 2 * 8 * 8 * 32);  // 2 of 4 heads a rank
  EXPECT_DOUBLE_EQ(w.head_dim, 16);
  EXPECT_DOUBLE_EQ(w.causal_keys, 8);
  const Graph full = one_op_graph({2}, qkv, op, "[$0,$1,$2,0.0,false]", outs);
  const OpWork wf = op_work(full, 3, enumerate_strategies(full, 3).strategies.at(0));
  EXPECT_DOUBLE_EQ(wf.flops, 2.0 * 2 * 4 * 8 * 8 * 32);
  EXPECT_DOUBLE_EQ(wf.head_dim, 16);
  EXPECT_DOUBLE_EQ(wf.causal_keys, 0);  // not causal: every score computed
}

TEST(StrategyLoss, MeanReductionForwardIsNotBatchSharded) {
  const std::vector<Input> in = {{{8, 5}}, {{8}, "int64"}};
  const std::vector<Input> outs = {{{}}, {{}}};
  auto mean = op_strategies(one_op_graph({2}, in, "aten.nll_loss_forward.default", "[$0,$1,null,1,-100]", outs));
  EXPECT_EQ(mean, (std::vector<std::string>{"R,R->R,R", "P(sum),R->P(sum),R", "P(avg),R->P(avg),R"}));
  auto sum = op_strategies(one_op_graph({2}, in, "aten.nll_loss_forward.default", "[$0,$1,null,2,-100]", outs));
  EXPECT_TRUE(has(sum, "S(0),S(0)->P(sum),P(sum)"));
}

TEST(StrategyConv, ChannelSplitsOnlyWithoutGroups) {
  const std::vector<Input> in = {{{4, 8, 6, 6}}, {{8, 4, 3, 3}}};
  auto grouped = op_strategies(one_op_graph({2}, in, "aten.convolution.default",
                                            "[$0,$1,null,[1,1],[1,1],[1,1],false,[0,0],2]", {{{4, 8, 6, 6}}}));
  EXPECT_TRUE(has(grouped, "S(0),R->S(0)"));
  EXPECT_FALSE(has(grouped, "R,S(0)->S(1)"));
  const std::vector<Input> in1 = {{{4, 8, 6, 6}}, {{6, 8, 3, 3}}};
  auto plain = op_strategies(one_op_graph({2}, in1, "aten.convolution.default",
                                          "[$0,$1,null,[1,1],[1,1],[1,1],false,[0,0],1]", {{{4, 6, 6, 6}}}));
  EXPECT_TRUE(has(plain, "R,S(0)->S(1)"));
  EXPECT_TRUE(has(plain, "S(1),S(1)->P(sum)"));
}

// native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out, mean (N, group), rstd).
Graph group_norm_graph(int64_t channels, int64_t groups) {
  const std::string c = std::to_string(channels), g = std::to_string(groups);
  return one_op_graph({2}, {{{5, channels, 3}}, {{channels}}, {{channels}}}, "aten.native_group_norm.default",
                      "[$0,$1,$2,5," + c + ",3," + g + ",0.5]", {{{5, channels, 3}}, {{5, groups}}, {{5, groups}}});
}

TEST(StrategyNorm, GroupNormShardsChannelsOnlyAsWholeGroups) {
  auto whole = op_strategies(group_norm_graph(8, 4));  // 2 groups a shard
  EXPECT_TRUE(has(whole, "S(0),R,R->S(0),S(0),S(0)"));
  EXPECT_TRUE(has(whole, "S(1),S(0),S(0)->S(1),S(1),S(1)"));
  auto split = op_strategies(group_norm_graph(6, 3));  // 1.5 groups a shard
  EXPECT_TRUE(has(split, "S(0),R,R->S(0),S(0),S(0)"));
  EXPECT_FALSE(has(split, "S(1),S(0),S(0)->S(1),S(1),S(1)"));
  // N, C and the group count are each rank's own: rank 1 of an odd batch holds 2 samples.
  const Graph g = group_norm_graph(8, 4);
  const auto batch = local_call_args(g, 3, strategy({"S(0)", "R", "R"}, {"S(0)", "S(0)", "S(0)"}), {1});
  EXPECT_EQ(batch.at("args").dump(), "[{\"t\":[0,0]},{\"t\":[1,0]},{\"t\":[2,0]},2,8,3,4,0.5]");
  const auto channels = local_call_args(g, 3, strategy({"S(1)", "S(0)", "S(0)"}, {"S(1)", "S(1)", "S(1)"}), {0});
  EXPECT_EQ(channels.at("args").dump(), "[{\"t\":[0,0]},{\"t\":[1,0]},{\"t\":[2,0]},5,4,3,2,0.5]");
}

TEST(StrategyGraph, UnreachablePartialInputsArePrunedInTheGraphPass) {
  // a, b placeholders -> mm1 (can emit P(sum) via its K split) -> mm2(mm1, c)
  std::string doc = R"J({"mesh":{"shape":[2]},"nodes":[
    {"name":"a","op":"placeholder","outputs":[{"shape":[4,6],"dtype":"float32"}]},
    {"name":"b","op":"placeholder","outputs":[{"shape":[6,8],"dtype":"float32"}]},
    {"name":"c","op":"placeholder","outputs":[{"shape":[8,2],"dtype":"float32"}]},
    {"name":"mm1","op":"aten.mm.default","args":[{"t":[0,0]},{"t":[1,0]}],"outputs":[{"shape":[4,8],"dtype":"float32"}]},
    {"name":"mm2","op":"aten.mm.default","args":[{"t":[3,0]},{"t":[2,0]}],"outputs":[{"shape":[4,2],"dtype":"float32"}]},
    {"name":"output","op":"output","args":[[{"t":[4,0]}]]}]})J";
  Graph g = read_graph(doc);
  auto all = enumerate_graph_strategies(g);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[5].family, "output");
  auto mm1 = render_all(all[3]);
  EXPECT_EQ(mm1, (std::vector<std::string>{"R,R->R", "S(0),R->S(0)", "R,S(1)->S(1)", "S(1),S(0)->P(sum)"}));
  auto mm2 = render_all(all[4]);
  EXPECT_TRUE(has(mm2, "P(sum),R->P(sum)"));   // mm1 can be P(sum)
  EXPECT_FALSE(has(mm2, "P(avg),R->P(avg)"));  // nothing upstream is P(avg)
  EXPECT_FALSE(has(mm2, "R,P(sum)->P(sum)"));  // c is a placeholder
  // The per-node call keeps every rule row.
  EXPECT_EQ(enumerate_strategies(g, 4).strategies.size(), 8u);
}

TEST(StrategyGraph, ABiasFromAPlaceholderKeepsTheRowParallelProduct) {
  // nn.Linear with a bias as torch's RowwiseParallel runs it: addmm(bias, h, w) with h's and
  // w's contracted dim sharded makes a Partial sum, so the bias must be Partial too. The bias
  // is a parameter, which is never Partial: the row is kept (the bias is divided by the mesh
  // size on the way), because no row replaces it. A Partial only the bias would bring
  // (addmm(P, P, R) with h replicated) is still dropped, as is adding a replicated value to a
  // Partial sum its producer makes (add(P, P)): the sum is reduced first instead.
  std::string doc = R"J({"mesh":{"shape":[2]},"nodes":[
    {"name":"bias","op":"placeholder","role":"param","outputs":[{"shape":[8],"dtype":"float32"}]},
    {"name":"h","op":"placeholder","outputs":[{"shape":[4,6],"dtype":"float32"}]},
    {"name":"w","op":"placeholder","role":"param","outputs":[{"shape":[6,8],"dtype":"float32"}]},
    {"name":"y","op":"aten.addmm.default","args":[{"t":[0,0]},{"t":[1,0]},{"t":[2,0]}],"outputs":[{"shape":[4,8],"dtype":"float32"}]},
    {"name":"z","op":"aten.add.Tensor","args":[{"t":[3,0]},{"t":[0,0]}],"outputs":[{"shape":[4,8],"dtype":"float32"}]},
    {"name":"output","op":"output","args":[[{"t":[4,0]}]]}]})J";
  Graph g = read_graph(doc);
  auto all = enumerate_graph_strategies(g);
  auto y = render_all(all[3]);
  EXPECT_TRUE(has(y, "P(sum),S(1),S(0)->P(sum)"));
  EXPECT_FALSE(has(y, "P(sum),P(sum),R->P(sum)"));
  EXPECT_FALSE(has(y, "P(sum),R,P(sum)->P(sum)"));
  auto z = render_all(all[4]);
  EXPECT_FALSE(has(z, "P(sum),P(sum)->P(sum)"));
  EXPECT_TRUE(has(z, "R,R->R"));
}

TEST(StrategyCallArgs, SliceBackwardAndArangeUseLocalExtents) {
  Graph sb = one_op_graph({2}, {{{5, 2}}}, "aten.slice_backward.default", "[$0,[5,4],1,0,2,1]", {{{5, 4}}});
  auto a1 = local_call_args(sb, 1, strategy({"S(0)"}, {"S(0)"}), {1});
  EXPECT_EQ(a1.at("args").as_array()[1].dump(), "[2,4]");
  std::string doc = R"J({"mesh":{"shape":[2]},"nodes":[
    {"name":"r","op":"aten.arange.start_step","args":[3,13,2],"outputs":[{"shape":[5],"dtype":"int64"}]},
    {"name":"output","op":"output","args":[[{"t":[0,0]}]]}]})J";
  Graph ar = read_graph(doc);
  EXPECT_EQ(render_all(enumerate_strategies(ar, 0)), (std::vector<std::string>{"->R", "->S(0)"}));
  // values 3,5,7,9,11: rank 0 holds 3 of them (3,5,7), rank 1 holds 9,11.
  EXPECT_EQ(local_call_args(ar, 0, strategy({}, {"S(0)"}), {0}).at("args").dump(), "[3,9,2]");
  EXPECT_EQ(local_call_args(ar, 0, strategy({}, {"S(0)"}), {1}).at("args").dump(), "[9,13,2]");
}
