// The placement-kind table (placement_kinds.h): spelling, local shapes,
// gradients and the one-mesh-dim transitions, kind by kind.
#include <gtest/gtest.h>

#include <string>

#include "core/layout.h"
#include "core/placement_kinds.h"
#include "core/redistribute.h"

using namespace tlm;

TEST(PlacementKinds, EveryKindSpellsAndParsesBack) {
  for (const Placement& p : {Placement::replicate(), Placement::shard(2), Placement::partial(ReduceOp::Max)}) {
    EXPECT_EQ(parse_placement(p.to_string()), p) << p.to_string();
    EXPECT_EQ(kind_by_letter(p.to_string()[0])->kind, p.kind);
  }
  EXPECT_EQ(kind_by_letter('X'), nullptr);
  EXPECT_EQ(to_string(parse_spec("S(1)RP(avg)")), "S(1)RP(avg)");
  EXPECT_EQ(parse_placement("P"), Placement::partial(ReduceOp::Sum));
  EXPECT_THROW(parse_placement("R(1)"), InvalidArgument);
  EXPECT_THROW(parse_placement("S(x)"), InvalidArgument);
}

TEST(PlacementKinds, AllKindsListsEveryRowInKindOrderWithDistinctNamesAndLetters) {
  // Python's converter (torch_localmap/placements.py) and its tests iterate over all_kinds().
  const auto& kinds = all_kinds();
  ASSERT_FALSE(kinds.empty());
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(kinds[i].kind), i);
    EXPECT_EQ(kind_info(kinds[i].kind).letter, kinds[i].letter);
    EXPECT_EQ(kind_by_letter(kinds[i].letter)->kind, kinds[i].kind);
    for (size_t j = 0; j < i; ++j) {
      EXPECT_NE(std::string(kinds[i].name), kinds[j].name);
      EXPECT_NE(kinds[i].letter, kinds[j].letter);
    }
  }
  EXPECT_STREQ(kind_info(Placement::Kind::Partial).name, "Partial");
}

TEST(PlacementKinds, OnlyShardSplitsADimAndOnlyPartialIsPending) {
  EXPECT_TRUE(kind_info(Placement::Kind::Shard).splits_dim);
  EXPECT_FALSE(kind_info(Placement::Kind::Replicate).splits_dim);
  EXPECT_FALSE(kind_info(Placement::Kind::Partial).splits_dim);
  EXPECT_TRUE(kind_info(Placement::Kind::Partial).pending);
  Mesh mesh = make_mesh({2, 3});
  EXPECT_EQ(local_layout({8, 9}, mesh, parse_spec("P(sum)S(1)"), {1, 2}).shape, (std::vector<int64_t>{8, 3}));
}

TEST(PlacementKinds, GradientOfPartialIsReplicate) {
  EXPECT_EQ(kind_info(Placement::Kind::Partial).gradient, Placement::Kind::Replicate);
  EXPECT_EQ(kind_info(Placement::Kind::Shard).gradient, Placement::Kind::Shard);
  EXPECT_EQ(kind_info(Placement::Kind::Replicate).gradient, Placement::Kind::Replicate);
}

TEST(PlacementKinds, TransitionsNameTheCollectiveOrTheRefusal) {
  using K = Placement::Kind;
  EXPECT_EQ(transition(K::Shard, K::Replicate).step, CollectiveKind::AllGather);
  EXPECT_EQ(transition(K::Partial, K::Replicate).step, CollectiveKind::AllReduce);
  EXPECT_EQ(transition(K::Partial, K::Shard).step, CollectiveKind::ReduceScatter);
  EXPECT_EQ(transition(K::Shard, K::Shard).step, CollectiveKind::AllToAll);
  EXPECT_EQ(transition(K::Replicate, K::Shard).step, CollectiveKind::LocalChunk);
  EXPECT_EQ(transition(K::Replicate, K::Partial).step, CollectiveKind::LocalPartition);
  EXPECT_FALSE(transition(K::Shard, K::Partial).allowed);
  EXPECT_FALSE(transition(K::Partial, K::Partial).allowed);
  // The planner follows the table: one step per changed mesh dim, refusals name the kinds.
  Mesh mesh = make_mesh({4});
  RedistributePlan p = plan_redistribute({8, 8}, mesh, parse_spec("P(max)"), parse_spec("S(1)"));
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(p.steps[0].reduce, ReduceOp::Max);
  EXPECT_EQ(p.steps[0].dst_dim, 1);
  try {
    plan_redistribute({8}, mesh, parse_spec("S(0)"), parse_spec("P(sum)"));
    FAIL() << "Shard -> Partial must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Shard -> Partial"), std::string::npos) << e.what();
  }
}
