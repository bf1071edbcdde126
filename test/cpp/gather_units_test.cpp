#include "core/gather_units.h"

#include <gtest/gtest.h>

#include <string>

namespace tlm {
namespace {

TEST(GatherUnits, AUnitIsTheFqnUpToItsFirstListIndexElseItsModule) {
  EXPECT_EQ(gather_unit("layers.3.attention.wq.weight"), "layers.3");
  EXPECT_EQ(gather_unit("blocks.0.1.w"), "blocks.0");
  EXPECT_EQ(gather_unit("norm.weight"), "norm");
  EXPECT_EQ(gather_unit("model.embed.weight"), "model.embed");
  EXPECT_EQ(gather_unit("bias"), "");
}

TEST(GatherUnits, ASmallUnitSharesTheBucketBeforeItAndLargeUnitsKeepTheirOwn) {
  const int64_t small = kSmallUnitBytes / 4, large = 2 * kSmallUnitBytes;
  // embed (small), 2 blocks (large), norm and head (small): the small ones after a large
  // unit join it; the first small one starts a bucket the next unit joins.
  EXPECT_EQ(small_unit_groups({small, large, large, small, small}), (std::vector<int>{0, 0, 2, 2, 2}));
  EXPECT_EQ(small_unit_groups({large, large}), (std::vector<int>{0, 1}));
  EXPECT_TRUE(small_unit_groups({}).empty());
}

// Parameters "<unit>.w" of `elements` floats each, read in this order by one mm chain:
// w -> t (a transpose: the parameter as read) -> mm.
std::string params_graph(const std::vector<std::pair<std::string, int>>& params) {
  std::string nodes = R"({"name": "x", "op": "placeholder", "role": "input", "outputs": [{"shape": [4, 4], "dtype": "float32"}]})";
  const int n = static_cast<int>(params.size());
  for (int k = 0; k < n; ++k)
    nodes += R"(, {"name": "p)" + std::to_string(k) + R"(", "op": "placeholder", "role": "param", "extra": {"target": ")" +
             params[static_cast<size_t>(k)].first + R"("}, "outputs": [{"shape": [)" +
             std::to_string(params[static_cast<size_t>(k)].second) + R"(], "dtype": "float32"}]})";
  int prev = 0;
  for (int k = 0; k < n; ++k) {
    const int t = static_cast<int>(1 + n + 2 * k);
    nodes += R"(, {"name": "t)" + std::to_string(k) + R"(", "op": "aten.neg.default", "args": [{"t": [)" +
             std::to_string(1 + k) + R"(, 0]}], "outputs": [{"shape": [)" +
             std::to_string(params[static_cast<size_t>(k)].second) + R"(], "dtype": "float32"}]})";
    nodes += R"(, {"name": "m)" + std::to_string(k) + R"(", "op": "aten.add.Tensor", "args": [{"t": [)" +
             std::to_string(prev) + R"(, 0]}, {"t": [)" + std::to_string(t) + R"(, 0]}], "outputs": [{"shape": [4, 4], "dtype": "float32"}]})";
    prev = t + 1;
  }
  nodes += R"(, {"name": "out", "op": "output", "args": [[{"t": [)" + std::to_string(prev) + R"(, 0]}]]})";
  return R"({"mesh": {"shape": [4]}, "nodes": [)" + nodes + "]}";
}

TEST(GatherUnits, AParameterAsReadPaysItsUnitsBucketCappedAtTheRuntimesCap) {
  const int big = static_cast<int>(kSmallUnitBytes / 4) * 2;  // 2 MiB of float32
  const int small = 1024;                                      // 4 KiB
  const Graph g = read_graph(params_graph(
      {{"embed.w", small}, {"layers.0.a.w", big}, {"layers.0.b.w", big}, {"layers.1.a.w", big}, {"norm.w", small}}));
  const int64_t big_bytes = int64_t{big} * 4, small_bytes = int64_t{small} * 4;
  const std::vector<int64_t> buckets = gather_bucket_bytes(g, 64 << 20);
  // embed joins layers.0 (it is small); norm joins layers.1 (it is small).
  const int64_t first = small_bytes + 2 * big_bytes, second = big_bytes + small_bytes;
  EXPECT_EQ(buckets[1], first);
  EXPECT_EQ(buckets[2], first);
  EXPECT_EQ(buckets[3], first);
  EXPECT_EQ(buckets[4], second);
  EXPECT_EQ(buckets[5], second);
  EXPECT_EQ(buckets[6], first);   // the transpose of embed.w: still the parameter as read
  EXPECT_EQ(buckets[7], 0);       // an activation
  EXPECT_EQ(buckets[0], 0);       // the input
  const std::vector<int64_t> capped = gather_bucket_bytes(g, big_bytes);
  EXPECT_EQ(capped[2], big_bytes);
  EXPECT_EQ(gather_bucket_bytes(g, 0)[2], 0);  // no buckets at all
}

}  // namespace
}  // namespace tlm
