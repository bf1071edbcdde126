// Redistribution plans: worked examples of DTensor's greedy planner
// (torch 2.13 _redistribute.py). pytest runs the plans on gloo ranks against
// DTensor's own redistribute.
#include <gtest/gtest.h>

#include "core/redistribute.h"

using namespace tlm;
using Shape = std::vector<int64_t>;

namespace {
RedistributePlan plan(const Shape& g, const Shape& mesh, const std::string& a, const std::string& b) {
  return plan_redistribute(g, make_mesh(mesh), parse_spec(a), parse_spec(b));
}
// "kind@mesh_dim[src->dst]" for compact expectations.
std::string brief(const CollectiveStep& s) {
  std::string out = std::string(to_string(s.kind)) + "@" + std::to_string(s.mesh_dim);
  if (s.src_dim >= 0 || s.dst_dim >= 0) out += "[" + std::to_string(s.src_dim) + "->" + std::to_string(s.dst_dim) + "]";
  return out;
}
std::vector<std::string> briefs(const RedistributePlan& p) {
  std::vector<std::string> out;
  for (const auto& s : p.steps) out.push_back(brief(s));
  return out;
}
using Strs = std::vector<std::string>;
}  // namespace

TEST(Redistribute, OneDimTransitions) {
  auto p = plan({6, 4}, {4}, "S(0)", "R");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].kind, CollectiveKind::AllGather);
  EXPECT_EQ(p.steps[0].src_dim, 0);
  EXPECT_EQ(p.steps[0].dst_dim, -1);
  EXPECT_EQ(p.steps[0].shape, (Shape{6, 4}));
  EXPECT_EQ(to_string(p.steps[0].before), "S(0)");
  EXPECT_EQ(to_string(p.steps[0].after), "R");

  p = plan({6, 4}, {4}, "P(max)", "S(1)");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(p.steps[0].reduce, ReduceOp::Max);
  EXPECT_EQ(p.steps[0].dst_dim, 1);

  EXPECT_EQ(briefs(plan({6, 4}, {4}, "P(avg)", "R")), (Strs{"all_reduce@0"}));
  EXPECT_EQ(plan({6, 4}, {4}, "P(avg)", "R").steps[0].reduce, ReduceOp::Avg);
  EXPECT_EQ(briefs(plan({6, 4}, {4}, "R", "S(1)")), (Strs{"local_chunk@0[-1->1]"}));
  EXPECT_EQ(briefs(plan({6, 4}, {4}, "S(0)", "S(1)")), (Strs{"all_to_all@0[0->1]"}));
  auto part = plan({6, 4}, {4}, "R", "P(min)");
  EXPECT_EQ(briefs(part), (Strs{"local_partition@0"}));
  EXPECT_EQ(part.steps[0].reduce, ReduceOp::Min);
  EXPECT_TRUE(plan({6, 4}, {4}, "S(1)", "S(-1)").steps.empty());  // same after normalization
}

TEST(Redistribute, NestedShardingIsUndoneInnerFirst) {
  // (S(0), S(0)) -> (R, S(0)): mesh dim 1 shards a piece of a piece, the target
  // shards the whole dim, so gather inner, gather outer, then chunk again.
  auto p = plan({8, 4}, {2, 2}, "S(0)S(0)", "RS(0)");
  EXPECT_EQ(briefs(p), (Strs{"all_gather@1[0->-1]", "all_gather@0[0->-1]", "local_chunk@1[-1->0]"}));
  EXPECT_EQ(to_string(p.steps[0].before), "S(0)S(0)");
  EXPECT_EQ(to_string(p.steps[0].after), "S(0)R");
  EXPECT_EQ(to_string(p.steps[1].after), "RR");
  EXPECT_EQ(to_string(p.steps[2].after), "RS(0)");
}

TEST(Redistribute, SwappedShardDims) {
  // (S(0), S(1)) -> (S(1), S(0)): mesh dim 1's target S(0) is misaligned (dim 0
  // is sharded by mesh dim 0 now, not in the target) -> gather it first.
  EXPECT_EQ(briefs(plan({8, 8}, {2, 2}, "S(0)S(1)", "S(1)S(0)")),
            (Strs{"all_gather@1[1->-1]", "all_to_all@0[0->1]", "local_chunk@1[-1->0]"}));
  // Aligned nested all-to-all: (S(1), S(0)) -> (S(1), S(1)) on the piece of mesh dim 0.
  EXPECT_EQ(briefs(plan({8, 8}, {2, 2}, "S(1)S(0)", "S(1)S(1)")), (Strs{"all_to_all@1[0->1]"}));
}

TEST(Redistribute, PartialSourcesReduce) {
  // No sharding in the source: only the outer-to-inner walk.
  EXPECT_EQ(briefs(plan({8}, {2, 2}, "P(sum)P(sum)", "S(0)S(0)")),
            (Strs{"reduce_scatter@0[-1->0]", "reduce_scatter@1[-1->0]"}));
  EXPECT_EQ(briefs(plan({8}, {2, 2}, "RP(sum)", "S(0)S(0)")),
            (Strs{"local_chunk@0[-1->0]", "reduce_scatter@1[-1->0]"}));
  // (P, S(0)) -> (S(0), S(0)): mesh dim 1 misaligned -> gather, reduce-scatter outer, chunk inner.
  EXPECT_EQ(briefs(plan({8}, {2, 2}, "P(sum)S(0)", "S(0)S(0)")),
            (Strs{"all_gather@1[0->-1]", "reduce_scatter@0[-1->0]", "local_chunk@1[-1->0]"}));
  // sum and avg may be mixed; no sharding in the source -> outer to inner.
  EXPECT_EQ(briefs(plan({8}, {2, 2}, "P(sum)P(avg)", "RR")), (Strs{"all_reduce@0", "all_reduce@1"}));
}

TEST(Redistribute, RefusedTransitionsNameBothSpecs) {
  auto expect_refused = [](const Shape& mesh, const std::string& a, const std::string& b, const std::string& why) {
    try {
      plan({8, 8}, mesh, a, b);
      FAIL() << a << " -> " << b << " should be refused";
    } catch (const InvalidArgument& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(to_string(parse_spec(a)) + " -> " + to_string(parse_spec(b))), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg;
    }
    EXPECT_FALSE(can_redistribute(parse_spec(a), parse_spec(b)));
  };
  expect_refused({2}, "S(0)", "P(sum)", "Shard -> Partial");
  expect_refused({2}, "P(max)", "P(sum)", "between Partial kinds");
  expect_refused({2}, "P(sum)", "P(avg)", "between Partial kinds");
  expect_refused({2, 2}, "P(sum)P(max)", "RR", "mixes Partial reduce kinds");
  expect_refused({2, 2}, "RR", "P(min)P(sum)", "mixes Partial reduce kinds");
  expect_refused({2, 2}, "S(0)R", "P(sum)R", "Shard -> Partial");
  EXPECT_TRUE(can_redistribute(parse_spec("P(sum)S(0)"), parse_spec("S(0)S(0)")));
  EXPECT_TRUE(can_redistribute(parse_spec("R"), parse_spec("P(avg)")));
  EXPECT_FALSE(can_redistribute(parse_spec("R"), parse_spec("RR")));
  // Bad specs are InvalidArgument too.
  EXPECT_THROW(plan({8}, {2}, "S(1)", "R"), InvalidArgument);
  EXPECT_THROW(plan({8}, {2, 2}, "S(0)", "RR"), InvalidArgument);
}

TEST(Redistribute, SizeOneMeshDimsAreShortCut) {
  // DTensor still plans the nested gather/chunk through the size-1 dim but does
  // nothing on it: only the steps on mesh dim 1 remain.
  auto p = plan({8}, {1, 2}, "S(0)S(0)", "RS(0)");
  EXPECT_EQ(briefs(p), (Strs{"all_gather@1[0->-1]", "local_chunk@1[-1->0]"}));
  EXPECT_EQ(to_string(p.steps[1].before), "RR");  // mesh dim 0 changed silently in between
  // Shard -> Partial on a size-1 dim is a no-op in DTensor, not an error.
  EXPECT_TRUE(plan({8}, {1, 2}, "S(0)R", "P(sum)R").steps.empty());
  EXPECT_TRUE(can_redistribute(make_mesh({1, 2}), parse_spec("S(0)R"), parse_spec("P(sum)R")));
  EXPECT_FALSE(can_redistribute(make_mesh({2, 2}), parse_spec("S(0)R"), parse_spec("P(sum)R")));
  // Source sharded only over size-1 dims counts as unsharded (outer-to-inner walk only).
  EXPECT_EQ(briefs(plan({8}, {1, 2}, "S(0)R", "RS(0)")), (Strs{"local_chunk@1[-1->0]"}));
}
