// core/collective_buckets.h: reductions packed in ready order up to a byte cap, never
// two whose results feed each other, never a cycle between buckets.
#include <gtest/gtest.h>

#include <array>

#include "core/collective_buckets.h"
#include "core/placement.h"

using namespace tlm;

namespace {

using K = ScheduleKind;

struct Builder {
  std::vector<ScheduleNode> nodes;
  std::vector<int> keys;
  int add(K kind, std::vector<int> inputs, int64_t bytes = 0, int key = -1) {
    nodes.push_back(ScheduleNode{kind, std::move(inputs), bytes});
    keys.push_back(key);
    return static_cast<int>(nodes.size()) - 1;
  }
  // A gradient computed from `from`, reduced: (compute, start, wait).
  std::array<int, 3> grad(int from, int64_t bytes, int key = 0) {
    const int c = add(K::Compute, {from});
    const int s = add(K::Start, {c}, bytes, key);
    return {c, s, add(K::Wait, {s})};
  }
};

}  // namespace

TEST(CollectiveBuckets, PacksIndependentGradientsInReadyOrderUpToTheCap) {
  Builder b;
  const int x = b.add(K::Fixed, {});
  std::vector<int> starts, waits;
  int prev = x;
  for (int k = 0; k < 5; ++k) {  // backward: each layer's compute feeds the next; gradients branch off
    const auto g = b.grad(prev, 100);
    starts.push_back(g[1]);
    waits.push_back(g[2]);
    prev = g[0];
  }
  b.add(K::Fixed, waits);  // the output
  const auto ids = collective_buckets(b.nodes, b.keys, 250);
  EXPECT_EQ(ids[starts[0]], 0);
  EXPECT_EQ(ids[starts[1]], 0);
  EXPECT_EQ(ids[starts[2]], 1);
  EXPECT_EQ(ids[starts[3]], 1);
  EXPECT_EQ(ids[starts[4]], -1);  // alone in its bucket: left as it is
  for (size_t i = 0; i < ids.size(); ++i)
    if (b.nodes[i].kind != K::Start) EXPECT_EQ(ids[i], -1);
  EXPECT_EQ(collective_buckets(b.nodes, b.keys, 250), ids);  // deterministic
}

TEST(CollectiveBuckets, AKeysFirstBucketHasItsOwnCap) {
  Builder b;
  const int x = b.add(K::Fixed, {});
  std::vector<int> starts, waits, other;
  int prev = x;
  for (int k = 0; k < 6; ++k) {  // key 0: a first cap of 200 (two members)
    const auto g = b.grad(prev, 100, 0);
    starts.push_back(g[1]);
    waits.push_back(g[2]);
    prev = g[0];
  }
  for (int k = 0; k < 3; ++k) {  // key 1: no first cap of its own
    const auto g = b.grad(x, 100, 1);
    other.push_back(g[1]);
    waits.push_back(g[2]);
  }
  b.add(K::Fixed, waits);
  const auto ids = collective_buckets(b.nodes, b.keys, 400, {200, 0});
  // Key 0: the first bucket holds two members (200 bytes), the next the other four (400).
  EXPECT_EQ(ids[starts[0]], ids[starts[1]]);
  EXPECT_NE(ids[starts[1]], ids[starts[2]]);
  for (int k = 3; k < 6; ++k) EXPECT_EQ(ids[starts[k]], ids[starts[2]]);
  // Key 1: the ordinary cap from its first bucket on.
  EXPECT_GE(ids[other[0]], 0);
  EXPECT_EQ(ids[other[0]], ids[other[1]]);
  EXPECT_EQ(ids[other[1]], ids[other[2]]);
  // No first caps: as before, every key capped at 400.
  const auto plain = collective_buckets(b.nodes, b.keys, 400);
  for (int k = 1; k < 4; ++k) EXPECT_EQ(plain[starts[k]], plain[starts[0]]);
  EXPECT_NE(plain[starts[4]], plain[starts[0]]);
  EXPECT_THROW(collective_buckets(b.nodes, b.keys, 400, {-1}), InvalidArgument);
}

TEST(CollectiveBuckets, KeysSeparateBucketsAndMinusOneIsNeverBucketed) {
  Builder b;
  const int x = b.add(K::Fixed, {});
  const auto a0 = b.grad(x, 10, 0), a1 = b.grad(x, 10, 1), a2 = b.grad(x, 10, 0), a3 = b.grad(x, 10, -1),
             a4 = b.grad(x, 10, 1), a5 = b.grad(x, 10, -1);
  b.add(K::Fixed, {a0[2], a1[2], a2[2], a3[2], a4[2], a5[2]});
  const auto ids = collective_buckets(b.nodes, b.keys, 1 << 20);
  EXPECT_GE(ids[a0[1]], 0);
  EXPECT_EQ(ids[a0[1]], ids[a2[1]]);
  EXPECT_GE(ids[a1[1]], 0);
  EXPECT_EQ(ids[a1[1]], ids[a4[1]]);
  EXPECT_NE(ids[a0[1]], ids[a1[1]]);
  EXPECT_EQ(ids[a3[1]], -1);
  EXPECT_EQ(ids[a5[1]], -1);
}

TEST(CollectiveBuckets, AResultThatFeedsAnotherMembersInputClosesTheBucket) {
  // TP-style activations: the second reduction's input is computed from the first's result.
  Builder b;
  const int x = b.add(K::Fixed, {});
  const auto r0 = b.grad(x, 10);
  const auto r1 = b.grad(r0[2], 10);
  const auto r2 = b.grad(x, 10);
  b.add(K::Fixed, {r1[2], r2[2]});
  const auto ids = collective_buckets(b.nodes, b.keys, 1 << 20);
  // r0 closed alone (-1); r1 and r2 are independent and share one.
  EXPECT_EQ(ids[r0[1]], -1);
  EXPECT_GE(ids[r1[1]], 0);
  EXPECT_EQ(ids[r1[1]], ids[r2[1]]);
}

TEST(CollectiveBuckets, BucketsOfDifferentKeysNeverWaitOnEachOtherInACycle) {
  // a1 (key 0) and b1 (key 1) are ready first; a2 needs b1's result and b2 needs a1's.
  // Packing {a1, a2} and {b1, b2} would deadlock: each bucket would wait for the other.
  Builder b;
  const int x = b.add(K::Fixed, {});
  const auto a1 = b.grad(x, 10, 0);
  const auto b1 = b.grad(x, 10, 1);
  const auto a2 = b.grad(b1[2], 10, 0);
  const auto b2 = b.grad(a1[2], 10, 1);
  b.add(K::Fixed, {a2[2], b2[2]});
  const auto ids = collective_buckets(b.nodes, b.keys, 1 << 20);
  const bool a_together = ids[a1[1]] >= 0 && ids[a1[1]] == ids[a2[1]];
  const bool b_together = ids[b1[1]] >= 0 && ids[b1[1]] == ids[b2[1]];
  EXPECT_FALSE(a_together && b_together);
  // a2 needs b1: b1's open bucket is closed (alone) first; b2 needs a1: {a1, a2} is closed
  // before b2 joins anything, so b2 stays alone.
  EXPECT_TRUE(a_together);
  EXPECT_FALSE(b_together);
}

TEST(CollectiveBuckets, RefusesMalformedGraphs) {
  Builder b;
  const int x = b.add(K::Fixed, {});
  b.add(K::Wait, {x});  // a wait whose input is no start
  EXPECT_THROW(collective_buckets(b.nodes, b.keys, 100), InvalidArgument);
  Builder c;
  c.add(K::Compute, {1});
  c.add(K::Fixed, {});
  EXPECT_THROW(collective_buckets(c.nodes, c.keys, 100), InvalidArgument);
  Builder d;
  d.add(K::Fixed, {});
  EXPECT_THROW(collective_buckets(d.nodes, {}, 100), InvalidArgument);
  EXPECT_THROW(collective_buckets(d.nodes, d.keys, 0), InvalidArgument);
}

TEST(CollectiveBuckets, GradientsReducedOverOneMeshDimThenAnotherAreBucketedOnBoth) {
  // A 2-D plan's weight gradients: each is all-reduced over mesh dim 1's group (key 1) and the
  // result over dim 0's (key 0). Closing the key-1 bucket whenever a key-0 reduction reads its
  // result left every key-1 reduction alone (llama on 2x2: 8 all-reduces priced as bucket members).
  Builder b;
  const int x = b.add(K::Fixed, {});
  std::vector<int> first, second, waits;
  int prev = x;
  for (int k = 0; k < 4; ++k) {
    const auto g = b.grad(prev, 10, 1);
    const int s = b.add(K::Start, {g[2]}, 10, 0);
    first.push_back(g[1]);
    second.push_back(s);
    waits.push_back(b.add(K::Wait, {s}));
    prev = g[0];
  }
  b.add(K::Fixed, waits);
  const auto ids = collective_buckets(b.nodes, b.keys, 1 << 20);
  for (int k = 1; k < 4; ++k) {
    EXPECT_EQ(ids[first[k]], ids[first[0]]);
    EXPECT_EQ(ids[second[k]], ids[second[0]]);
  }
  ASSERT_GE(ids[first[0]], 0);
  // The dim-1 bucket is issued first: the dim-0 one reads its results.
  EXPECT_LT(ids[first[0]], ids[second[0]]);
}
