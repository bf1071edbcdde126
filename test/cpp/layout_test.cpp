// Local shard shapes / offsets: worked examples checked by hand against
// torch 2.13's _compute_local_shape_and_global_offset (pytest compares the two
// on random cases as well).
#include <gtest/gtest.h>

#include "core/layout.h"

using namespace tlm;
using Shape = std::vector<int64_t>;

namespace {
LocalLayout at(const Shape& g, const Shape& mesh, const std::string& spec, const Shape& coord) {
  return local_layout(g, make_mesh(mesh), parse_spec(spec), coord);
}
}  // namespace

TEST(Layout, TorchDocstringExampleNestedShardOfOneDim) {
  // [2, 5] on mesh (2, 2) with (Shard(1), Shard(1)): 5 -> 3|2, then 3 -> 2|1, 2 -> 1|1.
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {0, 0}).shape, (Shape{2, 2}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {0, 0}).offset, (Shape{0, 0}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {0, 1}).shape, (Shape{2, 1}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {0, 1}).offset, (Shape{0, 2}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {1, 0}).shape, (Shape{2, 1}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {1, 0}).offset, (Shape{0, 3}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {1, 1}).shape, (Shape{2, 1}));
  EXPECT_EQ(at({2, 5}, {2, 2}, "S(1)S(1)", {1, 1}).offset, (Shape{0, 4}));
}

TEST(Layout, UnevenAndEmptyShardsReportGlobalSizeAsOffset) {
  // 5 over 4 ranks: torch.chunk gives 2, 2, 1 and an empty fourth shard.
  Shape sizes, offsets;
  for (int64_t r = 0; r < 4; ++r) {
    auto l = at({5}, {4}, "S(0)", {r});
    sizes.push_back(l.shape[0]);
    offsets.push_back(l.offset[0]);
  }
  EXPECT_EQ(sizes, (Shape{2, 2, 1, 0}));
  EXPECT_EQ(offsets, (Shape{0, 2, 4, 5}));
  // 3 over 4: ceil(3/4) = 1 -> 1, 1, 1, 0.
  EXPECT_EQ(at({3}, {4}, "S(0)", {3}).shape, (Shape{0}));
  EXPECT_EQ(at({3}, {4}, "S(0)", {3}).offset, (Shape{3}));
  // Size-0 dim: every shard is empty, offset = 0 = global size.
  EXPECT_EQ(at({0, 4}, {2}, "S(0)", {1}).shape, (Shape{0, 4}));
  EXPECT_EQ(at({0, 4}, {2}, "S(0)", {1}).offset, (Shape{0, 0}));
}

TEST(Layout, NestedShardWithEmptyInnerPiece) {
  // 3 on mesh (2,2) S(0)S(0): 3 -> 2|1; 2 -> 1|1; 1 -> 1|0 (empty, offset 3).
  EXPECT_EQ(at({3}, {2, 2}, "S(0)S(0)", {0, 1}).offset, (Shape{1}));
  EXPECT_EQ(at({3}, {2, 2}, "S(0)S(0)", {1, 0}).shape, (Shape{1}));
  EXPECT_EQ(at({3}, {2, 2}, "S(0)S(0)", {1, 0}).offset, (Shape{2}));
  EXPECT_EQ(at({3}, {2, 2}, "S(0)S(0)", {1, 1}).shape, (Shape{0}));
  EXPECT_EQ(at({3}, {2, 2}, "S(0)S(0)", {1, 1}).offset, (Shape{3}));
}

TEST(Layout, ReplicateAndPartialKeepFullDims) {
  auto l = at({4, 6}, {2, 3}, "P(max)S(1)", {1, 2});
  EXPECT_EQ(l.shape, (Shape{4, 2}));
  EXPECT_EQ(l.offset, (Shape{0, 4}));
  EXPECT_EQ(at({4, 6}, {2, 3}, "RR", {1, 1}).shape, (Shape{4, 6}));
  // Negative shard dims are normalized.
  EXPECT_EQ(at({4, 6}, {2, 3}, "S(-1)R", {1, 0}).offset, (Shape{0, 3}));
}

TEST(Layout, MaxLocalShapeIsTheLargestShard) {
  EXPECT_EQ(max_local_shape({5, 7}, make_mesh({2, 2}), parse_spec("S(0)S(1)")), (Shape{3, 4}));
  EXPECT_EQ(max_local_shape({5}, make_mesh({2, 3}), parse_spec("S(0)S(0)")), (Shape{1}));  // 5->3|2, 3->1|1|1
  EXPECT_EQ(max_local_shape({9, 2}, make_mesh({4}), parse_spec("R")), (Shape{9, 2}));
}

TEST(Layout, AllLocalLayoutsMatchPerCoordinate) {
  Mesh mesh = make_mesh({2, 3});
  auto spec = parse_spec("S(1)S(0)");
  auto all = all_local_layouts({7, 5}, mesh, spec);
  ASSERT_EQ(all.size(), 6u);
  for (int64_t r = 0; r < 6; ++r) {
    auto one = local_layout({7, 5}, mesh, spec, mesh.coordinate(r));
    EXPECT_EQ(all[r].shape, one.shape);
    EXPECT_EQ(all[r].offset, one.offset);
  }
  EXPECT_EQ(all[5].shape, (Shape{1, 2}));  // coord (1,2): dim1 5 -> 3|2 -> 2; dim0 7 -> 3|3|1 -> 1
  EXPECT_EQ(all[5].offset, (Shape{6, 3}));
}

TEST(Layout, LogicalShapeCutsOnlyEarlierMeshDims) {
  Mesh mesh = make_mesh({2, 2});
  auto spec = parse_spec("S(0)S(0)");
  EXPECT_EQ(logical_shape({7, 5}, mesh, spec, 0, {1, 0}), (Shape{7, 5}));
  EXPECT_EQ(logical_shape({7, 5}, mesh, spec, 1, {1, 0}), (Shape{3, 5}));
  EXPECT_EQ(logical_shape({7, 5}, mesh, spec, 1, {0, 1}), (Shape{4, 5}));
}

TEST(Layout, BadInputThrowsInvalidArgument) {
  Mesh mesh = make_mesh({2, 2});
  EXPECT_THROW(local_layout({4}, mesh, parse_spec("S(0)"), {0, 0}), InvalidArgument);      // 1 placement, 2 dims
  EXPECT_THROW(local_layout({4}, mesh, parse_spec("S(1)R"), {0, 0}), InvalidArgument);     // dim out of range
  EXPECT_THROW(local_layout({4}, mesh, parse_spec("S(0)R"), {0, 2}), InvalidArgument);     // coord outside
  EXPECT_THROW(local_layout({4}, mesh, parse_spec("S(0)R"), {0}), InvalidArgument);        // coord rank
  EXPECT_THROW(local_layout({-1}, mesh, parse_spec("S(0)R"), {0, 0}), InvalidArgument);    // negative size
  EXPECT_THROW(logical_shape({4}, mesh, parse_spec("S(0)R"), 2, {0, 0}), InvalidArgument);  // mesh dim
  try {
    local_layout({4, 4}, mesh, parse_spec("S(2)R"), {0, 0});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Shard(2)"), std::string::npos) << e.what();
  }
}
