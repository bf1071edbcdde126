// Strategy engine: matmul rows, mesh combination, pruning, placeholders,
// fixed nodes, fallback, op work and per-rank call arguments.
#include <gtest/gtest.h>

#include <set>

#include "core/cost_model.h"
#include "core/strategy.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::test;

namespace {

Graph mm_graph(std::vector<int64_t> mesh, int64_t m = 8, int64_t k = 6, int64_t n = 4) {
  return one_op_graph(mesh, {{{m, k}}, {{k, n}}}, "aten.mm.default", "[$0,$1]", {{{m, n}}});
}

}  // namespace

TEST(StrategyMatmul, MmOn1DMeshHasExactlyTheseStrategies) {
  Graph g = mm_graph({2});
  auto ns = enumerate_strategies(g, 2);
  EXPECT_EQ(ns.family, "matmul");
  EXPECT_FALSE(ns.fell_back);
  const std::vector<std::string> expected = {
      "R,R->R",          "S(0),R->S(0)",    "R,S(1)->S(1)",    "S(1),S(0)->P(sum)",
      "P(sum),R->P(sum)", "R,P(sum)->P(sum)", "P(avg),R->P(avg)", "R,P(avg)->P(avg)"};
  EXPECT_EQ(render_all(ns), expected);
}

TEST(StrategyMatmul, MmOn2x2IsTheFullProduct) {
  Graph g = mm_graph({2, 2});
  auto ns = enumerate_strategies(g, 2);
  // 8 rows per mesh dim, all shapes large enough; only partial-kind mixes
  // (sum with avg commute, so none are dropped) -> 64.
  EXPECT_EQ(ns.strategies.size(), 64u);
  const auto all = render_all(ns);
  std::set<std::string> seen(all.begin(), all.end());
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_TRUE(seen.count("S(0)S(1),RS(0)->S(0)P(sum)"));
  EXPECT_TRUE(seen.count("S(0)S(0),RR->S(0)S(0)"));  // nested sharding of one dim
}

TEST(StrategyMatmul, SmallDimsArePrunedWhenTooFewElements) {
  // M = 3 on a 2x2 mesh: sharding M on both mesh dims needs 4 rows.
  Graph g = mm_graph({2, 2}, 3, 6, 4);
  auto all = render_all(enumerate_strategies(g, 2));
  for (const auto& s : all) EXPECT_EQ(s.find("S(0)S(0),RR"), std::string::npos) << s;
  // Mesh dims of size 1 only replicate (every placement is equivalent there).
  Graph g1 = mm_graph({2, 1});
  for (const auto& s : enumerate_strategies(g1, 2).strategies)
    for (const auto& sp : s.inputs) EXPECT_TRUE(sp[1].is_replicate());
}

TEST(StrategyMatmul, OpWorkIsLocalTwoMNK) {
  Graph g = mm_graph({2}, 5, 6, 4);
  auto w = op_work(g, 2, strategy({"R", "R"}, {"R"}));
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 5 * 6 * 4);
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * (5 * 6 + 6 * 4 + 5 * 4));
  auto ws = op_work(g, 2, strategy({"S(0)", "R"}, {"S(0)"}));
  EXPECT_DOUBLE_EQ(ws.flops, 2.0 * 3 * 6 * 4);  // largest shard of 5 rows holds 3
  auto wk = op_work(g, 2, strategy({"S(1)", "S(0)"}, {"P(sum)"}));
  EXPECT_DOUBLE_EQ(wk.flops, 2.0 * 5 * 3 * 4);
  // The smallest local dim of M = 5, K = 6, N = 4 (cost_model.h: matmul_half_dim).
  EXPECT_DOUBLE_EQ(w.min_dim, 4);
  EXPECT_DOUBLE_EQ(ws.min_dim, 3);  // M's largest shard
  EXPECT_DOUBLE_EQ(wk.min_dim, 3);  // K's
  auto wn = op_work(g, 2, strategy({"R", "S(1)"}, {"S(1)"}));
  EXPECT_DOUBLE_EQ(wn.min_dim, 2);  // N's
}

TEST(StrategyEngine, PlaceholdersGetEveryRSSpec) {
  Graph g = mm_graph({2, 2}, 3, 6, 4);
  auto ns = enumerate_strategies(g, 0);  // (3, 6): S(0)S(0) needs 4 rows -> pruned
  EXPECT_EQ(ns.family, "placeholder");
  EXPECT_EQ(ns.strategies.size(), 8u);
  for (const auto& s : ns.strategies) {
    EXPECT_TRUE(s.inputs.empty());
    for (const auto& p : s.outputs[0]) EXPECT_FALSE(p.is_partial());
    EXPECT_NE(to_string(s.outputs[0]), "S(0)S(0)");
  }
}

TEST(StrategyEngine, FixedNodesGetExactlyTheirPlacements) {
  std::string doc = R"J({"mesh":{"shape":[2]},"nodes":[
    {"name":"a","op":"placeholder","outputs":[{"shape":[4,4],"dtype":"float32"}]},
    {"name":"r","op":"aten.relu.default","args":[{"t":[0,0]}],
     "outputs":[{"shape":[4,4],"dtype":"float32"}],
     "fixed":{"inputs":["S(1)"],"outputs":["S(1)"],"region":"blk"}},
    {"name":"output","op":"output","args":[[{"t":[1,0]}]]}]})J";
  Graph g = read_graph(doc);
  auto ns = enumerate_strategies(g, 1);
  EXPECT_EQ(ns.family, "local_map");
  EXPECT_EQ(render_all(ns), std::vector<std::string>{"S(1)->S(1)"});
}

TEST(StrategyEngine, UnknownOpFallsBackOrRaises) {
  Graph g = one_op_graph({2}, {{{4, 4}}}, "aten.some_new_op.default", "[$0]", {{{4, 4}}});
  auto ns = enumerate_strategies(g, 1);
  EXPECT_TRUE(ns.fell_back);
  EXPECT_EQ(render_all(ns), std::vector<std::string>{"R->R"});
  StrategyOptions strict;
  strict.fallback_replicate = false;
  try {
    enumerate_strategies(g, 1, strict);
    FAIL() << "expected NoStrategyError";
  } catch (const NoStrategyError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("aten.some_new_op.default"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'op'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("local_map"), std::string::npos) << msg;
  }
  EXPECT_THROW(enumerate_strategies(g, 2), InvalidArgument);  // the output node
  EXPECT_THROW(enumerate_strategies(g, 7), InvalidArgument);
}

TEST(StrategyEngine, PartialKindsThatDoNotCommuteAreNeverMixed) {
  Graph g = one_op_graph({2, 2}, {{{4, 4}}}, "aten.clone.default", "[$0]", {{{4, 4}}});
  for (const auto& s : enumerate_strategies(g, 1).strategies) {
    const std::string r = render(s);
    const bool maxmin = r.find("max") != std::string::npos || r.find("min") != std::string::npos;
    const bool linear = r.find("sum") != std::string::npos || r.find("avg") != std::string::npos;
    EXPECT_FALSE(maxmin && linear) << r;
    EXPECT_FALSE(r.find("P(max)P(min)") != std::string::npos) << r;
  }
}

TEST(StrategyEngine, BadStrategiesAndCoordsRaise) {
  Graph g = mm_graph({2});
  EXPECT_THROW(op_work(g, 2, strategy({"R"}, {"R"})), InvalidArgument);
  EXPECT_THROW(op_work(g, 2, strategy({"S(2)", "R"}, {"R"})), InvalidArgument);
  EXPECT_THROW(local_call_args(g, 2, strategy({"R", "R"}, {"R"}), {0, 0}), InvalidArgument);
  EXPECT_THROW(local_call_args(g, 2, strategy({"R", "R"}, {"R"}), {2}), InvalidArgument);
}

TEST(StrategyEngine, AliasesCostADispatchCopiesStream) {
  // detach / alias return a view of their input: no bytes, one dispatch (a kernel's
  // overhead, whatever the shard); clone streams its bytes.
  const CostModel cm = make_cost_model("H100");
  for (const char* op : {"aten.detach.default", "aten.alias.default"}) {
    Graph g = one_op_graph({2}, {{{8, 6}}}, op, "[$0]", {{{8, 6}}});
    const auto w = op_work(g, 1, strategy({"S(0)"}, {"S(0)"}));
    EXPECT_EQ(w.bytes, 0) << op;
    EXPECT_NEAR(cm.compute_seconds(w, DType::Float32), cm.device.kernel_overhead_s, 1e-12) << op;
  }
  Graph g = one_op_graph({2}, {{{8, 6}}}, "aten.clone.default", "[$0]", {{{8, 6}}});
  EXPECT_GT(op_work(g, 1, strategy({"S(0)"}, {"S(0)"})).bytes, 0);
}
