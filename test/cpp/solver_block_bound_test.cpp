// block_bound (solver/block_bound.h): a bound on a problem of repeated blocks, from its
// distinct blocks. It must never exceed the optimum (whatever the kept steps, the starting
// multipliers or the blocks' links), it must count identical blocks once, and where the
// relaxation loses nothing (blocks that share no edge, no memory) it must reach the optimum.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "core/solver/block_bound.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::brute_force;
using testing::node;

const Clock::time_point kNoDeadline = Clock::time_point::max();

// B blocks of three nodes (an activation x kept from its forward to its backward step, a
// transient y, a gradient g kept to the end), a parameter before them and a loss between
// forward and backward, as a transformer's step. Edges inside a block, from each block to
// the next, from the parameter to every block, and from the last block to the loss. With
// `alike`, every block has the same costs and usages (the matrices are shared either way).
struct Chain {
  Problem p;
  std::vector<std::vector<int>> blocks;
  std::vector<char> ends_and_outside;  // steps of the first and last block, and the rest
  std::vector<int> step_block;         // each step's block (-1: outside)
};

// With `private_weights`, each block's x also reads a weight of its own, a node outside
// the blocks alive throughout (as a layer's parameters).
Chain make_chain(int blocks, uint64_t seed, bool alike, std::optional<Usage> limit, int strategies = 2,
                 bool private_weights = false) {
  std::mt19937_64 rng(seed);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto make = [&](int count) {
    std::vector<Strategy> s(static_cast<size_t>(count));
    for (Strategy& x : s) x = {static_cast<Cost>(rnd(0, 20)), static_cast<Usage>(rnd(1, 9))};
    return s;
  };
  auto matrix = [&](bool forbid) {
    std::vector<Cost> m(static_cast<size_t>(strategies * strategies));
    for (Cost& c : m) c = rnd(0, 15);
    if (forbid) m[1] = kInfiniteCost;
    return make_cost_matrix(std::move(m));
  };
  const CostMatrix inner = matrix(true), grad = matrix(false), link = matrix(false), param = matrix(false);
  Chain c;
  const int loss = 1 + 2 * blocks, end = loss + 1 + blocks + 1;
  c.p.nodes.push_back(node(0, end, make(strategies)));
  const std::vector<Strategy> sx = make(strategies), sy = make(strategies), sg = make(strategies);
  for (int k = 0; k < blocks; ++k) {
    const int fwd = 1 + 2 * k, bwd = loss + 1 + (blocks - 1 - k);
    const int x = static_cast<int>(c.p.nodes.size());
    c.p.nodes.push_back(node(fwd, bwd + 1, alike ? sx : make(strategies)));
    c.p.nodes.push_back(node(fwd + 1, fwd + 2, alike ? sy : make(strategies)));
    c.p.nodes.push_back(node(bwd, end, alike ? sg : make(strategies)));
    c.blocks.push_back({x, x + 1, x + 2});
    c.p.edges.emplace_back(x, x + 1, inner);
    c.p.edges.emplace_back(x + 2, x, grad);
    c.p.edges.emplace_back(0, x, param);
    if (k > 0) c.p.edges.emplace_back(x - 2, x, link);  // the block before's y
  }
  c.p.nodes.push_back(node(loss, loss + 1, make(strategies)));
  c.p.edges.emplace_back(c.blocks.back()[1], static_cast<int>(c.p.nodes.size()) - 1, link);
  if (private_weights) {
    const CostMatrix read = matrix(true);
    const std::vector<Strategy> sw = make(strategies);
    for (const std::vector<int>& b : c.blocks) {
      c.p.nodes.push_back(node(0, end, alike ? sw : make(strategies)));
      c.p.edges.emplace_back(static_cast<int>(c.p.nodes.size()) - 1, b[0], read);
    }
  }
  c.p.usage_limit = limit;
  c.ends_and_outside.assign(static_cast<size_t>(end), 1);
  c.step_block.assign(static_cast<size_t>(end), -1);
  for (int k = 0; k < blocks; ++k)
    c.step_block[static_cast<size_t>(1 + 2 * k)] = c.step_block[static_cast<size_t>(2 + 2 * k)] =
        c.step_block[static_cast<size_t>(loss + 1 + (blocks - 1 - k))] = k;
  for (int k = 1; k + 1 < blocks; ++k) {
    c.ends_and_outside[static_cast<size_t>(1 + 2 * k)] = c.ends_and_outside[static_cast<size_t>(2 + 2 * k)] = 0;
    c.ends_and_outside[static_cast<size_t>(loss + 1 + (blocks - 1 - k))] = 0;
  }
  return c;
}

// The least usage limit some labelling meets, plus `slack`: the memory-bound case.
Usage tight_limit(const Problem& p, Usage slack) {
  Problem q = p;
  Usage lo = 0, hi = 1;
  for (const Node& n : p.nodes) hi += std::max_element(n.strategies.begin(), n.strategies.end(), [](auto& a, auto& b) {
                                        return a.usage < b.usage;
                                      })->usage;
  while (lo < hi) {  // the least limit with a feasible labelling
    const Usage mid = (lo + hi) / 2;
    q.usage_limit = mid;
    if (brute_force(q)) hi = mid;
    else lo = mid + 1;
  }
  return lo + slack;
}

TEST(BlockBound, NeverAboveTheOptimum) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const bool alike = seed % 2 == 0;
    Chain c = make_chain(4, seed, alike, std::nullopt, 2, /*private_weights=*/seed % 4 >= 2);
    c.p.usage_limit = tight_limit(c.p, static_cast<Usage>(seed % 4));
    const std::optional<__int128> opt = brute_force(c.p);
    ASSERT_TRUE(opt.has_value());
    // Every step kept or only the ends; no start, or large start multipliers at every step.
    std::vector<char> all(c.ends_and_outside.size(), 1);
    std::vector<std::pair<int64_t, double>> big;
    for (int64_t t = 0; t < static_cast<int64_t>(all.size()); ++t) big.emplace_back(t, 3.0 + static_cast<double>(t % 3));
    const std::vector<std::pair<int64_t, double>> none;
    const std::vector<int> no_owners;
    for (const std::vector<char>* keep : {&all, &c.ends_and_outside})
      for (const std::vector<int>* step_block : {&no_owners, static_cast<const std::vector<int>*>(&c.step_block)})
      for (const auto* start : {&none, static_cast<const std::vector<std::pair<int64_t, double>>*>(&big)}) {
        const BlockBound b = block_bound(c.p, c.blocks, *keep, *step_block, *start, static_cast<__int128>(*opt), kNoDeadline, 60);
        ASSERT_TRUE(std::isfinite(static_cast<double>(b.bound))) << b.note;
        EXPECT_LE(b.bound, static_cast<long double>(*opt)) << "seed " << seed << ": " << b.note;
        EXPECT_EQ(b.pieces, 5);
        EXPECT_EQ(b.iterations, 60);
      }
  }
}

TEST(BlockBound, TheSameBoundOnAnyNumberOfThreads) {
  // The pieces' passes run on threads; each piece's arithmetic and the order of the sums
  // are the same, so the bound is too, bit for bit.
  for (uint64_t seed = 0; seed < 12; ++seed) {
    Chain c = make_chain(4, seed, /*alike=*/seed % 2 == 0, std::nullopt, 2, /*private_weights=*/seed % 3 == 0);
    c.p.usage_limit = tight_limit(c.p, static_cast<Usage>(seed % 3));
    const BlockBound one = block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, -1, kNoDeadline, 40, 1);
    ASSERT_TRUE(std::isfinite(static_cast<double>(one.bound))) << one.note;
    for (int threads : {2, 3, 8}) {
      const BlockBound many =
          block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, -1, kNoDeadline, 40, threads);
      EXPECT_EQ(many.bound, one.bound) << "seed " << seed << ", " << threads << " threads";
      EXPECT_EQ(many.iterations, one.iterations);
    }
  }
}

TEST(BlockBound, CountsIdenticalBlocksOnce) {
  // Eight blocks alike, no memory limit (no step tells blocks apart): block 0 (no link
  // reaches it from a block before), blocks 1-6, block 7 (its y is read by the loss, not
  // by a next block) and the rest. Blocks made with their own costs are all distinct.
  Chain alike = make_chain(8, 3, true, std::nullopt);
  const BlockBound a = block_bound(alike.p, alike.blocks, {}, {}, {}, -1, kNoDeadline, 1);
  EXPECT_EQ(a.pieces, 9);
  EXPECT_EQ(a.distinct, 4) << a.note;
  Chain own = make_chain(8, 3, false, std::nullopt);
  const BlockBound b = block_bound(own.p, own.blocks, {}, {}, {}, -1, kNoDeadline, 1);
  EXPECT_EQ(b.distinct, 9) << b.note;
  // Under a limit priced at every step, each block is alive at steps of its own: all distinct.
  alike.p.usage_limit = 1000;
  std::vector<char> all(alike.ends_and_outside.size(), 1);
  EXPECT_EQ(block_bound(alike.p, alike.blocks, all, {}, {}, -1, kNoDeadline, 1).distinct, 9);
  // Priced only at the end blocks' steps and outside, the middle six are alike again.
  const BlockBound ends = block_bound(alike.p, alike.blocks, alike.ends_and_outside, {}, {}, -1, kNoDeadline, 1);
  EXPECT_EQ(ends.distinct, 4) << ends.note;
}

TEST(BlockBound, AlikeBlocksStayOnePieceUnderATightLimit) {
  // Near the least feasible limit, a strategy that breaks the limit on its own is forbidden
  // against the room over its node's interval, which differs by block (an early block's
  // values live longer). Forbidden in one middle block and kept in another, it is allowed
  // in both (a relaxation), so the middle blocks stay one piece: block 0, blocks 1-3, block
  // 4 and the rest, as without a limit; and the bound stays below the optimum.
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Chain c = make_chain(5, seed, /*alike=*/true, std::nullopt);
    c.p.usage_limit = tight_limit(c.p, static_cast<Usage>(seed % 3));
    const std::optional<__int128> opt = brute_force(c.p);
    ASSERT_TRUE(opt.has_value());
    const BlockBound b =
        block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, *opt, kNoDeadline, 60);
    EXPECT_EQ(b.distinct, 4) << "seed " << seed << ": " << b.note;
    ASSERT_TRUE(std::isfinite(static_cast<double>(b.bound))) << b.note;
    EXPECT_LE(b.bound, static_cast<long double>(*opt)) << "seed " << seed << ": " << b.note;
  }
}

TEST(BlockBound, ExactWhenBlocksShareNothing) {
  // Blocks that are paths, with no edge between them and no memory: the relaxation is the
  // problem, and message passing on a path reaches its minimum.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Problem p;
    std::vector<std::vector<int>> blocks;
    for (int b = 0; b < 4; ++b) {
      blocks.emplace_back();
      for (int k = 0; k < 3; ++k) {
        std::vector<Strategy> s(3);
        for (Strategy& x : s) x = {static_cast<Cost>(rnd(0, 30)), 0};
        blocks.back().push_back(static_cast<int>(p.nodes.size()));
        p.nodes.push_back(node(0, 0, s));
        if (k > 0) {
          std::vector<Cost> m(9);
          for (Cost& c : m) c = rnd(0, 20);
          p.edges.emplace_back(blocks.back()[k - 1], blocks.back()[k], std::move(m));
        }
      }
    }
    const std::optional<__int128> opt = brute_force(p);
    const BlockBound b = block_bound(p, blocks, {}, {}, {}, -1, kNoDeadline, 20);
    EXPECT_EQ(b.bound, static_cast<long double>(*opt)) << "seed " << seed;
    EXPECT_EQ(b.pieces, 4);  // no rest: every node is in a block
  }
}

TEST(BlockBound, AgreementMultipliersRecoverTheLinksBetweenBlocks) {
  // Two one-node blocks that want opposite strategies, and a link that charges 10 when
  // they differ: the optimum (5) takes one of them off its best. Each link at its least
  // entry (the first iteration) sees 0; the multipliers tying the copy of block 0's node
  // in block 1 to the node itself recover the optimum, the problem being a tree.
  Problem p;
  p.nodes.push_back(node(0, 0, {{0, 0}, {5, 0}}));
  p.nodes.push_back(node(0, 0, {{5, 0}, {0, 0}}));
  p.edges.emplace_back(0, 1, std::vector<Cost>{0, 10, 10, 0});
  const std::vector<std::vector<int>> blocks = {{0}, {1}};
  EXPECT_EQ(block_bound(p, blocks, {}, {}, {}, 5, kNoDeadline, 1).bound, 0);
  const BlockBound b = block_bound(p, blocks, {}, {}, {}, 5, kNoDeadline, 200);
  EXPECT_EQ(b.bound, 5) << b.note;
  // Balancing the copy's reduced costs against its source's settles a tree's link within a
  // few balancing steps, every fourth iteration (subgradient steps on the decoded labels
  // took tens of iterations here).
  const BlockBound quick = block_bound(p, blocks, {}, {}, {}, 5, kNoDeadline, 12);
  EXPECT_EQ(quick.bound, 5) << quick.note;
  // On the chains above, without memory, the multipliers add to the first iteration's bound.
  int raised = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const Chain c = make_chain(4, seed, seed % 2 == 0, std::nullopt);
    const __int128 opt = *brute_force(c.p);
    const long double first = block_bound(c.p, c.blocks, {}, {}, {}, -1, kNoDeadline, 1).bound;
    const long double later = block_bound(c.p, c.blocks, {}, {}, {}, opt, kNoDeadline, 200).bound;
    EXPECT_GE(later, first);
    EXPECT_LE(later, static_cast<long double>(opt));
    raised += later > first;
  }
  EXPECT_GT(raised, 0);
}

TEST(BlockBound, AgreementStepsMoveOnWhereBalancingStalls) {
  // On chains without memory, balancing the reduced costs alone settles below the optimum
  // and stays there (1 of 12 chains of two strategies and 2 of 12 of three reach it, after
  // 60 or 200 iterations alike); the Polyak steps on the copies' disagreement with their
  // sources bring 15 of the 24 to it within 200.
  int reached = 0;
  for (int strategies : {2, 3})
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const Chain c = make_chain(4, seed, seed % 2 == 0, std::nullopt, strategies);
      const __int128 opt = *brute_force(c.p);
      const BlockBound b = block_bound(c.p, c.blocks, {}, {}, {}, opt, kNoDeadline, 200);
      EXPECT_LE(b.bound, static_cast<long double>(opt)) << "seed " << seed;
      reached += b.bound == static_cast<long double>(opt);
    }
  EXPECT_GE(reached, 12);
}

// Four blocks, each two nodes alive at its own step only, each cheap and large (20) or dear
// and small (1), under a limit of 30: one of the two must be small, 10 per block (optimum 40).
Problem four_blocks_of_own_steps(std::vector<std::vector<int>>& blocks) {
  Problem p;
  for (int b = 0; b < 4; ++b) {
    blocks.push_back({2 * b, 2 * b + 1});
    for (int k = 0; k < 2; ++k) p.nodes.push_back(node(b, b + 1, {{0, 20}, {10, 1}}));
  }
  p.usage_limit = 30;
  return p;
}

TEST(BlockBound, PricesAMiddleBlocksOwnSteps) {
  // Memory is kept at the end blocks' steps only; given each step's block, the middle
  // blocks' own steps are priced too (one row per position in a block, shared by blocks 1
  // and 2, which stay one piece), and the bound rises.
  std::vector<std::vector<int>> blocks;
  const Problem p = four_blocks_of_own_steps(blocks);
  const std::vector<char> ends = {1, 0, 0, 1};
  const std::vector<int> owners = {0, 1, 2, 3};
  const __int128 opt = *brute_force(p);
  ASSERT_EQ(opt, 40);
  const BlockBound without = block_bound(p, blocks, ends, {}, {}, opt, kNoDeadline, 100);
  const BlockBound with = block_bound(p, blocks, ends, owners, {}, opt, kNoDeadline, 100);
  EXPECT_LE(with.bound, 40);
  EXPECT_GE(with.bound, without.bound + 5) << without.note << " / " << with.note;
  EXPECT_NE(with.note.find("1 own-step rows"), std::string::npos) << with.note;
  EXPECT_EQ(with.distinct, 3) << with.note;
}

TEST(BlockBound, StepsFromAStartStillPriceTheOwnStepRows) {
  // From the caller's multipliers the steps stay small (the start is most of the bound);
  // they must still move, or rows the start does not price would stay free: the problem
  // above, started at the end blocks' steps, its middle blocks' own steps priced from 0.
  std::vector<std::vector<int>> blocks;
  const Problem p = four_blocks_of_own_steps(blocks);
  const std::vector<char> ends = {1, 0, 0, 1};
  const std::vector<int> owners = {0, 1, 2, 3};
  const std::vector<std::pair<int64_t, double>> start = {{0, 0.5}, {3, 0.5}};
  const BlockBound held = block_bound(p, blocks, ends, {}, start, 40, kNoDeadline, 300);
  const BlockBound moved = block_bound(p, blocks, ends, owners, start, 40, kNoDeadline, 300);
  EXPECT_LE(moved.bound, 40);
  EXPECT_GE(moved.bound, held.bound + 5) << held.note << " / " << moved.note;
}

TEST(BlockBound, ForbiddenEverywhereGivesNoBound) {
  Chain c = make_chain(4, 1, true, std::nullopt);
  Node& x = c.p.nodes[static_cast<size_t>(c.blocks[2][0])];
  x.usage_upper = 0;  // every strategy uses memory
  const BlockBound b = block_bound(c.p, c.blocks, {}, {}, {}, -1, kNoDeadline, 5);
  EXPECT_FALSE(std::isfinite(static_cast<double>(b.bound)));
  EXPECT_NE(b.note.find("no allowed strategy"), std::string::npos) << b.note;
}

TEST(BlockBound, ReadsALayersOwnWeightsInItsBlock) {
  // Blocks that are paths sharing no edge, each reading a weight outside every block that
  // no other block reads, no memory: the weights join their blocks' pieces, so no edge is
  // cut, the relaxation is the problem, and one pass reaches its minimum. (Read through
  // copies, the first pass sees each edge at its least entry.) Blocks alike are one piece.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto strategies = [&] {
      std::vector<Strategy> s(3);
      for (Strategy& x : s) x = {static_cast<Cost>(rnd(0, 30)), 0};
      return s;
    };
    auto matrix = [&] {
      std::vector<Cost> m(9);
      for (Cost& c : m) c = rnd(0, 20);
      return make_cost_matrix(std::move(m));
    };
    const bool alike = seed % 2 == 0;
    const std::vector<Strategy> sa = strategies(), sb = strategies(), sw = strategies();
    const CostMatrix inner = matrix(), read = matrix();
    Problem p;
    std::vector<std::vector<int>> blocks;
    for (int b = 0; b < 4; ++b) {
      const int a = static_cast<int>(p.nodes.size());
      p.nodes.push_back(node(0, 0, alike ? sa : strategies()));
      p.nodes.push_back(node(0, 0, alike ? sb : strategies()));
      blocks.push_back({a, a + 1});
      p.edges.emplace_back(a, a + 1, alike ? inner : matrix());
    }
    for (int b = 0; b < 4; ++b) {  // the weights, after every block's nodes
      p.nodes.push_back(node(0, 0, alike ? sw : strategies()));
      p.edges.emplace_back(static_cast<int>(p.nodes.size()) - 1, blocks[static_cast<size_t>(b)][0],
                           alike ? read : matrix());
    }
    const std::optional<__int128> opt = brute_force(p);
    const BlockBound b = block_bound(p, blocks, {}, {}, {}, -1, kNoDeadline, 1);
    EXPECT_EQ(b.bound, static_cast<long double>(*opt)) << "seed " << seed << ": " << b.note;
    EXPECT_EQ(b.pieces, 4) << b.note;  // nothing left outside the blocks
    EXPECT_EQ(b.distinct, alike ? 1 : 4) << b.note;
  }
}

TEST(BlockBound, StopsOnceItLevelsOff) {
  // With level_off it stops at the first exact check whose best bound rose by less than that
  // share over the last kLevelOffIterations iterations: the bound it returns is the one a
  // run of that many iterations gets, the iterations are far fewer than allowed.
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Chain c = make_chain(4, seed, /*alike=*/true, std::nullopt);
    c.p.usage_limit = tight_limit(c.p, 1);
    const BlockBound levelled =
        block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, -1, kNoDeadline, 5000, 1, 1e-3);
    ASSERT_TRUE(std::isfinite(static_cast<double>(levelled.bound))) << levelled.note;
    EXPECT_GT(levelled.iterations, kLevelOffIterations) << "seed " << seed;
    EXPECT_LT(levelled.iterations, 5000) << "seed " << seed;
    const BlockBound fixed =
        block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, -1, kNoDeadline, levelled.iterations);
    EXPECT_EQ(fixed.bound, levelled.bound) << "seed " << seed;
  }
}

TEST(BlockBound, StopsWhenTheCallerSaysSo) {
  // Each better bound goes to on_bound as it is proven; false stops the bound there.
  Chain c = make_chain(4, 3, /*alike=*/true, std::nullopt);
  c.p.usage_limit = tight_limit(c.p, 1);
  std::vector<long double> seen;
  const BlockBound b = block_bound(c.p, c.blocks, c.ends_and_outside, c.step_block, {}, -1, kNoDeadline, 500, 1, 0,
                                   [&](long double bound) {
                                     seen.push_back(bound);
                                     return seen.size() < 3;
                                   });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_LT(seen[0], seen[1]);
  EXPECT_LT(seen[1], seen[2]);
  EXPECT_EQ(b.bound, seen.back());
  EXPECT_LT(b.iterations, 500);
}

TEST(BlockBound, RejectsANodeInTwoBlocks) {
  Chain c = make_chain(4, 1, true, std::nullopt);
  c.blocks[1].push_back(c.blocks[0][0]);
  EXPECT_THROW(block_bound(c.p, c.blocks, {}, {}, {}, -1, kNoDeadline, 1), std::invalid_argument);
}

}  // namespace
}  // namespace tlm::solver
