// core/overlap_schedule.h: collectives issued early, waited late, bytes in flight
// bounded, the issue order a property of the graph alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/overlap_schedule.h"
#include "core/placement.h"

using namespace tlm;

namespace {

using K = ScheduleKind;

ScheduleNode node(K kind, std::vector<int> inputs, int64_t bytes = 0) { return ScheduleNode{kind, std::move(inputs), bytes}; }

int pos(const std::vector<int>& order, int node) {
  return static_cast<int>(std::find(order.begin(), order.end(), node) - order.begin());
}

void expect_valid(const std::vector<ScheduleNode>& nodes, const std::vector<int>& order) {
  ASSERT_EQ(order.size(), nodes.size());
  std::vector<int> where(nodes.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    ASSERT_EQ(where.at(order[k]), -1) << "node " << order[k] << " twice";
    where[order[k]] = static_cast<int>(k);
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int in : nodes[i].inputs) EXPECT_LT(where[in], where[i]) << in << " must precede " << i;
}

// Forward of three layers, each gathering its weight (placeholders 1..3) as the
// traced program has it: gather, wait, fold, then the layer's matmul.
//   0 x, 1-3 w, then per layer k: pad, start, wait, fold, mm; last: output
std::vector<ScheduleNode> three_layer_forward(int64_t bytes = 100) {
  std::vector<ScheduleNode> g{node(K::Fixed, {}), node(K::Fixed, {}), node(K::Fixed, {}), node(K::Fixed, {})};
  int h = 0;
  for (int k = 0; k < 3; ++k) {
    const int base = static_cast<int>(g.size());
    g.push_back(node(K::Move, {1 + k}));             // pad the shard
    g.push_back(node(K::Start, {base}, bytes));      // all-gather
    g.push_back(node(K::Wait, {base + 1}));
    g.push_back(node(K::Move, {base + 2}));          // fold the pieces
    g.push_back(node(K::Compute, {h, base + 3}));    // the layer
    h = base + 4;
  }
  g.push_back(node(K::Fixed, {h}));
  return g;
}

// Backward of two layers: 0 g (tangent), 1-2 saved activations; layer 2 backward:
// grad_w2 (only the reduce-scatter uses it), grad_h = mm(g, a2); layer 1 backward; output.
std::vector<ScheduleNode> two_layer_backward() {
  return {node(K::Fixed, {}), node(K::Fixed, {}), node(K::Fixed, {}),
          node(K::Compute, {0, 2}),  // 3 grad_w2
          node(K::Compute, {0, 1}),  // 4 grad_h
          node(K::Start, {3}, 64),   // 5 reduce-scatter grad_w2
          node(K::Wait, {5}),        // 6
          node(K::Compute, {4, 1}),  // 7 grad_w1
          node(K::Start, {7}, 64),   // 8
          node(K::Wait, {8}),        // 9
          node(K::Fixed, {6, 9})};   // 10 output
}

// The most collectives issued and not yet waited for at any point of `order`.
int most_in_flight(const std::vector<ScheduleNode>& nodes, const std::vector<int>& order) {
  int now = 0, most = 0;
  for (int i : order) {
    if (nodes[i].kind == K::Start) most = std::max(most, ++now);
    if (nodes[i].kind == K::Wait) --now;
  }
  return most;
}

}  // namespace

TEST(OverlapSchedule, GathersArePrefetchedAndWaitsSunkToTheirUse) {
  auto g = three_layer_forward();
  auto order = overlap_order(g, -1);  // no bound
  expect_valid(g, order);
  // Every gather is issued before the first layer computes ...
  for (int start : {5, 10, 15}) EXPECT_LT(pos(order, start), pos(order, 8));  // 8: layer 1's matmul
  // ... and each wait comes right before its layer: after the previous layer.
  EXPECT_GT(pos(order, 11), pos(order, 8));
  EXPECT_GT(pos(order, 16), pos(order, 13));
  EXPECT_EQ(pos(order, 12) + 1, pos(order, 13));  // fold, then the layer
}

TEST(OverlapSchedule, BoundOnBytesInFlightGivesOneLayerOfPrefetch) {
  auto g = three_layer_forward(100);
  auto order = overlap_order(g, 200);  // two gathers at a time
  expect_valid(g, order);
  // Nodes per layer k: pad, start, wait, fold, mm = 4..8, 9..13, 14..18.
  // Layer 2's gather is in flight while layer 1 computes; layer 3's is issued as
  // soon as layer 1's wait frees room, so it too overlaps layer 1's compute.
  EXPECT_LT(pos(order, 10), pos(order, 8));
  EXPECT_GT(pos(order, 15), pos(order, 6));
  EXPECT_LT(pos(order, 15), pos(order, 7));  // issued (with its padding) before the fold
}

TEST(OverlapSchedule, AnOversizedCollectiveIsIssuedWhenNothingIsInFlight) {
  auto g = three_layer_forward(1000);
  auto order = overlap_order(g, 10);
  expect_valid(g, order);
  EXPECT_LT(pos(order, 5), pos(order, 6));
  EXPECT_GT(pos(order, 10), pos(order, 6));  // one at a time: after the first one's wait
  EXPECT_LT(pos(order, 10), pos(order, 8));  // and still before layer 1 computes
}

TEST(OverlapSchedule, GradientReductionOverlapsTheNextLayersBackward) {
  const auto g = two_layer_backward();
  auto order = overlap_order(g, -1);
  expect_valid(g, order);
  EXPECT_LT(pos(order, 5), pos(order, 4));  // issued as soon as grad_w2 exists
  EXPECT_GT(pos(order, 6), pos(order, 7));  // waited only at the end
}

TEST(OverlapSchedule, OneCollectiveInFlightWaitsForThePreviousOneBeforeIssuingTheNext) {
  auto g = three_layer_forward();
  auto order = overlap_order(g, -1, 1);
  expect_valid(g, order);
  EXPECT_EQ(most_in_flight(g, order), 1);
  EXPECT_EQ(most_in_flight(g, overlap_order(g, -1)), 3);  // unbounded: all three gathers at once
  // Layer 2's gather still overlaps layer 1's compute: layer 1's wait moves up to
  // just before it is issued.
  EXPECT_LT(pos(order, 6), pos(order, 10));
  EXPECT_LT(pos(order, 10), pos(order, 8));
  EXPECT_LT(pos(order, 11), pos(order, 15));
  EXPECT_LT(pos(order, 15), pos(order, 13));
}

TEST(OverlapSchedule, OneGradientReductionInFlightStillOverlapsBackward) {
  // The first reduction is issued as soon as its gradient exists and waited for only
  // when the second one is issued.
  const auto g = two_layer_backward();
  auto order = overlap_order(g, -1, 1);
  expect_valid(g, order);
  EXPECT_EQ(most_in_flight(g, order), 1);
  EXPECT_LT(pos(order, 5), pos(order, 4));  // issued before the rest of backward computes
  EXPECT_GT(pos(order, 6), pos(order, 7));  // waited for after it
  EXPECT_EQ(pos(order, 6) + 1, pos(order, 8));  // just before the next one is issued
}

TEST(OverlapSchedule, RejectsABoundOfZeroCollectives) {
  EXPECT_THROW(overlap_order(three_layer_forward(), -1, 0), InvalidArgument);
}

TEST(OverlapSchedule, IssueOrderDoesNotDependOnBytes) {
  // Uneven shards give ranks different byte counts: the collectives' order must not change.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ScheduleNode> g;
    const int n = 40;
    for (int i = 0; i < n; ++i) {
      if (i < 3) {
        g.push_back(node(K::Fixed, {}));
        continue;
      }
      const bool can_wait = g[i - 1].kind == K::Start && rng() % 2;
      if (can_wait) {
        g.push_back(node(K::Wait, {i - 1}));
        continue;
      }
      std::vector<int> in;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 2); ++k) {
        int j = static_cast<int>(rng() % i);
        if (g[j].kind == K::Start) j = 0;  // only waits read a start
        in.push_back(j);
      }
      std::sort(in.begin(), in.end());
      in.erase(std::unique(in.begin(), in.end()), in.end());
      const unsigned r = rng() % 8;
      g.push_back(node(r < 2 ? K::Start : r < 5 ? K::Move : K::Compute, in, 10 + static_cast<int64_t>(rng() % 50)));
    }
    for (int i = 0; i < n; ++i)  // every start gets a wait that something uses
      if (g[i].kind == K::Start && (i + 1 >= n || g[i + 1].kind != K::Wait)) g[i].kind = K::Compute;
    g.push_back(node(K::Fixed, {n - 1}));
    auto starts_of = [&](const std::vector<int>& order) {
      std::vector<int> s;
      for (int i : order)
        if (g[i].kind == K::Start) s.push_back(i);
      return s;
    };
    const auto base = overlap_order(g, 60);
    expect_valid(g, base);
    auto other = g;
    for (auto& x : other) x.bytes = x.bytes * 3 % 71;
    for (int64_t limit : {-1, 0, 30, 200}) {
      const auto order = overlap_order(other, limit);
      expect_valid(other, order);
      EXPECT_EQ(starts_of(order), starts_of(base)) << "trial " << trial << " limit " << limit;
    }
    // A bound on the count (the same on every rank) may change the order, but bytes still do not.
    for (int most : {1, 2}) {
      const auto counted = overlap_order(g, 60, most);
      expect_valid(g, counted);
      EXPECT_LE(most_in_flight(g, counted), most) << "trial " << trial;
      for (int64_t limit : {-1, 0, 30, 200}) {
        const auto order = overlap_order(other, limit, most);
        expect_valid(other, order);
        EXPECT_EQ(starts_of(order), starts_of(counted)) << "trial " << trial << " max_inflight " << most;
        EXPECT_LE(most_in_flight(other, order), most) << "trial " << trial;
      }
    }
  }
}

TEST(OverlapSchedule, ComputeKeepsItsOrder) {
  // However collectives move, compute nodes stay in their original relative order.
  auto g = three_layer_forward();
  for (int64_t limit : {-1, 0, 150}) {
    auto order = overlap_order(g, limit);
    std::vector<int> compute;
    for (int i : order)
      if (g[i].kind == K::Compute) compute.push_back(i);
    EXPECT_EQ(compute, (std::vector<int>{8, 13, 18}));
  }
}

TEST(OverlapSchedule, RejectsAnInvalidOrderAndAWaitWithoutStart) {
  EXPECT_THROW(overlap_order({node(K::Fixed, {1}), node(K::Fixed, {})}, -1), InvalidArgument);
  EXPECT_THROW(overlap_order({node(K::Fixed, {}), node(K::Wait, {0})}, -1), InvalidArgument);
}

// Backward of four layers whose weights are gathered again (FSDP2's plan after reshard
// after forward): per layer, last first, a gather whose result the layer's two matmuls
// read, and the layer's gradient reduce-scatter, which only the output reads. The
// weights' placeholders come in forward order: the gathers become ready first layer
// first, the reverse of their use.
std::vector<ScheduleNode> regathering_backward(int layers) {
  std::vector<ScheduleNode> g{node(K::Fixed, {})};  // 0 the tangent
  for (int k = 0; k < layers; ++k) g.push_back(node(K::Fixed, {}));  // the weights' shards
  int grad = 0;
  std::vector<int> reduced;
  for (int k = 0; k < layers; ++k) {
    const int base = static_cast<int>(g.size());
    g.push_back(node(K::Start, {layers - k}, 100));  // base: gather the weight of layer (layers - k)
    g.push_back(node(K::Wait, {base}));
    g.push_back(node(K::Move, {base + 1}));        // fold
    g.push_back(node(K::Compute, {grad, base + 2}));  // grad of the input
    g.push_back(node(K::Compute, {grad, base + 2}));  // grad of the weight
    g.push_back(node(K::Start, {base + 4}, 100));  // reduce-scatter it
    g.push_back(node(K::Wait, {base + 5}));
    reduced.push_back(base + 6);
    grad = base + 3;
  }
  reduced.push_back(grad);
  g.push_back(node(K::Fixed, reduced));
  return g;
}

TEST(OverlapSchedule, UnderTheCountBoundAGatheredResultIsFetchedOneLayerAhead) {
  // With one collective in flight and forced waits, every gather used to be issued at
  // the start, in the order they became ready, and all gathered weights were held until
  // their layers ran. Now gathers are issued in the order they are read, each when the
  // previous one's result is needed: at most two gathered weights are held (the current
  // layer's and the next one's), and the next still overlaps.
  const auto g = regathering_backward(4);
  const auto order = overlap_order(g, -1, 1);
  expect_valid(g, order);
  EXPECT_EQ(most_in_flight(g, order), 1);
  // Gathered results held: from a gather's wait to its layer's last read.
  int held = 0, most_held = 0;
  for (int i : order) {
    if (g[i].kind == K::Wait && g[g[i].inputs[0]].inputs[0] >= 1 && g[g[i].inputs[0]].inputs[0] <= 4)  // a gather's
      most_held = std::max(most_held, ++held);
    if (g[i].kind == K::Compute && i > 0 && g[i - 1].kind == K::Compute) --held;  // the layer's second read
  }
  EXPECT_LE(most_held, 2);
  for (int k = 0; k + 1 < 4; ++k) {
    const int base = 5 + 7 * k, next = base + 7;
    EXPECT_LT(pos(order, next), pos(order, base + 4)) << "layer " << k + 1 << "'s gather overlaps layer " << k;
    EXPECT_GT(pos(order, next), pos(order, base + 1)) << "issued once layer " << k << "'s gather is needed";
  }
}
