#include "core/solver/coarse_lns.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>

#include "core/solver/cost_math.h"
#include "core/solver/milp.h"

namespace tlm::solver {

namespace {

constexpr char kInRegion = 2;

// MILP columns group g adds to a region (the groups h with state[h] ==
// kInRegion): its candidate strategies, and one per strategy pair on each
// of its edges into the region.
size_t added_columns(const Model& cm, int g, const std::vector<char>& state, int max_strategies) {
  auto width = [&](int h) { return static_cast<size_t>(std::min(cm.num_strategies(h), max_strategies)); };
  size_t add = width(g);
  for (size_t a = cm.adj_off[g]; a < cm.adj_off[g + 1]; ++a) {
    const auto& e = cm.edges[cm.adj[a]];
    const int h = e.u == g ? e.v : e.u;
    if (state[h] == kInRegion) add += width(g) * width(h);
  }
  return add;
}

// Adds group g to `region` when it can be re-solved (two or more strategies,
// its members following one coarse strategy of labelling x) and its columns
// fit the budget (the first group always fits); true when it was added.
bool admit(const Coarsening& c, int g, const std::vector<int>& x, const CoarseLnsOptions& opt,
           std::vector<char>& state, std::vector<int>& region, size_t& columns) {
  if (c.coarse.num_strategies(g) < 2 || c.label_of(g, x) < 0) return false;
  const size_t add = added_columns(c.coarse, g, state, opt.max_strategies);
  if (!region.empty() && columns + add > opt.region_columns) return false;
  columns += add;
  state[g] = kInRegion;
  region.push_back(g);
  return true;
}

}  // namespace

CoarseLns::CoarseLns(const Model& m, const Coarsening& c) : m_(m), c_(c), cm_(c.coarse) {}

std::vector<int> CoarseLns::region_from(int center, const Primal& primal, const CoarseLnsOptions& opt) const {
  const std::vector<int>& x = primal.labels();
  std::vector<int> region;
  std::vector<char> seen(cm_.n, 0);
  std::deque<int> queue{center};
  seen[center] = 1;
  size_t columns = 0;
  while (!queue.empty() && static_cast<int>(region.size()) < opt.region_groups) {
    int g = queue.front();
    queue.pop_front();
    if (!admit(c_, g, x, opt, seen, region, columns)) continue;
    for (size_t a = cm_.adj_off[g]; a < cm_.adj_off[g + 1]; ++a) {
      const auto& e = cm_.edges[cm_.adj[a]];
      int h = e.u == g ? e.v : e.u;
      if (!seen[h]) seen[h] = 1, queue.push_back(h);
    }
  }
  return region;
}

int CoarseLns::tight_center(const Primal& primal, std::mt19937_64& rng, int* point) const {
  std::vector<int> tight = primal.tightest_points(8);
  if (point) *point = -1;
  if (tight.empty()) return static_cast<int>(rng() % cm_.n);
  int k = tight[rng() % tight.size()];
  if (point) *point = k;
  std::vector<int> live;
  for (int i = 0; i < m_.n; ++i)
    if (m_.plo[i] <= k && k < m_.phi[i]) live.push_back(c_.group_of[i]);
  if (live.empty()) return static_cast<int>(rng() % cm_.n);
  return live[rng() % live.size()];
}

std::vector<int> CoarseLns::region_live_at(int k, const Primal& primal, const CoarseLnsOptions& opt,
                                           std::mt19937_64& rng, std::vector<int> region) const {
  const std::vector<int>& x = primal.labels();
  std::vector<int> live;
  std::vector<char> seen(cm_.n, 0);
  for (int i = 0; i < m_.n; ++i) {
    const int g = c_.group_of[i];
    if (m_.plo[i] <= k && k < m_.phi[i] && !seen[g]) seen[g] = 1, live.push_back(g);
  }
  std::shuffle(live.begin(), live.end(), rng);
  std::fill(seen.begin(), seen.end(), 0);
  size_t columns = 0;
  for (int g : region) {  // the region given to extend
    columns += added_columns(cm_, g, seen, opt.max_strategies);
    seen[g] = kInRegion;
  }
  for (int g : live) {
    if (seen[g] == kInRegion) continue;
    if (static_cast<int>(region.size()) >= opt.region_groups) break;
    admit(c_, g, x, opt, seen, region, columns);
  }
  return region;
}

std::vector<std::pair<Cost, int>> CoarseLns::pick_candidates(int g, std::vector<std::pair<Cost, int>> cand,
                                                              int count) const {
  // Memory footprint of each coarse strategy: its members' usage summed
  // over their live points' count (what a lean choice frees, over time).
  auto footprint = [&](int r) {
    long double f = 0;
    for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
      const int i = c_.members[sl];
      if (m_.plo[i] < m_.phi[i])
        f += static_cast<long double>(m_.usage[m_.off[i] + c_.fine_strategy(sl, r)]) * (m_.phi[i] - m_.plo[i]);
    }
    return f;
  };
  std::sort(cand.begin(), cand.end());  // the current one first (its key is the minimum), then by cost
  std::vector<std::pair<Cost, int>> out{cand[0]};
  std::vector<char> taken(cand.size(), 0);
  taken[0] = 1;
  // Pareto frontier over (cost, footprint), cheapest first.
  std::vector<size_t> frontier;
  long double lean = std::numeric_limits<long double>::infinity();
  for (size_t q = 1; q < cand.size(); ++q) {
    const long double f = footprint(cand[q].second);
    if (f < lean) lean = f, frontier.push_back(q);
  }
  // Up to half the places go to the frontier, spread from cheapest to leanest.
  const size_t half = static_cast<size_t>(count) / 2;
  const size_t f = frontier.size();
  for (size_t t = 0; t < std::min(half, f); ++t) {
    size_t at = t;  // all of it when it fits; else evenly spaced, ending at the leanest
    if (f > half) at = half == 1 ? f - 1 : t * (f - 1) / (half - 1);
    const size_t q = frontier[at];
    if (!taken[q]) taken[q] = 1, out.push_back(cand[q]);
  }
  for (size_t q = 1; q < cand.size() && out.size() < static_cast<size_t>(count); ++q)
    if (!taken[q]) taken[q] = 1, out.push_back(cand[q]);
  return out;
}

bool CoarseLns::step(Primal& primal, const std::vector<int>& region_in, const CoarseLnsOptions& opt, double seconds,
                     uint64_t seed) {
  const auto t0 = Clock::now();
  const std::vector<int> x = primal.labels();
  std::vector<int> region = region_in;
  std::sort(region.begin(), region.end());
  std::vector<int> local(cm_.n, -1);
  for (size_t q = 0; q < region.size(); ++q) local[region[q]] = static_cast<int>(q);

  // Sub-model: region groups with their affordable strategies; unary cost
  // includes the fine edges to everything outside the region (held fixed).
  Model sub;
  sub.n = static_cast<int>(region.size());
  sub.off.assign(1, 0);
  std::vector<std::vector<int>> to_sub(sub.n);
  std::vector<int> start(sub.n, -1);
  std::vector<std::pair<Cost, int>> cand;
  std::vector<Cost> unary_of(1);
  for (int g : region) unary_of.resize(std::max<size_t>(unary_of.size(), cm_.num_strategies(g)));
  for (int q = 0; q < sub.n; ++q) {
    const int g = region[q];
    const int cur = c_.label_of(g, x);
    to_sub[q].assign(cm_.num_strategies(g), -1);
    cand.clear();
    for (int r = 0; r < cm_.num_strategies(g); ++r) {
      Cost c = cm_.cost[cm_.off[g] + r];
      if (c >= kHugeCost) continue;
      for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1] && c != kInfiniteCost; ++sl) {
        const int i = c_.members[sl];
        const int s = c_.fine_strategy(sl, r);
        for (size_t a = m_.adj_off[i]; a < m_.adj_off[i + 1]; ++a) {
          const auto& e = m_.edges[m_.adj[a]];
          const int j = e.u == i ? e.v : e.u;
          if (local[c_.group_of[j]] >= 0) continue;
          const int sv = m_.num_strategies(e.v);
          Cost ec = e.u == i ? m_.mat[e.off + static_cast<size_t>(s) * sv + x[j]]
                             : m_.mat[e.off + static_cast<size_t>(x[j]) * sv + s];
          c = sat_add(c, ec);
          if (c == kInfiniteCost) break;
        }
      }
      if (c == kInfiniteCost || (c >= kHugeCost && r != cur)) continue;
      cand.emplace_back(r == cur ? std::numeric_limits<Cost>::min() : c, r);  // the current one always stays
      unary_of[r] = c;
    }
    // The cheapest few given the rest, and the cost/memory trade-off curve:
    // keeps HiGHS' model small on groups with many strategies.
    if (cand.size() > static_cast<size_t>(opt.max_strategies)) cand = pick_candidates(g, std::move(cand), opt.max_strategies);
    std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [key, r] : cand) {
      to_sub[q][r] = static_cast<int>(sub.strat.size() - sub.off.back());
      sub.strat.push_back(r);
      sub.cost.push_back(unary_of[r]);
      sub.usage.push_back(0);
    }
    sub.off.push_back(sub.strat.size());
    if (cur < 0 || to_sub[q][cur] < 0) return false;  // the current choice must stay available
    start[q] = to_sub[q][cur];
  }
  for (size_t e = 0; e < cm_.edges.size(); ++e) {
    const auto& ed = cm_.edges[e];
    int a = local[ed.u], b = local[ed.v];
    if (a < 0 || b < 0) continue;
    Model::ModelEdge se{a, b, sub.mat.size()};
    const int sv = cm_.num_strategies(ed.v);
    for (int s = 0; s < cm_.num_strategies(ed.u); ++s) {
      if (to_sub[a][s] < 0) continue;
      for (int t = 0; t < sv; ++t)
        if (to_sub[b][t] >= 0) sub.mat.push_back(cm_.mat[ed.off + static_cast<size_t>(s) * sv + t]);
    }
    sub.edges.push_back(se);
  }
  sub.adj_off.assign(sub.n + 1, 0);
  sub.plo.assign(sub.n, 0);
  sub.phi.assign(sub.n, 0);

  // Memory rows on demand. Capacity at point k: slack + the region's own usage there now.
  std::vector<int> members;
  for (int g : region)
    for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl)
      if (m_.plo[c_.members[sl]] < m_.phi[c_.members[sl]]) members.push_back(c_.members[sl]);
  const std::vector<__int128> slack0 = m_.cap.empty() ? std::vector<__int128>{} : primal.slack_tree().values();
  std::vector<MemoryRow> rows;
  std::vector<char> have(slack0.size(), 0);
  auto add_row = [&](int k) {
    if (have[k]) return;
    have[k] = 1;
    MemoryRow row;
    __int128 cap = slack0[k];
    std::vector<double> coef(sub.strat.size(), 0.0);
    for (int i : members) {
      if (m_.plo[i] > k || k >= m_.phi[i]) continue;
      cap += m_.usage[m_.off[i] + x[i]];
      const int q = local[c_.group_of[i]];
      const size_t sl = c_.slot_of[i];
      for (size_t t = sub.off[q]; t < sub.off[q + 1]; ++t)
        coef[t] += static_cast<double>(m_.usage[m_.off[i] + c_.fine_strategy(sl, sub.strat[t])]);
    }
    row.cap = static_cast<double>(cap);
    for (size_t t = 0; t < coef.size(); ++t)
      if (coef[t] != 0.0) row.terms.emplace_back(t, coef[t]);
    rows.push_back(std::move(row));
  };
  // Start with the region's five tightest points.
  if (!members.empty()) {
    std::vector<int> cover(slack0.size() + 1, 0);
    for (int i : members) ++cover[m_.plo[i]], --cover[m_.phi[i]];
    std::vector<int> pts;
    int run = 0;
    for (size_t k = 0; k < slack0.size(); ++k) {
      run += cover[k];
      if (run > 0) pts.push_back(static_cast<int>(k));
    }
    std::partial_sort(pts.begin(), pts.begin() + std::min<size_t>(5, pts.size()), pts.end(),
                      [&](int a, int b) { return slack0[a] != slack0[b] ? slack0[a] < slack0[b] : a < b; });
    for (size_t k = 0; k < std::min<size_t>(5, pts.size()); ++k) add_row(pts[k]);
  }

  const __int128 before = primal.cost();
  for (int round = 0; round < 6; ++round) {
    double left = seconds - std::chrono::duration<double>(Clock::now() - t0).count();
    if (left < 0.02) return false;
    MilpOptions mo;
    mo.time_limit_s = left;
    mo.threads = 1;
    mo.seed = seed + round;
    mo.start = &start;
    mo.rows = &rows;
    MilpResult r = solve_milp(sub, mo);
    if (r.labels.empty() || r.labels == start) return false;
    std::vector<std::pair<int, int>> undo;
    for (int q = 0; q < sub.n; ++q) {
      const int g = region[q];
      const int rr = sub.strat[sub.off[q] + r.labels[q]];
      for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
        const int i = c_.members[sl];
        const int s = c_.fine_strategy(sl, rr);
        if (s != x[i]) undo.emplace_back(i, x[i]), primal.move(i, s);
      }
    }
    const bool fits = primal.memory_ok();
    if (fits && primal.cost() < before) return true;
    std::vector<int> over;
    if (!fits) {
      std::vector<__int128> now = primal.slack_tree().values();
      for (size_t k = 0; k < now.size(); ++k)
        if (now[k] < 0 && !have[k]) over.push_back(static_cast<int>(k));
      std::sort(over.begin(), over.end(), [&](int a, int b) { return now[a] != now[b] ? now[a] < now[b] : a < b; });
      if (over.size() > 8) over.resize(8);
    }
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) primal.move(it->first, it->second);
    if (over.empty()) return false;  // fits but not better, or nothing new to add
    for (int k : over) add_row(k);
  }
  return false;
}

}  // namespace tlm::solver
