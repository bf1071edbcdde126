// Group moves and the coarse MILP: coarsening keeps every labelling cheaper
// than UB (with its exact cost), forest moves never worsen or overfill
// memory and are exact on trees, the coarse MILP with generated memory rows
// finds the brute-force optimum from the worst feasible start, a
// neighbourhood step over every group never overfills and (being the exact
// MILP then) finds it too, neighbourhoods and candidates hold what they
// promise, kicks end feasible, and merging finds the best recombination of
// a pool of labellings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <set>
#include <random>

#include "core/solver/coarse_lns.h"
#include "core/solver/coarse_milp.h"
#include "core/solver/coarsen.h"
#include "core/solver/forest.h"
#include "core/solver/greedy_start.h"
#include "core/solver/kick.h"
#include "core/solver/matrix_pool.h"
#include "core/solver/merge.h"
#include "core/solver/model.h"
#include "core/solver/primal.h"
#include "core/solver/solver.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

using testing::node;

int uni(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// Small problems shaped like compiler exports: chains of "follow" edges
// (diagonal cheap, off-diagonal huge) joining nodes of equal strategy
// counts, plus ordinary resharding edges and a memory limit.
Problem follower_problem(std::mt19937_64& rng, bool tree = false) {
  Problem p;
  const int n = uni(rng, 2, 8);
  const int s = uni(rng, 2, 3);
  for (int i = 0; i < n; ++i) {
    std::vector<Strategy> st;
    for (int k = 0; k < s; ++k) st.push_back({uni(rng, 0, 50), uni(rng, 0, 8)});
    int64_t a = uni(rng, 0, 6);
    p.nodes.push_back(node(a, a + uni(rng, 1, 6), st));
  }
  for (int v = 1; v < n; ++v) {
    int u = uni(rng, 0, v - 1);  // a random tree first
    std::vector<Cost> costs;
    const bool follow = uni(rng, 0, 2) != 0;
    for (int a = 0; a < s; ++a)
      for (int b = 0; b < s; ++b) costs.push_back(follow ? (a == b ? uni(rng, 0, 5) : 1000000000000LL) : uni(rng, 0, 40));
    p.edges.emplace_back(u, v, std::move(costs));
  }
  if (!tree)
    for (int k = uni(rng, 0, n); k > 0; --k) {
      int u = uni(rng, 0, n - 1), v = uni(rng, 0, n - 1);
      if (u == v) continue;
      std::vector<Cost> costs;
      for (int c = 0; c < s * s; ++c) costs.push_back(uni(rng, 0, 40));
      p.edges.emplace_back(u, v, std::move(costs));
    }
  if (!tree) p.usage_limit = uni(rng, 4, 30);
  return p;
}

// The model of p without eliminations; nullopt when the reduction proves p infeasible.
std::optional<Model> model_of(const Problem& p) {
  try {
    return reduce(p, /*eliminate=*/false).model;
  } catch (const InfeasibleError&) {
    return std::nullopt;
  }
}

// Every labelling of the model: (cost, memory-feasible) by enumeration.
struct Enumerated {
  std::vector<std::vector<int>> labels;
  std::vector<__int128> cost;
  std::vector<char> feasible;
};
Enumerated enumerate(const Model& m) {
  Enumerated out;
  Primal p(m);
  std::vector<int> x(m.n, 0);
  while (true) {
    p.set(x);
    out.labels.push_back(x);
    out.cost.push_back(p.cost());
    out.feasible.push_back(p.feasible());
    int i = 0;
    while (i < m.n && ++x[i] == m.num_strategies(i)) x[i++] = 0;
    if (i == m.n) break;
  }
  return out;
}

// The dearest memory-feasible labelling (index) and the cheapest cost; nullopt when none is feasible.
struct Extremes {
  size_t worst = 0;
  __int128 best = 0;
};
std::optional<Extremes> feasible_extremes(const Enumerated& all) {
  std::optional<Extremes> ex;
  for (size_t q = 0; q < all.labels.size(); ++q) {
    if (!all.feasible[q]) continue;
    if (!ex) ex = Extremes{q, all.cost[q]};
    if (all.cost[q] > all.cost[ex->worst]) ex->worst = q;
    ex->best = std::min(ex->best, all.cost[q]);
  }
  return ex;
}

// A random follower problem's model with every labelling enumerated;
// nullopt when the model is empty or no labelling fits in memory.
struct Case {
  Model m;
  Enumerated all;
  Extremes ex;
};
std::optional<Case> feasible_case(std::mt19937_64& rng) {
  std::optional<Model> mo = model_of(follower_problem(rng));
  if (!mo || mo->n == 0) return std::nullopt;
  Enumerated all = enumerate(*mo);
  std::optional<Extremes> ex = feasible_extremes(all);
  if (!ex) return std::nullopt;
  return Case{std::move(*mo), std::move(all), *ex};
}

TEST(SolverCoarsen, KeepsEveryLabellingCheaperThanTheBoundWithItsCost) {
  std::mt19937_64 rng(11);
  int grouped = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = follower_problem(rng);
    p.usage_limit.reset();
    std::optional<Model> mo = model_of(p);
    if (!mo || mo->n == 0) continue;
    const Model& m = *mo;
    Enumerated all = enumerate(m);
    // UB: the median labelling's cost (few groups), and the dearest labelling
    // that pays no "follow" penalty (groups form).
    std::vector<__int128> sorted = all.cost;
    std::sort(sorted.begin(), sorted.end());
    std::vector<__int128> ubs{sorted[sorted.size() / 2]};
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it)
      if (*it < 1000000000000LL) {
        ubs.push_back(*it);
        break;
      }
    for (__int128 ub : ubs) {
      Coarsening c = coarsen(m, ub);
      grouped += c.grouped_nodes;
      const Model& cm = c.coarse;
      for (size_t q = 0; q < all.labels.size(); ++q) {
        if (all.cost[q] > ub || all.cost[q] >= Primal::kConflict) continue;
        // find the coarse labelling that expands to it
        std::vector<int> y(cm.n, -1);
        for (int g = 0; g < cm.n; ++g)
          for (int r = 0; r < cm.num_strategies(g) && y[g] < 0; ++r) {
            bool all_match = true;
            for (size_t sl = c.member_off[g]; sl < c.member_off[g + 1]; ++sl)
              all_match &= c.fine_strategy(sl, r) == all.labels[q][c.members[sl]];
            if (all_match) y[g] = r;
          }
        for (int g = 0; g < cm.n; ++g) ASSERT_GE(y[g], 0) << "trial " << trial << ": labelling of cost <= UB lost";
        __int128 cc = 0;
        for (int g = 0; g < cm.n; ++g) cc += cm.cost[cm.off[g] + y[g]];
        for (const auto& e : cm.edges) cc += cm.mat[e.off + static_cast<size_t>(y[e.u]) * cm.num_strategies(e.v) + y[e.v]];
        ASSERT_EQ(to_string(cc), to_string(all.cost[q])) << "trial " << trial;
      }
    }
  }
  EXPECT_GT(grouped, 300);  // the generator must produce groups
}

TEST(SolverCoarsen, IdentityCoarseningIsTheModel) {
  std::mt19937_64 rng(3);
  Problem p = follower_problem(rng);
  Model m = reduce(p, false).model;
  Coarsening c = identity_coarsening(m);
  EXPECT_EQ(c.coarse.n, m.n);
  EXPECT_EQ(c.coarse.cost, m.cost);
  EXPECT_EQ(c.coarse.mat, m.mat);
  EXPECT_EQ(c.grouped_nodes, 0);
}

// Repeated layers: the same problem block copied k times along a chain,
// so equal matrices appear on many edges.
Problem repeated_blocks(std::mt19937_64& rng, int copies) {
  Problem block = follower_problem(rng, true);
  Problem p;
  const int n = static_cast<int>(block.nodes.size());
  for (int c = 0; c < copies; ++c) {
    for (const auto& nd : block.nodes) p.nodes.push_back(nd);
    for (const auto& e : block.edges) p.edges.emplace_back(e.u + c * n, e.v + c * n, e.costs);
    if (c > 0) {  // link the copies: last node of the previous one to the first of this one
      const int su = static_cast<int>(block.nodes[n - 1].strategies.size());
      const int sv = static_cast<int>(block.nodes[0].strategies.size());
      Edge link{c * n - 1, c * n, std::vector<Cost>(static_cast<size_t>(su) * sv, 7)};
      p.edges.push_back(std::move(link));
    }
  }
  return p;
}

TEST(SolverMatrixPool, EqualMatricesShareOneBlockDistinctOnesDoNot) {
  std::vector<Cost> mat;
  MatrixPool pool(mat);
  const std::vector<Cost> a = {1, 2, 3, 4}, b = {1, 2, 3, 5}, c = {1, 2, 3};
  bool fresh = false;
  const size_t oa = pool.add(a.data(), a.size(), &fresh);
  EXPECT_TRUE(fresh);
  const size_t ob = pool.add(b.data(), b.size(), &fresh);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(pool.add(a.data(), a.size(), &fresh), oa);
  EXPECT_FALSE(fresh);
  const size_t oc = pool.add(c.data(), c.size(), &fresh);  // a prefix of a is not a
  EXPECT_TRUE(fresh);
  EXPECT_EQ(mat.size(), a.size() + b.size() + c.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), mat.begin() + static_cast<std::ptrdiff_t>(oa)));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), mat.begin() + static_cast<std::ptrdiff_t>(ob)));
  EXPECT_TRUE(std::equal(c.begin(), c.end(), mat.begin() + static_cast<std::ptrdiff_t>(oc)));
}

TEST(SolverMatrixPool, RepeatedLayersAreStoredOnceAndSolveTheSame) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Problem p = repeated_blocks(rng, 6);
    Reduction red = reduce(p, false);
    const Model& m = red.model;
    size_t cells = 0;
    std::set<size_t> blocks;
    for (const auto& e : m.edges) {
      cells += static_cast<size_t>(m.num_strategies(e.u)) * m.num_strategies(e.v);
      blocks.insert(e.off);
    }
    if (m.edges.size() < 6) continue;  // reduction left too little to repeat
    ++checked;
    ASSERT_LT(m.mat.size(), cells) << "trial " << trial;  // the six copies' matrices share storage
    ASSERT_LT(blocks.size(), m.edges.size()) << "trial " << trial;
    // Every edge still reads its own matrix: a labelling's model cost plus
    // the offset is the problem's cost of its expansion.
    std::mt19937_64 r2(trial);
    std::vector<int> x(m.n);
    for (int i = 0; i < m.n; ++i) x[i] = uni(r2, 0, m.num_strategies(i) - 1);
    __int128 direct = m.offset;
    bool forbidden = false;
    for (int i = 0; i < m.n; ++i) direct += m.cost[m.off[i] + x[i]];
    for (const auto& e : m.edges) {
      const Cost c = m.mat[e.off + static_cast<size_t>(x[e.u]) * m.num_strategies(e.v) + x[e.v]];
      if (c == kInfiniteCost) forbidden = true;
      else direct += c;
    }
    if (forbidden) continue;
    Problem unlimited = p;
    unlimited.usage_limit.reset();
    ASSERT_EQ(to_string(direct), to_string(evaluate(unlimited, red.expand(x)).cost)) << "trial " << trial;
  }
  EXPECT_GT(checked, 15);
}

TEST(SolverCoarsen, CoarseMatricesOfRepeatedLayersAreSharedAndExact) {
  std::mt19937_64 rng(13);
  int shared = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Problem p = repeated_blocks(rng, 5);
    std::optional<Model> mo = model_of(p);
    if (!mo || mo->n == 0) continue;
    const Model& m = *mo;
    Primal start(m);
    start.set(greedy_labels(m));
    if (!start.feasible() && !start.repair()) continue;
    Coarsening c = coarsen(m, start.cost());
    std::set<size_t> blocks;
    for (const auto& e : c.coarse.edges) blocks.insert(e.off);
    shared += blocks.size() < c.coarse.edges.size();
    // The start labelling costs the same on the coarse model.
    std::vector<int> y(c.coarse.n);
    bool followed = true;
    for (int g = 0; g < c.coarse.n; ++g) {
      y[g] = c.label_of(g, start.labels());
      followed = followed && y[g] >= 0;
    }
    ASSERT_TRUE(followed) << "trial " << trial;
    __int128 coarse_cost = 0;
    for (int g = 0; g < c.coarse.n; ++g) coarse_cost += c.coarse.cost[c.coarse.off[g] + y[g]];
    for (const auto& e : c.coarse.edges)
      coarse_cost += c.coarse.mat[e.off + static_cast<size_t>(y[e.u]) * c.coarse.num_strategies(e.v) + y[e.v]];
    ASSERT_EQ(to_string(coarse_cost), to_string(start.cost())) << "trial " << trial;
  }
  EXPECT_GT(shared, 20);
}

TEST(SolverCoarsen, PastItsDeadlineCoarsenThrowsTimeout) {
  std::mt19937_64 rng(17);
  Problem p = repeated_blocks(rng, 4);
  std::optional<Model> mo = model_of(p);
  ASSERT_TRUE(mo && mo->n > 0);
  Primal start(*mo);
  start.set(greedy_labels(*mo));
  ASSERT_TRUE(start.feasible() || start.repair());
  EXPECT_THROW(coarsen(*mo, start.cost(), Clock::now() - std::chrono::seconds(1)), CoarsenTimeout);
  EXPECT_NO_THROW(coarsen(*mo, start.cost(), Clock::now() + std::chrono::hours(1)));
}

TEST(SolverForest, SingleNodeMovesWithoutACopyMatchTheIdentityCoarsening) {
  std::mt19937_64 rng(19);
  for (int trial = 0; trial < 200; ++trial) {
    Problem p = follower_problem(rng, trial % 2 == 0);
    std::optional<Model> mo = model_of(p);
    if (!mo || mo->n == 0) continue;
    const Model& m = *mo;
    Primal a(m), b(m);
    a.set(greedy_labels(m));
    if (!a.feasible()) continue;
    b.set(a.labels());
    Coarsening c = identity_coarsening(m);
    ForestMoves with_copy(m, c), without(m);
    std::mt19937_64 ra(trial), rb(trial);
    for (int sw = 0; sw < 3; ++sw) ASSERT_EQ(with_copy.sweep(a, ra), without.sweep(b, rb)) << "trial " << trial;
    ASSERT_EQ(a.labels(), b.labels()) << "trial " << trial;
  }
}

TEST(SolverForest, NeverWorsensNeverOverfillsAndIsExactOnTrees) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const bool tree = trial % 2 == 0;
    Problem p = follower_problem(rng, tree);
    std::optional<Model> mo = model_of(p);
    if (!mo || mo->n == 0) continue;
    const Model& m = *mo;
    Enumerated all = enumerate(m);
    __int128 best = -1;
    std::vector<size_t> feasible;
    for (size_t q = 0; q < all.labels.size(); ++q)
      if (all.feasible[q]) {
        feasible.push_back(q);
        if (best < 0 || all.cost[q] < best) best = all.cost[q];
      }
    if (feasible.empty()) continue;
    Coarsening c = identity_coarsening(m);
    ForestMoves fm(m, c);
    Primal primal(m);
    primal.set(all.labels[feasible[uni(rng, 0, static_cast<int>(feasible.size()) - 1)]]);
    __int128 before = primal.cost();
    std::mt19937_64 r2(trial);
    fm.sweep(primal, r2);
    ASSERT_TRUE(primal.feasible()) << "trial " << trial;
    ASSERT_LE(primal.cost(), before) << "trial " << trial;
    // A tree without memory limit is one forest: the sweep reaches the optimum.
    if (tree && !m.cap.size()) ASSERT_EQ(to_string(primal.cost()), to_string(best)) << "trial " << trial;
  }
}

TEST(SolverCoarseMilp, ReachesTheBruteForceOptimumFromTheWorstStart) {
  ASSERT_TRUE(testing::locate_highs());
  std::mt19937_64 rng(17);
  int solved = 0, generated = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    const size_t worst = ex.worst;
    const __int128 best = ex.best;
    std::vector<int> x = all.labels[worst];
    __int128 cost = all.cost[worst];
    Coarsening c = coarsen(m, cost);
    int offers = 0;
    CoarseMilpResult r = coarse_milp_search(
        m, c, x, cost, Clock::now() + std::chrono::seconds(20), 1, 0,
        [&](const std::vector<int>&, __int128) { ++offers; }, [] { return false; },
        /*initial_rows=*/trial % 2);  // no or one row at first: the others must be generated
    ASSERT_TRUE(r.ran);
    EXPECT_TRUE(r.optimal) << "trial " << trial;
    ASSERT_EQ(to_string(cost), to_string(best)) << "trial " << trial;
    Primal check(m);
    check.set(x);
    ASSERT_TRUE(check.feasible());
    ASSERT_EQ(to_string(check.cost()), to_string(best));
    ASSERT_LE(r.bound, static_cast<long double>(best));
    ++solved;
    generated += r.rows > static_cast<size_t>(trial % 2);
  }
  EXPECT_GT(solved, 100);
  EXPECT_GT(generated, 10);  // memory rows were generated on demand
}

TEST(SolverCoarseLns, RegionOfEverythingReachesTheOptimumAndNeverOverfills) {
  ASSERT_TRUE(testing::locate_highs());
  std::mt19937_64 rng(23);
  int reached = 0, tried = 0;
  for (int trial = 0; trial < 120; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    const size_t worst = ex.worst;
    const __int128 best = ex.best;
    Coarsening c = coarsen(m, all.cost[worst]);
    CoarseLns lns(m, c);
    Primal primal(m);
    primal.set(all.labels[worst]);
    CoarseLnsOptions opt;
    opt.region_groups = c.coarse.n;
    opt.region_columns = SIZE_MAX;
    opt.max_strategies = 1000;
    std::vector<int> region;  // every group with a choice (connected or not)
    for (int g = 0; g < c.coarse.n; ++g)
      if (c.coarse.num_strategies(g) > 1) region.push_back(g);
    if (region.empty()) continue;
    ++tried;
    const __int128 before = primal.cost();
    for (int round = 0; round < 3; ++round) lns.step(primal, region, opt, 10.0, trial);
    ASSERT_TRUE(primal.feasible()) << "trial " << trial;
    ASSERT_LE(primal.cost(), before) << "trial " << trial;
    reached += primal.cost() == best;
  }
  EXPECT_GT(tried, 60);
  EXPECT_GT(reached, tried * 9 / 10);  // the whole model in one region is the exact MILP
}

TEST(SolverCoarseLns, RegionLiveAtHoldsTheMovableGroupsLiveThereWithinBudget) {
  std::mt19937_64 rng(29);
  int checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    if (m.cap.empty()) continue;
    Coarsening c = coarsen(m, all.cost[ex.worst]);
    CoarseLns lns(m, c);
    Primal primal(m);
    primal.set(all.labels[ex.worst]);
    const int k = uni(rng, 0, static_cast<int>(m.cap.size()) - 1);
    std::set<int> expected;
    for (int i = 0; i < m.n; ++i) {
      const int g = c.group_of[i];
      if (m.plo[i] <= k && k < m.phi[i] && c.coarse.num_strategies(g) > 1 && c.label_of(g, primal.labels()) >= 0)
        expected.insert(g);
    }
    CoarseLnsOptions all_of_it;
    all_of_it.region_groups = c.coarse.n;
    all_of_it.region_columns = SIZE_MAX;
    std::vector<int> region = lns.region_live_at(k, primal, all_of_it, rng);
    ASSERT_EQ(std::set<int>(region.begin(), region.end()), expected) << "trial " << trial;
    ASSERT_EQ(region.size(), expected.size()) << "trial " << trial;  // no group twice
    // Extending a region keeps it in front and adds only movable groups live at k.
    std::vector<int> seed_region = lns.region_from(uni(rng, 0, c.coarse.n - 1), primal, all_of_it);
    std::vector<int> grown = lns.region_live_at(k, primal, all_of_it, rng, seed_region);
    ASSERT_TRUE(std::equal(seed_region.begin(), seed_region.end(), grown.begin()));
    std::set<int> added(grown.begin() + seed_region.size(), grown.end());
    ASSERT_EQ(added.size(), grown.size() - seed_region.size());
    for (int g : added) {
      ASSERT_TRUE(expected.count(g)) << "trial " << trial;
      ASSERT_EQ(std::count(seed_region.begin(), seed_region.end(), g), 0);
    }
    for (int g : expected)
      ASSERT_TRUE(added.count(g) || std::count(seed_region.begin(), seed_region.end(), g)) << "trial " << trial;
    CoarseLnsOptions one;
    one.region_groups = 1;
    std::vector<int> single = lns.region_live_at(k, primal, one, rng);
    ASSERT_EQ(single.size(), std::min<size_t>(1, expected.size()));
    if (!single.empty()) ASSERT_TRUE(expected.count(single[0]));
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(SolverCoarseLns, CandidatesKeepTheCurrentTheCheapestAndTheLeanest) {
  std::mt19937_64 rng(31);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = follower_problem(rng);
    std::optional<Model> mo = model_of(p);
    if (!mo || mo->n == 0) continue;
    const Model& m = *mo;
    Coarsening c = identity_coarsening(m);
    CoarseLns lns(m, c);
    for (int g = 0; g < c.coarse.n; ++g) {
      const int n = c.coarse.num_strategies(g);
      if (n < 3) continue;
      auto footprint = [&](int r) {
        long double f = 0;
        for (size_t sl = c.member_off[g]; sl < c.member_off[g + 1]; ++sl) {
          const int i = c.members[sl];
          f += static_cast<long double>(m.usage[m.off[i] + c.fine_strategy(sl, r)]) * (m.phi[i] - m.plo[i]);
        }
        return f;
      };
      const int cur = uni(rng, 0, n - 1);
      std::vector<std::pair<Cost, int>> cand;
      for (int r = 0; r < n; ++r) cand.emplace_back(r == cur ? std::numeric_limits<Cost>::min() : uni(rng, 0, 20), r);
      // The cheapest other strategy, and the leanest (the cheapest of the leanest on ties).
      int cheapest = -1, leanest = -1;
      for (const auto& [key, r] : cand) {
        if (r == cur) continue;
        auto before = [&](int a, int b) { return cand[a].first != cand[b].first ? cand[a].first < cand[b].first : a < b; };
        if (cheapest < 0 || before(r, cheapest)) cheapest = r;
        if (leanest < 0 || footprint(r) < footprint(leanest) || (footprint(r) == footprint(leanest) && before(r, leanest)))
          leanest = r;
      }
      for (int count = 2; count <= n; ++count) {
        std::vector<std::pair<Cost, int>> out = lns.pick_candidates(g, cand, count);
        ASSERT_EQ(out.size(), static_cast<size_t>(count));
        ASSERT_EQ(out[0].second, cur);
        std::set<int> picked;
        for (const auto& kr : out) picked.insert(kr.second);
        ASSERT_EQ(picked.size(), out.size()) << "a strategy picked twice";
        ASSERT_TRUE(picked.count(leanest)) << "trial " << trial << " count " << count;
        if (count >= 4) ASSERT_TRUE(picked.count(cheapest)) << "trial " << trial << " count " << count;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(SolverKick, ResultsAreFeasibleAndDirectedKicksImproveSomeStarts) {
  std::mt19937_64 rng(37);
  int improved = 0, feasible_results = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    Coarsening c = coarsen(m, all.cost[ex.worst]);
    CoarseLns lns(m, c);
    ForestMoves moves(m, c);
    for (int variant = 0; variant < 4; ++variant) {
      Primal primal(m);
      primal.set(all.labels[ex.worst]);
      const __int128 start = primal.cost();
      if (!kick(m, c, moves, lns, primal, rng, variant % 2 == 0, variant / 2 == 0, Clock::time_point::max())) continue;
      ASSERT_TRUE(primal.feasible()) << "trial " << trial << " variant " << variant;
      ASSERT_GE(primal.cost(), ex.best);
      ++feasible_results;
      improved += primal.cost() < start;
    }
  }
  EXPECT_GT(feasible_results, 100);
  EXPECT_GT(improved, feasible_results / 4);
}

// cost + sum_i price_i * usage_i, in long double.
long double priced_objective(const Model& m, const Primal& p, const std::vector<double>& price) {
  long double v = static_cast<long double>(p.cost());
  for (int i = 0; i < m.n; ++i) v += price[i] * static_cast<long double>(m.usage[m.off[i] + p.labels()[i]]);
  return v;
}

TEST(SolverForest, PricedSweepLowersThePricedObjectiveAndBuysMemoryWhenPricesAreHigh) {
  std::mt19937_64 rng(41);
  int moved = 0, bought = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    Coarsening c = coarsen(m, all.cost[ex.worst]);
    ForestMoves moves(m, c);
    size_t cheapest = 0;
    while (!all.feasible[cheapest] || all.cost[cheapest] != ex.best) ++cheapest;
    // Low prices from the dearest labelling, high ones from the cheapest.
    for (auto [level, start] : {std::pair{0.5, ex.worst}, std::pair{1000.0, cheapest}}) {
      std::vector<double> price(m.n);
      for (double& q : price) q = level * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
      const std::vector<double> ones(m.n, 1.0);
      Primal primal(m);
      primal.set(all.labels[start]);
      const long double before = priced_objective(m, primal, price);
      const __int128 cost_before = primal.cost();
      const long double usage_before = priced_objective(m, primal, ones) - cost_before;
      const int accepted = moves.sweep(primal, rng, &price, /*respect_memory=*/false);
      const long double after = priced_objective(m, primal, price);
      ASSERT_LE(after, before + 1e-6L) << "trial " << trial;
      if (accepted == 0) continue;
      ASSERT_LT(after, before) << "an accepted forest must lower the priced objective";
      ++moved;
      // Memory bought at a higher true cost: only a priced acceptance does that.
      const long double usage_after = priced_objective(m, primal, ones) - primal.cost();
      if (usage_after < usage_before && primal.cost() > cost_before) ++bought;
    }
  }
  EXPECT_GT(moved, 50);
  EXPECT_GT(bought, 10);
}

TEST(SolverKick, PricedKicksAreFeasibleAndImproveSomeStarts) {
  std::mt19937_64 rng(43);
  int improved = 0, feasible_results = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    if (m.cap.empty()) continue;
    Coarsening c = coarsen(m, all.cost[ex.worst]);
    ForestMoves moves(m, c);
    for (double level : {0.1, 1.0, 10.0}) {
      std::vector<double> price(m.n, level);
      Primal primal(m);
      primal.set(all.labels[ex.worst]);
      const __int128 start = primal.cost();
      if (!priced_kick(m, moves, primal, price, rng, Clock::time_point::max())) continue;
      ASSERT_TRUE(primal.feasible()) << "trial " << trial << " level " << level;
      ASSERT_GE(primal.cost(), ex.best);
      ++feasible_results;
      improved += primal.cost() < start;
    }
  }
  EXPECT_GT(feasible_results, 50);
  EXPECT_GT(improved, feasible_results / 4);
}

TEST(SolverMerge, RecentPoolKeepsTheMostRecentDistinctLabellings) {
  RecentPool pool(3);
  EXPECT_TRUE(pool.add({0, 1}, 50));
  EXPECT_FALSE(pool.add({0, 1}, 50));  // already there
  EXPECT_TRUE(pool.add({1, 1}, 50));   // same cost, other labels
  EXPECT_TRUE(pool.add({2, 2}, 70));
  EXPECT_TRUE(pool.add({3, 3}, 80));   // full: replaces the oldest, {0, 1}
  EXPECT_TRUE(pool.add({4, 4}, 10));   // then {1, 1}
  ASSERT_EQ(pool.size(), 3u);
  std::set<std::vector<int>> have(pool.members().begin(), pool.members().end());
  EXPECT_EQ(have, (std::set<std::vector<int>>{{2, 2}, {3, 3}, {4, 4}}));
  EXPECT_EQ(pool.version(), 5);
}

// Merging reaches the optimum over labellings that take each node's
// strategy from the start or from a pool member (by enumeration), ends
// feasible and never above the start.
TEST(SolverMerge, FindsTheBestRecombinationOfThePool) {
  ASSERT_TRUE(testing::locate_highs());
  std::mt19937_64 rng(71);
  int merged = 0, improved = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::optional<Case> cs = feasible_case(rng);
    if (!cs) continue;
    const auto& [m, all, ex] = *cs;
    std::vector<size_t> feasible;
    for (size_t q = 0; q < all.labels.size(); ++q)
      if (all.feasible[q]) feasible.push_back(q);
    if (feasible.size() < 3) continue;
    std::vector<std::vector<int>> pool;
    for (int k = uni(rng, 1, 3); k > 0; --k) pool.push_back(all.labels[feasible[rng() % feasible.size()]]);
    std::vector<int> x = all.labels[ex.worst];
    __int128 cost = all.cost[ex.worst];
    const __int128 start = cost;
    // The optimum over the recombinations, by enumeration.
    __int128 want = cost;
    for (size_t q : feasible) {
      bool inside = true;
      for (int i = 0; i < m.n && inside; ++i) {
        bool any = all.labels[q][i] == x[i];
        for (const auto& y : pool) any = any || all.labels[q][i] == y[i];
        inside = any;
      }
      if (inside) want = std::min(want, all.cost[q]);
    }
    int offers = 0;
    MergeResult r = merge_solutions(
        m, pool, x, cost, Clock::now() + std::chrono::seconds(20), 0, 1000000,
        [&](const std::vector<int>&, __int128) { ++offers; }, [] { return false; });
    Primal check(m);
    check.set(x);
    ASSERT_TRUE(check.feasible()) << "trial " << trial;
    ASSERT_EQ(to_string(check.cost()), to_string(cost)) << "trial " << trial;
    if (r.free_nodes == 0) {
      ASSERT_EQ(to_string(cost), to_string(start));
      continue;
    }
    ASSERT_TRUE(r.ran) << "trial " << trial;
    ASSERT_EQ(to_string(cost), to_string(want)) << "trial " << trial;
    EXPECT_EQ(r.improved, cost < start);
    EXPECT_EQ(offers > 0, cost < start);
    ++merged;
    improved += cost < start;
  }
  EXPECT_GT(merged, 80);
  EXPECT_GT(improved, 30);
}

}  // namespace
}  // namespace tlm::solver
